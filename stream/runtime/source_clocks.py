"""Per-source clock readings: how far each switch's and host's clock is from its producer's, and how long its
records take from the producer to this worker. Pure (no I/O, no Prometheus): the processor feeds it and exports
what it holds (stream/runtime/processor.py), the dashboard's health view shows it.

Every CounterBatch and FlowBatch carries two stamps: its event time on the source's clock (the switch's gNMI
timestamp, the agent's window end) and its producer's wall clock when it got the sample (``received_ns``: the
collector's at the notification, the agent's at the read). From them and this worker's wall clock at reading:

* **skew** = event time - received stamp: the source's clock against its producer's, plus (negative) the
  delivery delay from the device to the producer (milliseconds). +90 s is a switch 90 s ahead of its collector.
* **transit** = this worker's clock at reading - received stamp: the time in Kafka (and any backlog or replay)
  plus the producer's clock against the processor's. Negative only when the producer's clock is ahead.

A record without a received stamp (path traces; FlowBatches of agents older than that field) gives no reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowtracer.stream.runtime.inputs import Stamps

MAX_SOURCES = 4096
"""Sources held at most (a worker sees the switches and hosts of its partitions): beyond it the least recently
heard is forgotten, so a churn of host names cannot grow the state or the metric's series without bound."""
FORGET_AFTER_NS = 300 * 1_000_000_000
"""A source not heard from for this long (ns) is forgotten: it left, or its partition moved to another worker."""


@dataclass(frozen=True, slots=True)
class ClockReading:
    """The newest clock reading of one source."""

    kind: str
    """Message type it came in (``CounterBatch``, ``FlowBatch``)."""
    source: str
    """The switch's or host's name."""
    role: str
    """``switch`` or ``host``."""
    partition: int
    """Input partition the record came from (forgotten with the partition)."""
    skew_ns: int
    """Event time minus the producer's received stamp (ns; > 0: the source's clock is ahead)."""
    transit_ns: int
    """This worker's wall clock at reading minus the producer's received stamp (ns)."""
    at_ns: int
    """This worker's wall clock at reading, ns since the epoch."""


def reading(kind: str, partition: int, stamps: Stamps, now_ns: int) -> ClockReading | None:
    """The clock reading of one record read at ``now_ns`` (ns since the epoch); None without a received stamp."""
    if stamps.received_ns <= 0:
        return None
    return ClockReading(kind, stamps.name, stamps.role, partition, stamps.event_ns - stamps.received_ns,
                        now_ns - stamps.received_ns, now_ns)


class SourceClocks:
    """The newest reading of each source (key: kind and source name), bounded in count and age.

    ``observe``, ``forget_stale`` and ``forget_partitions`` return the readings they dropped, so that the caller
    can remove their metric series.
    """

    def __init__(self, max_sources: int = MAX_SOURCES, forget_after_ns: int = FORGET_AFTER_NS) -> None:
        self.max_sources = max_sources
        self.forget_after_ns = forget_after_ns
        self._latest: dict[tuple[str, str], ClockReading] = {}  # least recently heard first
        #: Sources dropped because more than ``max_sources`` were held (cumulative).
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._latest)

    def get(self, kind: str, source: str) -> ClockReading | None:
        """The newest reading of a source, or None."""
        return self._latest.get((kind, source))

    def observe(self, r: ClockReading) -> list[ClockReading]:
        """Keep ``r`` as its source's newest reading; return the readings evicted to stay within the bound."""
        key = (r.kind, r.source)
        self._latest.pop(key, None)  # re-inserted last: the dict stays in order of last heard
        self._latest[key] = r
        dropped = []
        while len(self._latest) > self.max_sources:
            dropped.append(self._latest.pop(next(iter(self._latest))))
        self.evicted += len(dropped)
        return dropped

    def forget_stale(self, now_ns: int) -> list[ClockReading]:
        """Drop the sources not heard from for ``forget_after_ns`` before ``now_ns``; return them."""
        dropped = []
        for key, r in list(self._latest.items()):
            if now_ns - r.at_ns < self.forget_after_ns:
                break  # in order of last heard: every later one is newer
            dropped.append(self._latest.pop(key))
        return dropped

    def forget_partitions(self, partitions: set[int]) -> list[ClockReading]:
        """Drop the sources last heard on ``partitions`` (revoked: their new owner reports them); return them."""
        dropped = [r for r in self._latest.values() if r.partition in partitions]
        for r in dropped:
            del self._latest[(r.kind, r.source)]
        return dropped

    def view(self, now_ns: int, skewed_ns: int, top: int = 20) -> dict[str, Any]:
        """The health view's summary (seconds, JSON-able): how many sources, those whose clock is off by
        ``skewed_ns`` or more (worst first, at most ``top``), and the slowest transit."""
        readings = list(self._latest.values())
        skewed = sorted((r for r in readings if abs(r.skew_ns) >= skewed_ns), key=lambda r: -abs(r.skew_ns))
        slowest = max(readings, key=lambda r: r.transit_ns, default=None)
        return {
            "sources": len(readings),
            "skewed_over_s": skewed_ns / 1e9,
            "skewed_count": len(skewed),
            "skewed": [_json(r, now_ns) for r in skewed[:top]],
            "max_abs_skew": _json(max(readings, key=lambda r: abs(r.skew_ns)), now_ns) if readings else None,
            "max_transit": _json(slowest, now_ns) if slowest is not None else None,
            "evicted": self.evicted,
        }


def _json(r: ClockReading, now_ns: int) -> dict[str, Any]:
    return {"source": f"{r.role} {r.source}", "kind": r.kind, "skew_s": round(r.skew_ns / 1e9, 3),
            "transit_s": round(r.transit_ns / 1e9, 3), "age_s": round((now_ns - r.at_ns) / 1e9, 3)}
