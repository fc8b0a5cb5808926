"""Makes Faust's "seek back to committed" re-read partitions that have no commit yet.

Faust drops records it fetched for a partition that is not active yet (a rebalance in progress,
recovery running) and relies on seeking back to the committed offset afterwards. aiokafka's
``seek_to_committed`` skips partitions whose committed offset is missing or 0, so on a partition
nothing was acked in yet the dropped records are simply skipped: the failover test saw a worker
taking a partition over lose a few records of it and close windows without them. With
``consumer_auto_offset_reset="earliest"`` "no commit" means "from the beginning", so that is where
such partitions are sought. The records read twice are at-least-once redeliveries, which the
stages absorb (same identity in an open window, late for a published one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

_original = AIOKafkaConsumerThread.seek_to_committed


async def _seek_to_committed(self: AIOKafkaConsumerThread) -> Mapping[Any, int]:
    committed = await _original(self)
    # Table changelogs are never committed: Faust's recovery positions those itself.
    uncommitted = [tp for tp, offset in committed.items() if not offset and not tp.topic.endswith("-changelog")]
    if uncommitted:
        await self.call_thread(self._ensure_consumer().seek_to_beginning, *uncommitted)
    return committed


def install() -> None:
    """Patch Faust's aiokafka consumer thread (idempotent; the processor calls it before building its app)."""
    AIOKafkaConsumerThread.seek_to_committed = _seek_to_committed  # type: ignore[method-assign]
