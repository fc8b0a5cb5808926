"""The dashboard's per-job collectives: the newest window of each (job, communicator, operation, size), over hosts.

Fed the CollectiveProfile records of each finalization (one per host that logged the calls); pure, no I/O.
Per key the newest window wins: ``calls`` is the most any host's ranks logged (each rank logs every call of its
communicator), ``hosts`` the hosts that logged, and the estimated bus bandwidth the hosts' estimates weighted by
their timed interval (bytes/s; a lower bound, docs/agent.md, Collective profiles), None when untimed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flowtracer.schemas.v1 import flows_pb2

Key = tuple[str, str, str, int, int]
"""(job, communicator, operation, datatype, count)"""
MAX_KEYS = 4096
"""Collectives remembered; the ones seen longest ago are forgotten first."""


@dataclass
class _Seen:
    end_ns: int
    call_bytes: int
    nranks: int
    calls: int = 0
    hosts: set[str] = field(default_factory=set)
    timed_ns: int = 0
    bus_weighted: float = 0.0  # sum of bus bandwidth x timed_ns over hosts


class CollectivesView:
    """Newest window of each collective."""

    def __init__(self) -> None:
        self.seen: dict[Key, _Seen] = {}

    def observe(self, profiles: Iterable[flows_pb2.CollectiveProfile]) -> None:
        for p in profiles:
            key = (p.job_id, p.comm_id, p.operation, p.datatype, p.count)
            s = self.seen.get(key)
            if s is None or p.window_end_ns > s.end_ns:
                self.seen.pop(key, None)  # re-inserted last: the oldest is forgotten first
                if len(self.seen) >= MAX_KEYS:
                    del self.seen[next(iter(self.seen))]
                s = self.seen[key] = _Seen(p.window_end_ns, p.call_bytes, p.nranks)
            elif p.window_end_ns < s.end_ns:
                continue
            s.calls = max(s.calls, p.calls)
            s.hosts.add(p.host)
            s.timed_ns += p.timed_ns
            s.bus_weighted += p.bus_bw_bytes_per_s * p.timed_ns

    def json(self, current_from_ns: int) -> list[dict[str, Any]]:
        """The collectives seen after ``current_from_ns``, by job, communicator, operation and size."""
        out = []
        for (job, comm, op, dtype, count), s in sorted(self.seen.items()):
            if s.end_ns <= current_from_ns:
                continue
            out.append({"job": job, "comm": comm, "operation": op, "datatype": dtype, "count": count,
                        "call_bytes": s.call_bytes, "nranks": s.nranks, "calls": s.calls, "hosts": sorted(s.hosts),
                        "bus_bw_bytes_per_s": s.bus_weighted / s.timed_ns if s.timed_ns else None,
                        "window_end_ms": s.end_ns // 1_000_000})
        return out
