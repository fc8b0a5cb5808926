"""Makes Faust's table recovery read each changelog partition to its real end on Tansu.

Recovery reads a changelog partition up to the end offset it asks for with ListOffsets(latest). The embedded broker
(Tansu) answers that with the base offset of the partition's last record batch plus one, not the offset after its
last record: with batching on, a recovering worker stopped short of the newest stage states and restored older
ones, which is why the processor produced one record per batch on Tansu (``producer_max_batch_size=1``: then base
offset + 1 is the end), at the price of one produce request per output record. The high watermark in a fetch
response is right on Tansu (checked against real batches), so here the listed end is checked by a fetch from the
last batch: the end offset is the larger of the two. On Apache Kafka they agree, and the check costs one fetch per
recovery.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import Any

from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

log = logging.getLogger(__name__)
FETCH_TIMEOUT_MS = 2_000
"""How long the checking fetch may wait for the broker's answer, ms."""

_original = AIOKafkaConsumerThread._highwaters
_checked: weakref.WeakSet[Any] = weakref.WeakSet()  # the Faust apps whose broker is Tansu


async def fetched_ends(consumer: Any, listed: Mapping[Any, int | None]) -> dict[Any, int | None]:
    """The end offset of each partition: the larger of the listed one and the high watermark of a fetch made
    from one before the listed end (``consumer``: a started aiokafka consumer outside any group)."""
    tps = [tp for tp, end in listed.items() if end is not None]
    if not tps:
        return dict(listed)
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, max(0, int(listed[tp] or 0) - 1))  # type: ignore[arg-type]
    await consumer.getmany(*tps, timeout_ms=FETCH_TIMEOUT_MS)
    out = dict(listed)
    for tp in tps:
        hw = consumer.highwater(tp)
        if hw is not None and hw > int(listed[tp] or 0):
            out[tp] = hw
    return out


async def _highwaters(self: AIOKafkaConsumerThread, partitions: list[Any]) -> Mapping[Any, int]:
    listed = dict(await _original(self, partitions))
    if self.app not in _checked or self.consumer.in_transaction:
        return listed
    checker = self._create_client_consumer(self.transport)
    try:
        await checker.start()
        ends = await fetched_ends(checker, listed)
    except Exception as exc:
        log.warning("changelog end offsets not checked by a fetch (%s): using the listed ones", exc)
        return listed
    finally:
        await checker.stop()
    changed = {f"{tp.topic}[{tp.partition}]": (listed[tp], ends[tp]) for tp in ends if ends[tp] != listed[tp]}
    log.info("changelog end offsets of %d partitions checked by a fetch; corrected (listed, fetched): %s", len(ends),
             changed or "none")
    return ends  # type: ignore[return-value]


def check_ends(app: Any) -> None:
    """Check the changelog end offsets of ``app`` (a Faust app whose broker is Tansu) by a fetch: patches Faust's
    aiokafka consumer thread once; other apps keep the listed ends."""
    AIOKafkaConsumerThread._highwaters = _highwaters  # type: ignore[method-assign]
    _checked.add(app)
