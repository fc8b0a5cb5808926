"""The processor's worker consumer waits at most FETCH_MAX_WAIT_MS per fetch (Faust would have 1,500 ms)."""

from __future__ import annotations

import asyncio

import faust

from flowtracer.stream.runtime import fetch_wait


def test_the_worker_consumer_fetches_with_the_short_wait() -> None:
    async def created() -> int:
        app = faust.App("fetch-wait-test", broker="kafka://127.0.0.1:1")  # never connected
        consumer = app.consumer._thread._create_worker_consumer(app.transport)
        try:
            return consumer._fetch_max_wait_ms
        finally:
            await consumer.stop()

    fetch_wait.install()
    fetch_wait.install()  # idempotent
    assert asyncio.run(created()) == fetch_wait.FETCH_MAX_WAIT_MS == 100
