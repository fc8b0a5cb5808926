"""Changelog end offsets checked by a fetch, against a real Tansu that lists the wrong end of batched partitions."""

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from flowtracer.stream.runtime.changelog_end import fetched_ends
from flowtracer.testbed.tansu import TansuBroker


async def _check(bootstrap: str) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int | None]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=50)
    await producer.start()
    try:  # partition 0: 10 records in one batch; 1: 7 records one by one; 2: nothing
        await asyncio.gather(*[await producer.send("changelog", b"v", key=b"k", partition=0) for _ in range(10)])
        for _ in range(7):
            await (await producer.send("changelog", b"v", key=b"k", partition=1))
    finally:
        await producer.stop()
    tps = [TopicPartition("changelog", p) for p in range(3)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        listed = await consumer.end_offsets(tps)
        return listed, await fetched_ends(consumer, listed)
    finally:
        await consumer.stop()


def test_the_end_of_a_batched_partition_comes_from_the_fetch() -> None:
    with TansuBroker() as broker:
        broker.create_topics({"changelog": 3})
        listed, ends = asyncio.run(_check(broker.bootstrap))
    p0, p1, p2 = (TopicPartition("changelog", p) for p in range(3))
    assert listed[p0] < 10, "Tansu lists the last batch's base offset + 1 (if this fails, the workaround is moot)"
    assert (ends[p0], ends[p1], ends[p2]) == (10, 7, 0)
