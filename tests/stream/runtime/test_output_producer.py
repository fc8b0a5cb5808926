"""The output producer against a real Tansu broker: partitions, order, acknowledgements, failures, batching."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import faust
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.protocol.produce import ProduceRequest

from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.schemas import topics
from flowtracer.stream.runtime.faust_driver import connected
from flowtracer.stream.runtime.output_producer import KeyPartitions, OutputProducer, producer_settings
from flowtracer.testbed.tcp_proxy import TcpProxy

Record = tuple[int, bytes | None, bytes]  # (offset, key, value) as read back


def settings(bootstrap: str, **over: Any) -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap, "acks": "all", "enable_idempotence": False, **over}


async def read_back(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Record]]:
    """Every record of ``topic``, per partition in offset order: read until each partition's position reaches the
    high watermark of the fetches (which Tansu gets right, unlike its ListOffsets)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                fetch_max_wait_ms=100)
    await consumer.start()
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: dict[int, list[Record]] = {p: [] for p in range(partitions)}
        while True:
            for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                got[tp.partition] += [(r.offset, r.key, r.value) for r in records]
            ends = [consumer.highwater(tp) for tp in tps]
            positions = [await consumer.position(tp) for tp in tps]
            if all(end is not None and pos >= end for pos, end in zip(positions, ends, strict=True)):
                return got
    finally:
        await consumer.stop()


def count_produce_requests(op: OutputProducer) -> Counter[str]:
    """Count the produce requests the producer's client sends (a wrapper around the real client's ``send``)."""
    counts: Counter[str] = Counter()
    client = op.producer.client
    send: Callable[..., Awaitable[Any]] = client.send

    async def counting(node_id: int, request: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(request, ProduceRequest):
            counts["requests"] += 1
        return await send(node_id, request, *args, **kwargs)

    client.send = counting  # type: ignore[method-assign]
    return counts


def test_records_land_on_kafkas_partition_in_order_and_are_in_the_broker_when_acknowledged(
        kafka: TansuBroker, unique_id: str) -> None:
    topic, partitions = f"out-{unique_id}", 5
    keys = [f"leaf-{i:02d}:Ethernet1/{i % 7}>spine-{i % 3}".encode() for i in range(40)]

    async def run() -> tuple[list[tuple[bytes, bytes, Any]], int]:
        op = OutputProducer(settings(kafka.bootstrap, max_batch_size=1024))  # ~20 records a batch: many per flush
        await op.start()
        kafka.create_topics({topic: partitions})  # after the start: not in the producer's metadata yet
        try:
            sent = []
            for i in range(600):
                key, value = keys[i % len(keys)], b"%06d" % i
                sent.append((key, value, op.send(topic, key, value)))
                if i == 100:  # the first flush asks the topic's partition count; send on while it does
                    flushing = asyncio.create_task(op.flush())
                    await asyncio.sleep(0)
                if i in (250, 500):
                    await op.flush()
            await op.flush()
            await flushing
            await asyncio.gather(*(f for _, _, f in sent))
            return sent, op.batches_sent
        finally:
            await op.stop()

    sent, batches_sent = asyncio.run(run())
    got = asyncio.run(read_back(kafka.bootstrap, topic, partitions))
    kafka_partition = DefaultPartitioner()
    expected: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(partitions)}
    for key, value, fut in sent:
        p = kafka_partition(key, list(range(partitions)), list(range(partitions)))
        expected[p].append((key, value))
        meta = fut.result()
        assert (meta.topic, meta.partition) == (topic, p)
        offset = next(o for o, k, v in got[p] if v == value)
        assert meta.offset <= offset, "the future is its batch's: the record is at or after the batch's base offset"
    assert {p: [(k, v) for _, k, v in records] for p, records in got.items()} == expected, "every record, in order"
    batch_bytes: Counter[tuple[int, int]] = Counter()  # a batch's records get its metadata: its base offset
    for key, value, fut in sent:
        batch_bytes[fut.result().partition, fut.result().offset] += len(key) + len(value)
    assert len(batch_bytes) == batches_sent > 4 * partitions, "full batches were closed and new ones started"
    assert max(batch_bytes.values()) <= 1024, "no batch over max_batch_size"


def test_send_keyed_places_records_as_send_does_and_returns_each_batch_future_once(
        kafka: TansuBroker, unique_id: str) -> None:
    known, later, partitions = f"out-{unique_id}", f"out-late-{unique_id}", 3
    kafka.create_topics({known: partitions})
    keys = [f"leaf-{i:02d}:Ethernet1/{i % 5}>spine-{i % 2}".encode() for i in range(25)]

    async def run() -> tuple[list[tuple[str, bytes, bytes]], list[Any], int]:
        op = OutputProducer(settings(kafka.bootstrap, max_batch_size=1024))  # ~20 records a batch: many rotations
        await op.start()
        kafka.create_topics({later: partitions})  # after the start: its records wait for the count at the flush
        try:
            sent: list[tuple[str, bytes, bytes]] = []
            futures: list[Any] = []
            for rnd in range(3):  # keyed bulks between single sends, on both topics
                for topic in (known, later):
                    bulk = [(keys[i % len(keys)], b"%s-%d-%04d" % (topic[-4:].encode(), rnd, i)) for i in range(150)]
                    got = op.send_keyed(topic, bulk)
                    assert len(got) == len(set(got)), "each batch's future once"
                    futures += got
                    sent += [(topic, k, v) for k, v in bulk]
                    single = (keys[rnd], b"single-%d" % rnd)
                    futures.append(op.send(topic, *single))
                    sent.append((topic, *single))
                await op.flush()
            metas = await asyncio.gather(*futures)
            return sent, metas, op.batches_sent
        finally:
            await op.stop()

    sent, metas, batches = asyncio.run(run())
    kafka_partition = DefaultPartitioner()
    for topic in (known, later):
        got = asyncio.run(read_back(kafka.bootstrap, topic, partitions))
        expected: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(partitions)}
        for t, key, value in sent:
            if t == topic:
                expected[kafka_partition(key, list(range(partitions)), list(range(partitions)))].append((key, value))
        assert {p: [(k, v) for _, k, v in records] for p, records in got.items()} == expected, \
            f"{topic}: every record on Kafka's partition for its key, in send order"
    assert {m.topic for m in metas} == {known, later}
    assert batches > 6 * partitions, "full batches were closed and new ones started"


def test_many_records_become_few_produce_requests(kafka: TansuBroker, unique_id: str) -> None:
    topic, partitions, n = f"out-{unique_id}", 4, 4000
    kafka.create_topics({topic: partitions})

    async def run() -> tuple[int, int]:
        op = OutputProducer(settings(kafka.bootstrap))  # aiokafka's and Faust's 16 KiB batches
        await op.start()
        try:
            requests = count_produce_requests(op)
            futures = [op.send(topic, b"link-%d" % (i % 300), b"v" * 60) for i in range(n)]
            await op.flush()
            await asyncio.gather(*futures)
            return requests["requests"], op.batches_sent
        finally:
            await op.stop()

    requests, batches = asyncio.run(run())
    assert batches <= n * 90 // (16384 - 61) + partitions, "full 16 KiB batches (records of at most 90 bytes)"
    assert requests <= batches, "a produce request carries the batches of several partitions"
    assert n / requests >= 100, (n, requests)
    got = asyncio.run(read_back(kafka.bootstrap, topic, partitions))
    assert sum(len(r) for r in got.values()) == n


def test_keyless_records_fill_one_partition_per_flush_and_explicit_partitions_are_kept(
        kafka: TansuBroker, unique_id: str) -> None:
    topic, partitions = f"out-{unique_id}", 3
    kafka.create_topics({topic: partitions})

    async def run() -> tuple[set[int], set[int], list[Any]]:
        op = OutputProducer(settings(kafka.bootstrap))
        await op.start()
        try:
            keyless = [op.send(topic, None, b"dead letter %d" % i) for i in range(20)]
            explicit = [op.send(topic, None, b"to 2", partition=2), op.send(topic, b"k", b"to 1", partition=1)]
            await op.flush()
            out_of_range = op.send(topic, None, b"to 3", partition=3)
            await op.flush()
            metas = await asyncio.gather(*keyless)
            return {m.partition for m in metas}, {(await f).partition for f in explicit}, [out_of_range]
        finally:
            await op.stop()

    keyless, explicit, (out_of_range,) = asyncio.run(run())
    assert len(keyless) == 1, "one partition for the keyless records of a flush"
    assert explicit == {1, 2}
    with pytest.raises(ValueError, match=r"partition 3 of topic .*: it has 3 partitions"):
        out_of_range.result()


def test_a_record_over_the_request_size_fails_its_future_and_nothing_else(kafka: TansuBroker, unique_id: str) -> None:
    topic = f"out-{unique_id}"
    kafka.create_topics({topic: 1})

    async def run() -> tuple[Any, list[Any]]:
        op = OutputProducer(settings(kafka.bootstrap, max_request_size=10_000))
        await op.start()
        try:
            before = op.send(topic, b"a", b"small")
            too_large = op.send(topic, b"b", b"x" * 10_000)
            after = op.send(topic, b"c", b"small too")
            await op.flush()
            return too_large, await asyncio.gather(before, after)
        finally:
            await op.stop()

    too_large, others = asyncio.run(run())
    with pytest.raises(MessageSizeTooLargeError, match="over max_request_size 10000"):
        too_large.result()
    assert [m.offset for m in others] == [0, 0], "the two others went in one batch"
    got = asyncio.run(read_back(kafka.bootstrap, topic, 1))
    assert [v for _, _, v in got[0]] == [b"small", b"small too"]


async def _until_disconnected(op: OutputProducer) -> None:
    """Wait until the producer's client has no broker connection (what the worker's window clock looks at)."""
    while connected(op.producer.client) is not False:
        await asyncio.sleep(0.02)


def test_with_the_broker_gone_futures_wait_and_resolve_when_it_is_back(tmp_path: Any,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """As Faust's producer: the batches are retried for the request timeout (here Faust's 20 minutes), in order."""
    with TcpProxy(free_port()) as proxy, \
            TansuBroker(proxy.backend_port, advertise=proxy.address, log_dir=tmp_path) as broker:
        broker.create_topics({"out": 2})

        async def run() -> list[Any]:
            op = OutputProducer(settings(broker.bootstrap, request_timeout_ms=1_200_000, max_batch_size=512))
            await op.start()
            try:
                await asyncio.gather(op.send("out", b"k", b"before"), op.flush())
                proxy.cut()
                await _until_disconnected(op)
                futures = [op.send("out", b"k", b"during %03d" % i) for i in range(40)]  # several batches
                flushing = asyncio.create_task(op.flush())
                # The first batch is handed over: wait until aiokafka's sender has tried it and will retry.
                while not any("Got error produce response" in r.getMessage() for r in caplog.records):
                    await asyncio.sleep(0.02)
                assert not any(f.done() for f in futures), "nothing acknowledged or failed while the broker is gone"
                proxy.restore()
                await flushing
                return await asyncio.gather(*futures)
            finally:
                await op.stop()

        metas = asyncio.run(run())
        got = asyncio.run(read_back(broker.bootstrap, "out", 2))
    assert {m.partition for m in metas} == {DefaultPartitioner()(b"k", [0, 1], [0, 1])}
    assert [v for records in got.values() for _, _, v in records] == [b"before"] + [b"during %03d" % i for i in range(40)]


def test_with_the_broker_gone_past_the_request_timeout_the_futures_fail(tmp_path: Any) -> None:
    with TcpProxy(free_port()) as proxy, \
            TansuBroker(proxy.backend_port, advertise=proxy.address, log_dir=tmp_path) as broker:
        broker.create_topics({"out": 1})

        async def run() -> list[Any]:
            op = OutputProducer(settings(broker.bootstrap, request_timeout_ms=1000))
            await op.start()
            try:
                await asyncio.gather(op.send("out", None, b"before"), op.flush())
                proxy.cut()
                await _until_disconnected(op)
                futures = [op.send("out", None, b"lost %d" % i) for i in range(3)]
                await op.flush()
                return await asyncio.gather(*futures, return_exceptions=True)
            finally:
                proxy.restore()
                await op.stop()

        outcomes = asyncio.run(run())
    assert all(isinstance(o, KafkaError) for o in outcomes), outcomes


def test_send_before_start_is_an_error() -> None:
    async def run() -> None:
        OutputProducer(settings("127.0.0.1:9")).send("out", b"k", b"v")

    with pytest.raises(RuntimeError, match="not started"):
        asyncio.run(run())


def test_key_partitions_are_kafkas_and_the_cache_stays_bounded() -> None:
    kafka_partition = DefaultPartitioner()
    cache = KeyPartitions(max_keys=50)
    for n in (1, 8, 13):
        for i in range(200):
            key = f"path-{i}".encode()
            assert cache(key, n) == kafka_partition(key, list(range(n)), []) == topics.partition_for(f"path-{i}", n)
            assert len(cache) <= 50


def test_producer_settings_are_the_faust_apps_producer_settings() -> None:
    app = faust.App("settings-test", broker="kafka://10.0.0.1:9093;kafka://10.0.0.2", producer_max_batch_size=65536,
                    broker_credentials=faust.SASLCredentials(username="u", password="p", mechanism="PLAIN"))
    s = producer_settings(app.conf)
    assert s["bootstrap_servers"] == ["10.0.0.1:9093", "10.0.0.2:9092"]
    assert (s["acks"], s["enable_idempotence"], s["max_batch_size"]) == (-1, False, 65536)
    assert s["request_timeout_ms"] == 1_200_000, "Faust's producer_request_timeout: how long a batch is retried"
    assert (s["security_protocol"], s["sasl_mechanism"], s["sasl_plain_username"]) == ("SASL_PLAINTEXT", "PLAIN", "u")
