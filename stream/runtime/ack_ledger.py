"""Acks input records in offset order per topic-partition, so a commit never passes a held record (pure).

A record is held while a stage buffers it in a window that is not yet published (it may be held
by two stages at once). Windows finish in window order, not in offset order: a switch that runs a
little ahead puts its next window's record before a slower switch's record of the current window.
Faust commits the first run of consecutive acked offsets and does not check that the run starts
at the committed position (when nothing was committed yet, or when the run starts one past it),
so acking out of order commits past held records and a failover loses them. Every record
therefore goes through this ledger: it is acked only when it and every lower offset of its
partition are released. Records of revoked partitions are never acked here: the next owner
replays them from the committed position.

Bounded: a record nobody releases (a window that never completes) keeps every later record of its
partition in the heap. ``full`` says when a partition holds ``max_held`` records; the reader then
stops reading (its whole stream) until releases bring it back under the bound (Kafka lag grows, nothing
is dropped), and ``overflows`` counts how often that happened.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

TP = tuple[str, int]


@dataclass(eq=False)
class Hold:
    """One input record: the stages still holding it, and the event to ack when they are done."""

    tp: TP
    offset: int
    event: Any
    remaining: int = 1  # the reader's own hold, dropped by ``accepted``
    dropped: bool = False


MAX_HELD = 100_000
"""Records held per partition before its reader waits (``AckLedger.full``)."""


@dataclass
class AckLedger:
    max_held: int = MAX_HELD
    """Records held per topic-partition before :meth:`full` says to stop reading it."""
    overflows: int = 0
    """Records received into a partition that was already at ``max_held``."""
    _heaps: dict[TP, list[tuple[int, int, Hold]]] = field(default_factory=dict)
    _seq: int = 0

    def receive(self, topic: str, partition: int, offset: int, event: Any) -> Hold:
        """Register a record as read; it stays held until ``accepted`` (and every later release)."""
        hold = Hold((topic, partition), offset, event)
        self._seq += 1
        heap = self._heaps.setdefault(hold.tp, [])
        if len(heap) >= self.max_held:
            self.overflows += 1
        heapq.heappush(heap, (offset, self._seq, hold))
        return hold

    def full(self, topic: str, partition: int) -> bool:
        """Whether the partition holds ``max_held`` records or more: read nothing more from it until
        releases bring it under (``ackable`` pops them)."""
        return len(self._heaps.get((topic, partition), ())) >= self.max_held

    @staticmethod
    def accepted(hold: Hold, holds: int) -> None:
        """The reader is done with the record and ``holds`` stages kept it."""
        hold.remaining += holds - 1

    @staticmethod
    def release(hold: Hold) -> None:
        """One stage published the window that held the record."""
        hold.remaining -= 1

    def ackable(self) -> list[Any]:
        """Events that may be acked now: released, with every lower offset of their partition released."""
        out = []
        for heap in self._heaps.values():
            while heap and heap[0][2].remaining <= 0:
                out.append(heapq.heappop(heap)[2].event)
        return out

    def revoke(self, tps: set[TP]) -> None:
        """Forget revoked partitions: their records are never acked by this worker."""
        for tp in tps:
            for _, _, hold in self._heaps.pop(tp, []):
                hold.dropped = True

    def partitions(self) -> set[TP]:
        """Partitions with records read and not yet acked."""
        return set(self._heaps)

    def held(self) -> int:
        """Records read but not yet acked."""
        return sum(len(h) for h in self._heaps.values())
