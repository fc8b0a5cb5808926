"""Per-source clock readings: how far each switch's and host's clock is from its producer's, and how long its
records take from the producer to this worker. Pure (no I/O, no Prometheus): the processor feeds it, its metrics export
what it holds when scraped (stream/runtime/metrics.py), the dashboard's health view shows it.

Every CounterBatch and FlowBatch carries two stamps: its event time on the source's clock (the switch's gNMI
timestamp, the agent's window end) and its producer's wall clock when it got the sample (``received_ns``: the
collector's at the notification, the agent's at the read). From them and this worker's wall clock at reading:

* **skew** = event time - received stamp: the source's clock against its producer's, plus (negative) the
  delivery delay from the device to the producer (milliseconds). +90 s is a switch 90 s ahead of its collector.
* **transit** = this worker's clock at reading - received stamp: the time in Kafka (and any backlog or replay)
  plus the producer's clock against the processor's. Negative only when the producer's clock is ahead.

One skew mixes two things: skew = offset - delay, the source's clock **offset** from its producer's and the
**delivery delay** from the sample to the producer (>= 0). On a busy machine the delay alone reaches a second, which
is not a clock problem. As NTP's clock filter does, the offset is estimated from the lowest-delay readings: the
highest skew of the source over the last ``OFFSET_WINDOW_NS`` (one prompt delivery in that window is enough), and
each reading's delay is that offset minus its skew. A clock stepped ahead shows at once; one stepped back shows when
the readings before the step leave the window. A source is judged (listed as "clocks off") only once it has been
heard for ``SETTLE_NS``, so a start on a busy machine, whose first readings may all be late, is not judged on them.

A record without a received stamp (path traces; FlowBatches of agents older than that field) gives no reading.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from flowtracer.stream.runtime.inputs import Stamps

MAX_SOURCES = 4096
"""Sources held at most (a worker sees the switches and hosts of its partitions): beyond it the least recently
heard is forgotten, so a churn of host names cannot grow the state or the metric's series without bound."""
FORGET_AFTER_NS = 300 * 1_000_000_000
"""A source not heard from for this long (ns) is forgotten: it left, or its partition moved to another worker."""
OFFSET_WINDOW_NS = 30 * 1_000_000_000
"""Readings the offset is estimated from (ns back from the newest): 30 one-second samples, so a load spike of
seconds does not move it; a clock stepped back shows once the readings before the step have left it (at most this
long), well within a minute."""
SETTLE_NS = 10 * 1_000_000_000
"""A source is judged only after it has been heard for this long (ns): ten readings at a one-second hop."""


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
    offset_ns: int = 0
    """The source's clock offset from its producer's (ns; > 0: ahead): the highest skew over the offset window."""
    delay_ns: int = 0
    """This reading's delivery delay from the source to its producer (ns, >= 0): ``offset_ns - skew_ns``."""
    settled: bool = False
    """Whether the source has been heard long enough (``SETTLE_NS``) for its offset to be judged."""


def reading(kind: str, partition: int, stamps: Stamps, now_ns: int) -> ClockReading | None:
    """The clock reading of one record read at ``now_ns`` (ns since the epoch); None without a received stamp."""
    if stamps.received_ns <= 0:
        return None
    skew = stamps.event_ns - stamps.received_ns
    return ClockReading(kind, stamps.name, stamps.role, partition, skew, now_ns - stamps.received_ns, now_ns,
                        offset_ns=skew)


class OffsetFilter:
    """The highest skew of one source over a sliding window of its readings (a monotonic queue: O(1) per
    reading, at most one entry per reading in the window, usually a handful)."""

    __slots__ = ("_best", "first_ns", "window_ns")

    def __init__(self, window_ns: int, first_ns: int) -> None:
        self.window_ns = window_ns
        self.first_ns = first_ns
        """When the source was first heard (ns since the epoch)."""
        self._best: deque[tuple[int, int]] = deque()  # (at_ns, skew_ns), skew strictly decreasing

    def add(self, at_ns: int, skew_ns: int) -> int:
        """Take one reading; return the offset estimate (ns): the highest skew within the window."""
        best = self._best
        while best and best[-1][1] <= skew_ns:
            best.pop()
        best.append((at_ns, skew_ns))
        while best[0][0] <= at_ns - self.window_ns:
            best.popleft()
        return best[0][1]


class SourceClocks:
    """The newest reading of each source (key: kind and source name), bounded in count and age.

    ``observe``, ``forget_stale`` and ``forget_partitions`` return the readings they dropped, so that the caller
    can remove their metric series.
    """

    def __init__(self, max_sources: int = MAX_SOURCES, forget_after_ns: int = FORGET_AFTER_NS,
                 offset_window_ns: int = OFFSET_WINDOW_NS, settle_ns: int = SETTLE_NS) -> None:
        self.max_sources = max_sources
        self.forget_after_ns = forget_after_ns
        self.offset_window_ns = offset_window_ns
        self.settle_ns = settle_ns
        self._latest: dict[tuple[str, str], ClockReading] = {}  # least recently heard first
        self._filters: dict[tuple[str, str], OffsetFilter] = {}  # same keys as _latest
        #: Sources dropped because more than ``max_sources`` were held (cumulative).
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._latest)

    def readings(self) -> tuple[ClockReading, ...]:
        """The newest reading of every source held, least recently heard first. Safe from another thread (the metrics
        server's): the copy is taken in one C call, which the worker's thread cannot interleave with."""
        return tuple(self._latest.values())

    def get(self, kind: str, source: str) -> ClockReading | None:
        """The newest reading of a source, or None."""
        return self._latest.get((kind, source))

    def observe(self, r: ClockReading) -> list[ClockReading]:
        """Keep ``r`` as its source's newest reading, with the source's offset and this reading's delay filled in
        (``get`` returns it); return the readings evicted to stay within the bound."""
        key = (r.kind, r.source)
        f = self._filters.get(key)
        if f is None:
            f = self._filters[key] = OffsetFilter(self.offset_window_ns, r.at_ns)
        offset = f.add(r.at_ns, r.skew_ns)
        self._latest.pop(key, None)  # re-inserted last: the dict stays in order of last heard
        # Built directly rather than with dataclasses.replace: this runs for every input record.
        self._latest[key] = ClockReading(r.kind, r.source, r.role, r.partition, r.skew_ns, r.transit_ns, r.at_ns,
                                         offset, offset - r.skew_ns, r.at_ns - f.first_ns >= self.settle_ns)
        dropped = []
        while len(self._latest) > self.max_sources:
            dropped.append(self._pop(next(iter(self._latest))))
        self.evicted += len(dropped)
        return dropped

    def _pop(self, key: tuple[str, str]) -> ClockReading:
        self._filters.pop(key, None)
        return self._latest.pop(key)

    def forget_stale(self, now_ns: int) -> list[ClockReading]:
        """Drop the sources not heard from for ``forget_after_ns`` before ``now_ns``; return them."""
        dropped = []
        for key, r in list(self._latest.items()):
            if now_ns - r.at_ns < self.forget_after_ns:
                break  # in order of last heard: every later one is newer
            dropped.append(self._pop(key))
        return dropped

    def forget_partitions(self, partitions: set[int]) -> list[ClockReading]:
        """Drop the sources last heard on ``partitions`` (revoked: their new owner reports them); return them."""
        dropped = [r for r in self._latest.values() if r.partition in partitions]
        for r in dropped:
            self._pop((r.kind, r.source))
        return dropped

    def view(self, now_ns: int, skewed_ns: int, top: int = 20) -> dict[str, Any]:
        """The health view's summary (seconds, JSON-able): how many sources, the settled ones whose clock offset
        is ``skewed_ns`` or more (worst first, at most ``top``), the largest offset, the slowest delivery (delay
        to the producer) and the slowest transit (producer to this worker)."""
        readings = list(self._latest.values())
        skewed = sorted((r for r in readings if r.settled and abs(r.offset_ns) >= skewed_ns),
                        key=lambda r: -abs(r.offset_ns))

        def top_by(key: Any) -> dict[str, Any] | None:
            return _json(max(readings, key=key), now_ns) if readings else None

        return {
            "sources": len(readings),
            "skewed_over_s": skewed_ns / 1e9,
            "skewed_count": len(skewed),
            "skewed": [_json(r, now_ns) for r in skewed[:top]],
            "max_abs_offset": top_by(lambda r: abs(r.offset_ns)),
            "max_delay": top_by(lambda r: r.delay_ns),
            "max_transit": top_by(lambda r: r.transit_ns),
            "evicted": self.evicted,
        }


def _json(r: ClockReading, now_ns: int) -> dict[str, Any]:
    return {"source": f"{r.role} {r.source}", "kind": r.kind, "offset_s": round(r.offset_ns / 1e9, 3),
            "delay_s": round(r.delay_ns / 1e9, 3), "skew_s": round(r.skew_ns / 1e9, 3),
            "transit_s": round(r.transit_ns / 1e9, 3), "age_s": round((now_ns - r.at_ns) / 1e9, 3)}
