"""Decode and check records from the input topics; anything unusable becomes a ``BadRecord`` with a reason."""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError, Message

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import counters_pb2, flows_pb2, internal_pb2, traces_pb2
from flowtracer.stream.stages.emitted import INPUT_TOPIC

_TYPES: dict[str, type[Message]] = {
    **{topic: cls for cls, topic in INPUT_TOPIC.items()},
    topics.PATH_TRACES.name: traces_pb2.PathTrace,
}


class BadRecord(ValueError):
    """A record that goes to the dead-letter topic; ``str()`` says what was wrong, for a person."""


def decode(topic: str, value: bytes | None) -> Message:
    """The record's message, checked: known schema_version, identity fields set, sane timestamps."""
    cls = _TYPES.get(topic)
    if cls is None:
        raise BadRecord(f"no decoder for topic {topic!r}")
    if not value:
        raise BadRecord(f"empty value: expected a {cls.__name__}")
    msg = cls()
    try:
        msg.ParseFromString(value)
    except DecodeError as e:
        raise BadRecord(f"cannot decode {cls.__name__}: {e}") from None
    version = msg.schema_version  # type: ignore[attr-defined]
    if version != topics.SCHEMA_VERSION:
        raise BadRecord(f"unknown schema_version {version} in {cls.__name__} (this processor reads "
                        f"{topics.SCHEMA_VERSION})")
    if isinstance(msg, (counters_pb2.CounterBatch, counters_pb2.CongestionBatch)):
        if not msg.switch or msg.timestamp_ns <= 0:
            raise BadRecord(f"{cls.__name__} without switch or timestamp_ns")
    elif isinstance(msg, flows_pb2.FlowBatch):
        if not msg.host or not msg.leaf or msg.window_end_ns <= msg.window_start_ns:
            raise BadRecord("FlowBatch without host, leaf or a window with end after start")
    elif isinstance(msg, traces_pb2.PathTrace):
        if not msg.flow_id or not msg.src_nic or msg.finished_ns <= 0:
            raise BadRecord("PathTrace without flow_id, src_nic or finished_ns")
    elif isinstance(msg, (internal_pb2.AttributionBatch, internal_pb2.GroupFimBatch)) and msg.window_end_ns <= 0:
        raise BadRecord(f"{cls.__name__} without window_end_ns")
    return msg


@dataclass(frozen=True, slots=True)
class Stamps:
    """When an input record's source says it happened, and when its producer received it."""

    role: str
    """``switch`` or ``host``."""
    name: str
    """The switch's or host's name."""
    event_ns: int
    """Event time, ns since the epoch, on the source's clock: a switch's sample instant, an agent's window end,
    a trace's finish."""
    received_ns: int
    """The producer's wall clock when it received the sample (collector) or read it (agent), ns since the epoch;
    0 when the producer did not stamp it (path traces, agents before FlowBatch.received_ns)."""

    @property
    def source(self) -> str:
        """``switch <name>`` or ``host <name>``, for people."""
        return f"{self.role} {self.name}"


def event_time(msg: Message) -> Stamps | None:
    """The stamps of an input record; None for the processor's own internal records."""
    if isinstance(msg, (counters_pb2.CounterBatch, counters_pb2.CongestionBatch)):
        return Stamps("switch", msg.switch, msg.timestamp_ns, msg.received_ns)
    if isinstance(msg, flows_pb2.FlowBatch):
        return Stamps("host", msg.host, msg.window_end_ns, msg.received_ns)
    if isinstance(msg, traces_pb2.PathTrace):
        return Stamps("host", msg.host or msg.src_nic, msg.finished_ns, 0)
    return None


def check_event_time(msg: Message, now_ns: int, max_ahead_ns: int) -> int:
    """How far (ns, negative = behind) the record's event time is ahead of this worker's clock ``now_ns``;
    BadRecord when more than ``max_ahead_ns``. One record stamped in the future (a switch with a wrong clock,
    a forged batch) would otherwise open a window nobody else reaches, and releasing it would make every
    other record of the partition late."""
    stamp = event_time(msg)
    if stamp is None:
        return 0
    ahead = stamp.event_ns - now_ns
    if ahead > max_ahead_ns:
        raise BadRecord(f"{type(msg).__name__} from {stamp.source} is stamped {ahead / 1e9:.1f} s ahead of this "
                        f"worker's clock (limit {max_ahead_ns / 1e9:g} s): a wrong clock or a forged record")
    return ahead


def decode_trace(key: bytes | None, value: bytes | None) -> tuple[str, traces_pb2.PathTrace | None]:
    """A path-traces record: (flow id, trace), the trace ``None`` for a tombstone (null value: the flow ended).

    The key is the flow id; a trace whose ``flow_id`` is not its key is refused (compaction would keep
    the wrong record).
    """
    flow_id = (key or b"").decode("utf-8", "replace")
    if value is None:
        if not flow_id:
            raise BadRecord("PathTrace tombstone without a key: which flow ended?")
        return flow_id, None
    msg = decode(topics.PATH_TRACES.name, value)
    assert isinstance(msg, traces_pb2.PathTrace)
    if key is not None and msg.flow_id != flow_id:
        raise BadRecord(f"PathTrace of flow {msg.flow_id!r} under key {flow_id!r}: the key must be the flow id")
    return msg.flow_id, msg
