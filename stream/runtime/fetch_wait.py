"""Caps how long the processor's Kafka fetches wait at the broker for data (Faust hard-codes 1.5 s).

A fetch asks the broker for new records and lets it wait up to ``fetch_max_wait_ms`` for some. Apache Kafka
answers a waiting fetch as soon as a record arrives, so the wait costs nothing there. The embedded broker (Tansu)
does not: a fetch that finds nothing waits its full time, so every record the worker reads arrived on average half
that wait late. The processor reads its own outputs back (attributions to the links stage, group FIMs to the fabric
stage), so one window crosses three such hops: measured with bench/stage_latency.py, each stage added about 0.5-0.7 s,
and a produce-to-consume round trip on Tansu took 0.28 s at 1,500 ms, 0.05 s at 500 ms and 0.02 s at 100 ms
(p50; 20 records 0.37 s apart). At :data:`FETCH_MAX_WAIT_MS` a worker with nothing to read sends ten fetches a
second: nothing for a broker.
"""

from __future__ import annotations

from typing import Any

from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

FETCH_MAX_WAIT_MS = 100
"""How long a fetch may wait at the broker for data, ms."""

_original = AIOKafkaConsumerThread._create_worker_consumer


def _create_worker_consumer(self: AIOKafkaConsumerThread, transport: Any) -> Any:
    consumer = _original(self, transport)
    consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # read by start(), which builds the fetcher
    return consumer


def install() -> None:
    """Patch Faust's aiokafka consumer thread (idempotent; the processor calls it before building its app)."""
    AIOKafkaConsumerThread._create_worker_consumer = _create_worker_consumer  # type: ignore[method-assign]
