"""broker_link.connected against a real broker behind a proxy that is cut and restored, as the outage test does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from flowtracer.stream.runtime.broker_link import connected
from flowtracer.testbed.tansu import TansuBroker, free_port
from flowtracer.testbed.tcp_proxy import TcpProxy


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
