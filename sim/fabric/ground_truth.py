"""Ground truth of a simulation run: what really happened, for tests and reports only.

The pipeline never reads this. The engine writes JSON lines into one directory:

- ``meta.json``: ``tick_ns``, ``start_ns``, ``mtu``, ``header_bytes`` (per-packet frame overhead
  counted in every byte counter), ``links`` (directed link id -> bit/s), ``ecmp_groups`` (group id ->
  member link ids in member order), ``counter_bits`` per switch.
- ``flows.jsonl``: one line per flow direction when its QP pair is created (``id``, ``pair``,
  ``direction`` "data"/"cts", ``job``, ``kind``, hosts, devices, IPs, UDP ports, ``src_qpn``/``dst_qpn``,
  ranks, ``created_ns``), and a line ``{"id": .., "destroyed_ns": ..}`` when it is destroyed.
- ``paths.jsonl``: ``{"id": n, "links": [directed link ids]}``, once per distinct path.
- ``ticks.jsonl``: per tick ``start_ns``, ``end_ns``, ``flows`` = [[flow id, path id, bytes, packets,
  payload bytes]] for every flow that moved bytes (a flow through spraying/adaptive switches has one row per
  path its packets took that tick, so its rows sum to its bytes), ``links`` = [[link id, bytes, packets]] for every
  loaded link, ``groups`` = {ECMP group id: [bytes per member]} (bytes the group's switch forwarded
  over each member).
- ``counters.jsonl``: per tick end (and at start) ``t_ns`` and, per switch, exactly what its
  SwitchState showed: ``boot_epoch``, ``available``, ``silent`` (only when true: its gNMI server sent nothing),
  ``last_clear_ns``, ``interfaces`` = {name: [oper_up,
  then the 10 counters in INTERFACE_COUNTERS order]}, ``next_hops`` = {index: [interface, ip, octets,
  packets]}, ``groups`` = {id: {"name": ECMP group id, "members": [next-hop indexes], and "weights" (per member)
  when one is not 1}}, and with the
  congestion model on ``congestion`` = {interface: [SWITCH_COUNTERS of priority 3, as published]}.
- ``events.jsonl``: faults and their effects with ``t_ns``, ``kind`` and ``target``.
- ``iterations.jsonl``: one line per training iteration a job completed: ``job``, ``iteration`` (1, 2, ..),
  ``t_ns`` (when its last op ended; its compute and ops ran before).
- ``congestion.jsonl`` (congestion model on): per tick ``start_ns``, ``end_ns``, ``ports``, ``nics``,
  ``causes`` and ``extras`` (docs/congestion.md).

``GroundTruth.load(dir)`` reads it all back. A window ``(start_ns, end_ns)`` covers the ticks that lie
inside it, i.e. with ``start_ns <= tick start`` and ``tick end <= end_ns``; give sample timestamps
(tick ends) and the sums are exactly what the counters moved between those samples.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from flowtracer.sim.fabric.congestion_counters import GT_NIC_FIELDS, GT_PORT_FIELDS, SWITCH_COUNTERS
from flowtracer.sim.switches.state import INTERFACE_COUNTERS

_FILES = ("flows", "paths", "ticks", "counters", "events", "congestion", "iterations")


class GroundTruthWriter:
    """Appends ground-truth lines; flushed at every tick so a reader sees whole ticks."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._f: dict[str, IO[str]] = {n: open(self.root / f"{n}.jsonl", "w", encoding="utf-8") for n in _FILES}  # noqa: SIM115
        self._paths: dict[tuple[str, ...], int] = {}

    def _w(self, name: str, obj: object) -> None:
        self._f[name].write(json.dumps(obj, separators=(",", ":")) + "\n")

    def write_meta(self, meta: dict[str, object]) -> None:
        (self.root / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")

    def flow(self, record: dict[str, object]) -> None:
        self._w("flows", record)

    def destroyed(self, fwd_id: int, rev_id: int, t_ns: int) -> None:
        for fid in (fwd_id, rev_id):
            self._w("flows", {"id": fid, "destroyed_ns": t_ns})

    def path_id(self, links: tuple[str, ...]) -> int:
        """Id of a path (written to the catalog the first time it is seen)."""
        pid = self._paths.get(links)
        if pid is None:
            pid = self._paths[links] = len(self._paths) + 1
            self._w("paths", {"id": pid, "links": list(links)})
        return pid

    def tick(self, record: dict[str, object]) -> None:
        self._w("ticks", record)

    def counters(self, t_ns: int, switches: dict[str, dict[str, object]]) -> None:
        """The tick's counters, written last: a reader that sees them sees the whole tick. The tick's other lines
        are flushed first, since a counters line larger than the file buffer reaches the disk as it is written
        (a loaded test once read the counters of a tick whose link bytes were not on disk yet)."""
        for name, f in self._f.items():
            if name != "counters":
                f.flush()
        self._w("counters", {"t_ns": t_ns, "switches": switches})
        for f in self._f.values():
            f.flush()

    def event(self, record: dict[str, object]) -> None:
        self._w("events", record)

    def congestion(self, record: dict[str, object]) -> None:
        self._w("congestion", record)

    def iteration(self, job: str, iteration: int, t_ns: int) -> None:
        self._w("iterations", {"job": job, "iteration": iteration, "t_ns": t_ns})

    def close(self) -> None:
        for f in self._f.values():
            f.close()


# ---------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class FlowInfo:
    """One flow direction of a QP pair: who, where, which QPs. ``destroyed_ns`` is None while alive."""

    id: int
    pair: int
    direction: str
    job: str
    kind: str
    src_host: str
    src_device: str
    dst_host: str
    dst_device: str
    src_ip: str
    dst_ip: str
    udp_src_port: int
    udp_dst_port: int
    src_qpn: int
    dst_qpn: int
    src_pid: int
    comm: str
    comm_id: str
    channel: int
    src_rank: int
    dst_rank: int
    created_ns: int
    destroyed_ns: int | None = None

    @property
    def src_nic(self) -> str:
        return f"{self.src_host}:{self.src_device}"

    @property
    def dst_nic(self) -> str:
        return f"{self.dst_host}:{self.dst_device}"


@dataclass(frozen=True)
class FlowWindow:
    """A flow's traffic in a window: frame bytes, packets, payload bytes and the paths it took."""

    flow: FlowInfo
    bytes: int
    packets: int
    payload: int
    paths: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class NextHopCounters:
    index: int
    interface: str
    ip_address: str
    octets_forwarded: int
    packets_forwarded: int


@dataclass(frozen=True)
class SwitchCounters:
    """A switch's published state at one tick end: counters as the switch showed them (wrapped in
    counter32 mode). ``interfaces[name][counter]`` with counter names from INTERFACE_COUNTERS."""

    switch: str
    t_ns: int
    boot_epoch: int
    available: bool
    last_clear_ns: int
    interfaces: dict[str, dict[str, int]]
    oper_up: dict[str, bool]
    next_hops: dict[int, NextHopCounters]
    groups: dict[int, tuple[str, tuple[int, ...]]]  # id -> (ECMP group id, member next-hop indexes)
    #: Congestion model on: per interface, its counters of priority 3 as published, by SWITCH_COUNTERS name.
    congestion: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Its gNMI server was silent (fault ``gnmi_silent``): this state was not sent.
    silent: bool = False


@dataclass(frozen=True)
class CongestionWindow:
    """What the congestion model did in a window: per switch port (``switch:interface``, priority 3) and
    per NIC (``host:device``) counters by their ``GT_PORT_FIELDS`` / ``GT_NIC_FIELDS`` names, and the
    cause of each congested port (``{"cause": .., "from": ..}``)."""

    ports: dict[str, dict[str, int]]
    nics: dict[str, dict[str, int]]
    causes: dict[str, dict[str, str]]


class GroundTruth:
    """Everything one run wrote, in memory, with window queries. Build with ``GroundTruth.load``."""

    def __init__(self, meta: dict[str, Any], flows: dict[int, FlowInfo], paths: dict[int, tuple[str, ...]],
                 ticks: list[dict[str, Any]], counters: list[dict[str, Any]], events: list[dict[str, Any]],
                 congestion: list[dict[str, Any]] | None = None,
                 iterations: list[dict[str, Any]] | None = None) -> None:
        self.meta = meta
        self.tick_ns: int = meta["tick_ns"]
        self.start_ns: int = meta["start_ns"]
        self.flows = flows
        self.paths = paths
        self.ticks = ticks
        self.events = events
        self._counters = counters
        self.counter_times = [c["t_ns"] for c in counters]
        self.tick_ends = [t["end_ns"] for t in ticks]
        self.congestion = congestion or []
        self.congestion_ends = [c["end_ns"] for c in self.congestion]
        self.iterations = iterations or []

    @classmethod
    def load(cls, root: str | Path) -> GroundTruth:
        """Read a ground-truth directory (whole lines only, so a running simulation is fine)."""
        root = Path(root)
        meta = json.loads((root / "meta.json").read_text(encoding="utf-8"))
        flows: dict[int, FlowInfo] = {}
        for rec in _lines(root / "flows.jsonl"):
            if "destroyed_ns" in rec and "pair" not in rec:
                if rec["id"] in flows:
                    f = flows[rec["id"]]
                    flows[rec["id"]] = FlowInfo(**{**f.__dict__, "destroyed_ns": rec["destroyed_ns"]})
                continue
            flows[rec["id"]] = FlowInfo(**rec)
        paths = {rec["id"]: tuple(rec["links"]) for rec in _lines(root / "paths.jsonl")}
        return cls(meta, flows, paths, list(_lines(root / "ticks.jsonl")), list(_lines(root / "counters.jsonl")),
                   list(_lines(root / "events.jsonl")), list(_lines(root / "congestion.jsonl")),
                   list(_lines(root / "iterations.jsonl")))

    # -- switch counters --------------------------------------------------------------------------

    def counters_at(self, switch: str, t_ns: int) -> SwitchCounters:
        """What ``switch`` published at the latest tick end <= ``t_ns`` (KeyError before the start)."""
        i = bisect.bisect_right(self.counter_times, t_ns) - 1
        if i < 0:
            raise KeyError(f"no counters at or before {t_ns}")
        rec = self._counters[i]
        s = rec["switches"][switch]
        ifaces = {n: dict(zip(INTERFACE_COUNTERS, v[1:], strict=True)) for n, v in s["interfaces"].items()}
        oper = {n: bool(v[0]) for n, v in s["interfaces"].items()}
        nhs = {int(k): NextHopCounters(int(k), *v) for k, v in s["next_hops"].items()}
        groups = {int(k): (g["name"], tuple(g["members"])) for k, g in s["groups"].items()}
        cong = {n: dict(zip(SWITCH_COUNTERS, v, strict=True)) for n, v in s.get("congestion", {}).items()}
        return SwitchCounters(switch, rec["t_ns"], s["boot_epoch"], s["available"], s["last_clear_ns"], ifaces, oper,
                              nhs, groups, cong, s.get("silent", False))

    # -- windows ----------------------------------------------------------------------------------

    def ticks_in(self, start_ns: int, end_ns: int) -> Iterator[dict[str, Any]]:
        """Tick records lying inside [start_ns, end_ns]."""
        lo = bisect.bisect_left(self.tick_ends, start_ns + self.tick_ns)
        hi = bisect.bisect_right(self.tick_ends, end_ns)
        return iter(self.ticks[lo:hi])

    def link_bytes(self, start_ns: int, end_ns: int) -> dict[str, int]:
        """Frame bytes per directed link id in the window (links that carried nothing are absent)."""
        out: dict[str, int] = {}
        for t in self.ticks_in(start_ns, end_ns):
            for lid, b, _p in t["links"]:
                out[lid] = out.get(lid, 0) + b
        return out

    def link_packets(self, start_ns: int, end_ns: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.ticks_in(start_ns, end_ns):
            for lid, _b, p in t["links"]:
                out[lid] = out.get(lid, 0) + p
        return out

    def group_loads(self, start_ns: int, end_ns: int) -> dict[str, list[int]]:
        """Bytes per member (member order) of every ECMP group that forwarded anything in the window."""
        out: dict[str, list[int]] = {}
        for t in self.ticks_in(start_ns, end_ns):
            for gid, loads in t["groups"].items():
                acc = out.setdefault(gid, [0] * len(loads))
                for i, b in enumerate(loads):
                    acc[i] += b
        return out

    def flows_in(self, start_ns: int, end_ns: int) -> list[FlowWindow]:
        """Every flow that moved bytes in the window, with its totals and paths (in order of use)."""
        acc: dict[int, list[Any]] = {}
        for t in self.ticks_in(start_ns, end_ns):
            for fid, pid, b, p, pl in t["flows"]:
                a = acc.setdefault(fid, [0, 0, 0, []])
                a[0] += b
                a[1] += p
                a[2] += pl
                if not a[3] or a[3][-1] != pid:
                    a[3].append(pid)
        return [FlowWindow(self.flows[fid], b, p, pl, tuple(self.paths[x] for x in pids))
                for fid, (b, p, pl, pids) in sorted(acc.items())]

    def path_bytes(self, start_ns: int, end_ns: int) -> dict[int, dict[tuple[str, ...], int]]:
        """Frame bytes per flow id per path (directed link ids) in the window: a spread flow's per-path truth."""
        out: dict[int, dict[tuple[str, ...], int]] = {}
        for t in self.ticks_in(start_ns, end_ns):
            for fid, pid, b, _p, _pl in t["flows"]:
                per = out.setdefault(fid, {})
                per[self.paths[pid]] = per.get(self.paths[pid], 0) + b
        return out

    def nic_bytes(self, start_ns: int, end_ns: int) -> tuple[dict[str, int], dict[str, int]]:
        """(sent, received) frame bytes per NIC (``host:rdma_device``) in the window."""
        sent: dict[str, int] = {}
        received: dict[str, int] = {}
        for fw in self.flows_in(start_ns, end_ns):
            sent[fw.flow.src_nic] = sent.get(fw.flow.src_nic, 0) + fw.bytes
            received[fw.flow.dst_nic] = received.get(fw.flow.dst_nic, 0) + fw.bytes
        return sent, received

    def congestion_in(self, start_ns: int, end_ns: int) -> CongestionWindow:
        """The congestion model's record summed over the ticks inside the window: watermarks are maxima,
        ``queue-octets`` is the value at the last tick, everything else a sum; causes by port, the last
        tick's cause of each port winning."""
        lo = bisect.bisect_left(self.congestion_ends, start_ns + self.tick_ns)
        hi = bisect.bisect_right(self.congestion_ends, end_ns)
        ports: dict[str, list[int]] = {}
        nics: dict[str, list[int]] = {}
        causes: dict[str, dict[str, str]] = {}
        for rec in self.congestion[lo:hi]:
            for name, acc in ports.items():  # held bytes are a level: absent now means none
                if name not in rec["ports"]:
                    acc[-1] = 0
            for name, vals in rec["ports"].items():
                acc = ports.setdefault(name, [0] * len(GT_PORT_FIELDS))
                for i, v in enumerate(vals):
                    acc[i] = max(acc[i], v) if GT_PORT_FIELDS[i] == "max-queue-len" else acc[i] + v
                acc[-1] = vals[-1]
            for name, vals in rec["nics"].items():
                acc = nics.setdefault(name, [0] * len(GT_NIC_FIELDS))
                for i, v in enumerate(vals):
                    acc[i] += v
            causes.update(rec["causes"])
        return CongestionWindow({k: dict(zip(GT_PORT_FIELDS, v, strict=True)) for k, v in ports.items()},
                                {k: dict(zip(GT_NIC_FIELDS, v, strict=True)) for k, v in nics.items()}, causes)

    def agent_reporting(self, host: str, t_ns: int) -> bool:
        """Whether ``host``'s view was written at tick end ``t_ns``: not after an ``agent_stop`` before ``t_ns``
        unless an ``agent_resume`` before ``t_ns`` followed (a fault at ``t_ns`` acts after that tick's view)."""
        last = [e["kind"] for e in self.events if e["t_ns"] < t_ns and e.get("target") == host
                and e["kind"] in ("agent_stop", "agent_resume")]
        return not last or last[-1] == "agent_resume"

    def events_in(self, start_ns: int, end_ns: int, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if start_ns <= e["t_ns"] <= end_ns and (kind is None or e["kind"] == kind)]

    def mean_iteration_s(self, job: str, start_ns: int, end_ns: int) -> float | None:
        """Seconds per iteration of ``job`` between its first and last iteration end inside
        [start_ns, end_ns] (None: fewer than two ends there)."""
        ends = [r["t_ns"] for r in self.iterations if r["job"] == job and start_ns <= r["t_ns"] <= end_ns]
        return (ends[-1] - ends[0]) / (len(ends) - 1) / 1e9 if len(ends) >= 2 else None


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                yield json.loads(line)
