"""Recorded traffic for the routing what-if: what the pipeline put on Kafka, and the export file format.

A ``Recording`` is topology-free and raw: the FlowBatches of ``flowtracer.flows.v1`` (per window,
per host and leaf: every QP's bytes and RoCEv2 5-tuple) and what the processor made of them on
``flowtracer.link-loads.v1``, ``flowtracer.path-loads.v1`` and ``flowtracer.fim.v1``, all with their
window ends inside one time range. ``windows()`` turns the FlowBatches into per-window
``RecordedFlow`` lists named with a topology's NICs, the way the processor's ``flow_obs`` does.

Export file (``flowtracer export``), format ``flowtracer-recording`` version 1: UTF-8 JSON lines.
Line 1 is a header object::

    {"format": "flowtracer-recording", "version": 1, "exported_ns": 1795359680000000000,
     "source": "kafka://127.0.0.1:9092", "from_ns": 0, "to_ns": 1795359680000000000,
     "counts": {"flowtracer.flows.v1": 352, ...}}

Every further line is one record: ``{"topic": "<topic name>", "record": <message>}`` where the
message is the protobuf record in the proto3 JSON mapping with the .proto field names (64-bit
integers are JSON strings, enums their names), exactly as ``google.protobuf.json_format`` writes and
reads it. Topics: the four above, with messages FlowBatch, LinkLoad, PathLoad and FimSample. A
reader rejects another format name or a newer version, and names the file and line of any bad line.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format
from google.protobuf.message import Message

from flowtracer.fabric.routing import Fabric
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, flows_pb2
from flowtracer.stream.analytics.flow_obs import Unattributed, placed_ends

FORMAT = "flowtracer-recording"
VERSION = 1

#: Topics a recording holds and the message of each.
MESSAGES: dict[str, type[Message]] = {
    topics.FLOWS.name: flows_pb2.FlowBatch,
    topics.LINK_LOADS.name: analytics_pb2.LinkLoad,
    topics.PATH_LOADS.name: analytics_pb2.PathLoad,
    topics.FIM.name: analytics_pb2.FimSample,
}


class RecordingError(ValueError):
    """A recording cannot be read; ``str()`` names the file, line and problem in one line."""


@dataclass(frozen=True, slots=True)
class RecordedFlow:
    """One QP's transmit direction in one window, named with the topology's NICs. ``bytes``: tx bytes
    (RoCEv2 frames, as the agents count them) in the window."""

    flow_id: str  # "<src_nic>/<lqpn>/<qp_generation>", as the processor names flows
    src_nic: str
    dst_nic: str
    src_ip: str
    dst_ip: str
    udp_src_port: int
    udp_dst_port: int
    lqpn: int
    rqpn: int
    bytes: int
    comm_id: str = ""
    channel: int = -1  # NCCL channel when the NCCL log tagged the QP as a sender, else -1
    job_id: str = ""
    collective: str = ""

    @property
    def coupling(self) -> str:
        """The set of flows that progress together: one NCCL ring channel, else the flow alone."""
        if self.comm_id and self.channel >= 0:
            return f"{self.comm_id}/ch{self.channel}"
        return self.flow_id


@dataclass(frozen=True)
class Window:
    """The flows of one agent window [start_ns, end_ns), ns since the epoch."""

    start_ns: int
    end_ns: int
    flows: tuple[RecordedFlow, ...]

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass
class Recording:
    """Raw records of one time range; ``skipped`` counts records that could not be decoded."""

    flow_batches: list[flows_pb2.FlowBatch] = field(default_factory=list)
    link_loads: list[analytics_pb2.LinkLoad] = field(default_factory=list)
    path_loads: list[analytics_pb2.PathLoad] = field(default_factory=list)
    fims: list[analytics_pb2.FimSample] = field(default_factory=list)
    skipped: int = 0
    source: str = ""

    def add(self, topic: str, msg: Message) -> None:
        """File a decoded record under its topic."""
        if isinstance(msg, flows_pb2.FlowBatch):
            self.flow_batches.append(msg)
        elif isinstance(msg, analytics_pb2.LinkLoad):
            self.link_loads.append(msg)
        elif isinstance(msg, analytics_pb2.PathLoad):
            self.path_loads.append(msg)
        elif isinstance(msg, analytics_pb2.FimSample):
            self.fims.append(msg)
        else:  # pragma: no cover - MESSAGES and this list are kept together
            raise TypeError(f"no place for {type(msg).__name__} from {topic}")

    def records(self) -> Iterator[tuple[str, Message]]:
        """Every record with its topic, flows first, each topic in window order."""
        for name, items in ((topics.FLOWS.name, self.flow_batches), (topics.LINK_LOADS.name, self.link_loads),
                            (topics.PATH_LOADS.name, self.path_loads), (topics.FIM.name, self.fims)):
            for m in items:
                yield name, m

    def counts(self) -> dict[str, int]:
        return {topics.FLOWS.name: len(self.flow_batches), topics.LINK_LOADS.name: len(self.link_loads),
                topics.PATH_LOADS.name: len(self.path_loads), topics.FIM.name: len(self.fims)}

    def select(self, from_ns: int | None = None, to_ns: int | None = None) -> Recording:
        """The records whose window end lies in (from_ns, to_ns]; None leaves that side open."""
        def inside(end: int) -> bool:
            return (from_ns is None or end > from_ns) and (to_ns is None or end <= to_ns)

        return Recording([b for b in self.flow_batches if inside(b.window_end_ns)],
                         [x for x in self.link_loads if inside(x.window_end_ns)],
                         [x for x in self.path_loads if inside(x.window_end_ns)],
                         [x for x in self.fims if inside(x.window_end_ns)], self.skipped, self.source)

    def window_ends(self) -> list[int]:
        """Distinct window ends of the FlowBatches, ascending (ns)."""
        return sorted({b.window_end_ns for b in self.flow_batches})


def windows(recording: Recording, fabric: Fabric) -> tuple[list[Window], Unattributed]:
    """Per-window flows of the recording, named with ``fabric``'s NICs (pure).

    Mirrors the processor (``stream/flow_obs.py``): flows with no tx bytes are left out; the sender
    is found by host and RDMA device, else by source IP; the receiver by destination IP. A FlowBatch
    that was delivered twice (at-least-once) counts once: the last one per (host, leaf, window) wins.
    """
    latest: dict[tuple[str, str, int], flows_pb2.FlowBatch] = {}
    for b in recording.flow_batches:
        latest[(b.host, b.leaf, b.window_end_ns)] = b
    per_end: dict[int, list[RecordedFlow]] = {}
    starts: dict[int, int] = {}
    lost = Unattributed()
    for (host, _, end), b in sorted(latest.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        starts[end] = min(starts.get(end, b.window_start_ns), b.window_start_ns)
        out = per_end.setdefault(end, [])
        for f in b.flows:
            if not f.tx_bytes:
                continue
            ends = placed_ends(host, f, fabric, lost)
            if ends is None:
                continue
            src, dst = ends
            tagged = f.HasField("nccl")
            out.append(RecordedFlow(
                flow_id=f"{src.name}/{f.lqpn}/{f.qp_generation}", src_nic=src.name, dst_nic=dst.name,
                src_ip=f.src_ip, dst_ip=f.dst_ip, udp_src_port=f.udp_src_port, udp_dst_port=f.udp_dst_port,
                lqpn=f.lqpn, rqpn=f.rqpn, bytes=f.tx_bytes, comm_id=f.nccl.comm_id if tagged else "",
                channel=f.nccl.channel if tagged and f.nccl.peer_rank >= 0 else -1, job_id=f.job_id,
                collective=f.nccl.collective if tagged else ""))
    result = [Window(starts[e], e, tuple(sorted(fl, key=lambda x: x.flow_id))) for e, fl in sorted(per_end.items())]
    return result, lost


# -- time ranges ---------------------------------------------------------------------------------------

_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_SPAN_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_span(text: str) -> int:
    """Nanoseconds from a duration such as ``90s``, ``5m``, ``1.5h``, ``500ms`` or plain seconds."""
    m = _SPAN.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration (examples: 90s, 5m, 500ms)")
    return round(float(m.group(1)) * _SPAN_UNITS[m.group(2)] * 1e9)


def parse_instant(text: str) -> int:
    """Nanoseconds since the epoch from ISO 8601 (``2026-11-22T15:00:00Z``; no zone = UTC), or a number:
    seconds when below 1e12, else nanoseconds."""
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        pass
    else:
        return round(v * 1e9) if v < 1e12 else int(v)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not a time (give ISO 8601 such as 2026-11-22T15:00:00Z, or epoch "
                         "seconds or nanoseconds)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return round(dt.timestamp() * 1e9)


# -- the export file ---------------------------------------------------------------------------------


def write_export(recording: Recording, out: IO[str], from_ns: int | None = None, to_ns: int | None = None) -> int:
    """Write ``recording`` as a version-1 export (module docstring) to a text stream; returns lines written."""
    header = {"format": FORMAT, "version": VERSION, "exported_ns": time.time_ns(), "source": recording.source,
              "from_ns": from_ns, "to_ns": to_ns, "skipped": recording.skipped, "counts": recording.counts()}
    out.write(json.dumps(header, sort_keys=True) + "\n")
    n = 1
    for topic, msg in recording.records():
        rec = json_format.MessageToDict(msg, preserving_proto_field_name=True)
        out.write(json.dumps({"topic": topic, "record": rec}, sort_keys=True) + "\n")
        n += 1
    return n


def read_export(path: Path) -> Recording:
    """Read an export file; raise ``RecordingError`` naming the file and line of any problem."""
    try:
        fh = path.open(encoding="utf-8")
    except OSError as e:
        raise RecordingError(f"{path}: cannot open: {e.strerror or e}") from None
    with fh:
        return parse_export(fh, str(path))


def parse_export(lines: Iterable[str], name: str = "<export>") -> Recording:
    """Parse the lines of an export file (see ``read_export``)."""
    rec = Recording()
    it = iter(lines)
    try:
        first = next(it)
    except StopIteration:
        raise RecordingError(f"{name}: empty file: expected a {FORMAT} header line") from None
    except UnicodeDecodeError as e:
        raise RecordingError(f"{name}:1: not UTF-8 text: {e.reason}") from None
    header = _json_line(first, name, 1)
    if header.get("format") != FORMAT:
        raise RecordingError(f"{name}:1: not a {FORMAT} file (format {header.get('format')!r})")
    version = header.get("version")
    if version != VERSION:
        raise RecordingError(f"{name}:1: {FORMAT} version {version!r} is not supported (this reader knows "
                             f"{VERSION})")
    rec.source = str(header.get("source") or name)
    rec.skipped = int(header.get("skipped") or 0)
    no = 1
    while True:
        no += 1
        try:
            line = next(it)
        except StopIteration:
            break
        except UnicodeDecodeError as e:
            raise RecordingError(f"{name}:{no}: not UTF-8 text: {e.reason}") from None
        if not line.strip():
            continue
        obj = _json_line(line, name, no)
        topic = obj.get("topic")
        cls = MESSAGES.get(topic) if isinstance(topic, str) else None
        if cls is None:
            raise RecordingError(f"{name}:{no}: unknown topic {topic!r}; expected one of {', '.join(MESSAGES)}")
        record = obj.get("record")
        if not isinstance(record, dict):
            raise RecordingError(f"{name}:{no}: 'record' must be an object")
        try:
            msg = json_format.ParseDict(record, cls())
        except json_format.ParseError as e:
            first = str(e).splitlines()[0] if str(e) else "cannot parse"
            raise RecordingError(f"{name}:{no}: bad {cls.__name__}: {first}") from None
        if msg.schema_version != topics.SCHEMA_VERSION:  # type: ignore[attr-defined]
            raise RecordingError(f"{name}:{no}: {cls.__name__} has schema_version "
                                 f"{msg.schema_version} (this reader knows {topics.SCHEMA_VERSION})")  # type: ignore[attr-defined]
        rec.add(topic, msg)  # type: ignore[arg-type]
    return rec


def _json_line(line: str, name: str, no: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise RecordingError(f"{name}:{no}: not JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(obj, dict):
        raise RecordingError(f"{name}:{no}: expected a JSON object")
    return obj
