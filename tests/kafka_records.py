"""Read back what a test pipeline wrote to Kafka topics (from the beginning, until the broker has nothing more)."""

from __future__ import annotations

from collections import defaultdict

from kafka import KafkaConsumer


def topic_records(bootstrap: str, *names: str, idle_ms: int = 4000) -> dict[str, list[bytes]]:
    """Every record value of topics ``names`` (topic -> values in fetch order), read until ``idle_ms`` pass without
    one (Tansu's end offsets are not to be trusted, DEVELOPERS.md)."""
    got: dict[str, list[bytes]] = defaultdict(list)
    consumer = KafkaConsumer(*names, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=idle_ms, enable_auto_commit=False)
    for m in consumer:
        got[m.topic].append(m.value)
    consumer.close()
    return got
