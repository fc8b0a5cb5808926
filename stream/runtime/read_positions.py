"""Which input partitions still have records this worker has not read: its consumer lag, per partition (pure).

On a backlog (a restart after downtime, a failover, a replay) the window rules must not wait a source out by the
clock while its records are merely not read yet (stream/stages/window_policy.py). A partition has unread records
when the high watermark of the consumer's last fetch of it (public in aiokafka and Faust; Tansu's fetch responses
carry the right one, unlike its ListOffsets(latest)) is beyond the next offset this worker would read: the offset
after the last record it handled, or, before it handled any, where the consumer was positioned (the committed
offset, or the beginning: ``faust_driver``). Records fetched but still in Faust's buffers count as unread, as they
should. A partition whose position or high watermark is not known yet counts as read (the clock rules apply).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

TopicPartition = tuple[str, int]
Highwater = Callable[[str, int], "int | None"]
"""The high watermark (the offset after the last record, from the consumer's last fetch) of a partition, or None."""


class ReadPositions:
    """The next offset this worker would read, per (topic, partition)."""

    def __init__(self) -> None:
        self._next: dict[TopicPartition, int] = {}

    def positioned(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The consumer was sought to these offsets (a rebalance, a recovery): records from there on are unread."""
        self._next.update(offsets)

    def read(self, topic: str, partition: int, offset: int) -> None:
        """A record at ``offset`` was handled (records of one partition come in offset order, from the position)."""
        self._next[(topic, partition)] = offset + 1

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions revoked: another worker reads them now."""
        for tp in tps:
            self._next.pop(tp, None)

    def partitions(self) -> set[TopicPartition]:
        """The partitions whose next offset is known."""
        return set(self._next)

    def unread(self, highwater: Highwater) -> frozenset[TopicPartition]:
        """The partitions with records beyond the next offset to read."""
        out = []
        for (topic, partition), nxt in self._next.items():
            hw = highwater(topic, partition)
            if hw is not None and hw > nxt:
                out.append((topic, partition))
        return frozenset(out)
