"""Makes Faust's "seek back to committed" re-read partitions that have no commit yet.

Faust drops records it fetched for a partition that is not active yet (a rebalance in progress,
recovery running) and relies on seeking back to the committed offset afterwards. aiokafka's
``seek_to_committed`` skips partitions whose committed offset is missing or 0, so on a partition
nothing was acked in yet the dropped records are simply skipped: the failover test saw a worker
taking a partition over lose a few records of it and close windows without them. With
``consumer_auto_offset_reset="earliest"`` "no commit" means "from the beginning", so that is where
such partitions are sought. The records read twice are at-least-once redeliveries, which the
stages absorb (same identity in an open window, late for a published one).

It also tells the app where each stream partition was positioned (``on_positioned``): from there on its records are
unread, which the window rules need on a backlog (read_positions.py).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

log = logging.getLogger(__name__)
_original = AIOKafkaConsumerThread.seek_to_committed
Positioned = Callable[[dict[tuple[str, int], int]], None]
_listeners: weakref.WeakKeyDictionary[Any, Positioned] = weakref.WeakKeyDictionary()


def on_positioned(app: Any, listener: Positioned) -> None:
    """Call ``listener`` with {(topic, partition): offset} each time ``app``'s consumer is sought to its committed
    offsets (a rebalance or a recovery ends): the next offset it reads in each stream partition."""
    _listeners[app] = listener


async def _seek_to_committed(self: AIOKafkaConsumerThread) -> Mapping[Any, int]:
    committed = await _original(self)
    # Table changelogs are never committed: Faust's recovery positions those itself.
    streams = {tp: offset for tp, offset in committed.items() if not tp.topic.endswith("-changelog")}
    uncommitted = [tp for tp, offset in streams.items() if not offset]
    positions = {(tp.topic, tp.partition): offset for tp, offset in streams.items() if offset}
    if uncommitted:
        consumer = self._ensure_consumer()
        await self.call_thread(consumer.seek_to_beginning, *uncommitted)
        try:
            beginning = await self.call_thread(consumer.beginning_offsets, uncommitted)
        except Exception as exc:
            log.warning("beginning offsets of %d partitions not known (%s): their lag is not followed",
                        len(uncommitted), exc)
            beginning = {}
        positions.update({(tp.topic, tp.partition): offset for tp, offset in beginning.items()})
    listener = _listeners.get(self.app)
    if listener is not None:
        listener(positions)
    return committed


def install() -> None:
    """Patch Faust's aiokafka consumer thread (idempotent; the processor calls it before building its app)."""
    AIOKafkaConsumerThread.seek_to_committed = _seek_to_committed  # type: ignore[method-assign]
