"""flowtracer's Faust transport: registered where Faust looks, configured per app, and each of its changes against a
real broker (Tansu, behind a proxy that can be cut)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import faust
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka

from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.stream.runtime import faust_driver
from flowtracer.stream.runtime.faust_driver import DriverOptions, connected, fetched_ends
from flowtracer.testbed.tcp_proxy import TcpProxy


def _app(tmp_path: Path, bootstrap: str = "127.0.0.1:9") -> faust.App:
    brokers = [f"kafka://{bootstrap}"]
    return faust.App("driver-test", broker=brokers, broker_consumer=faust_driver.consumer_brokers(brokers),
                     datadir=str(tmp_path), web_enabled=False)


def test_the_app_consumes_with_the_transport_and_produces_with_fausts(tmp_path: Path) -> None:
    assert faust_driver.consumer_brokers(["kafka://127.0.0.1:9092", "kafka://[::1]:9093"]) == \
        ["flowtracer-kafka://127.0.0.1:9092", "flowtracer-kafka://[::1]:9093"]
    app = _app(tmp_path)
    assert type(app.transport) is faust_driver.Transport
    assert type(app.producer_transport) is faust_aiokafka.Transport
    on_positioned = print
    faust_driver.configure(app, DriverOptions(fetch_wait_ms=100, on_positioned=on_positioned))
    assert app.transport.options == DriverOptions(fetch_wait_ms=100, on_positioned=on_positioned)
    assert isinstance(app.consumer, faust_driver.Consumer)
    assert faust_driver.broker_connected(app) is None, "not started: cannot be told"


def test_an_app_on_fausts_own_transport_is_refused(tmp_path: Path) -> None:
    app = faust.App("driver-test", broker="kafka://127.0.0.1:9", datadir=str(tmp_path), web_enabled=False)
    with pytest.raises(RuntimeError, match="broker_consumer"):
        faust_driver.configure(app, DriverOptions())


def test_the_worker_consumer_waits_as_long_as_the_options_say(tmp_path: Path) -> None:
    app = _app(tmp_path)
    faust_driver.configure(app, DriverOptions(fetch_wait_ms=100))

    async def create() -> int:
        thread = app.consumer._thread
        consumer = thread._create_worker_consumer(app.transport)
        return consumer._fetch_max_wait_ms  # what AIOKafkaConsumer.start gives its Fetcher

    assert asyncio.run(create()) == 100


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


async def _until(pred: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.1)
    return pred()


def test_the_client_is_connected_then_cut_off_then_connected_again(tmp_path: Path) -> None:
    assert connected(None) is None and connected(object()) is None  # no client: cannot be told
    port = free_port()
    with TcpProxy(port) as proxy, TansuBroker(port, advertise=proxy.address, log_dir=tmp_path) as broker:
        broker.create_topics({"broker-link": 1})

        async def run() -> list[bool]:
            consumer = AIOKafkaConsumer(bootstrap_servers=proxy.address, group_id=None, fetch_max_wait_ms=200)
            await consumer.start()
            try:
                consumer.assign([TopicPartition("broker-link", 0)])  # fetching keeps a connection busy
                seen = [await _until(lambda: connected(consumer._client) is True, 10)]
                proxy.cut()
                seen.append(await _until(lambda: connected(consumer._client) is False, 10))
                proxy.restore()
                seen.append(await _until(lambda: connected(consumer._client) is True, 20))
                return seen
            finally:
                await consumer.stop()

        assert asyncio.run(run()) == [True, True, True]


def test_a_fetch_is_current_until_its_partition_is_sought_again() -> None:
    epochs = faust_driver.SeekEpochs()
    a, b = TopicPartition("counters", 0), TopicPartition("counters", 1)
    never_sought = epochs.stamp([a, b])
    assert epochs.current(a, never_sought) and epochs.current(b, never_sought)
    epochs.moved([a])
    assert not epochs.current(a, never_sought), "fetched before a's seek"
    assert epochs.current(b, never_sought), "b was not sought"
    after = epochs.stamp([a, b])
    assert epochs.current(a, after) and epochs.current(b, after)
    epochs.moved([a, b])
    assert not epochs.current(a, after) and not epochs.current(b, after)
    assert not epochs.current(a, {}), "a fetch that did not have a is not current for it"
