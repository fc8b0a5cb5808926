"""Read back what a test pipeline wrote to Kafka topics (from the beginning, until the broker has nothing more)."""

from __future__ import annotations

import time
from collections import defaultdict

from kafka import KafkaConsumer, TopicPartition
from waiting import wait_for


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


def consume_all(bootstrap: str, topic: str, *, idle_s: float = 2.0, max_s: float = 30.0,
                expect: int | None = None) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record in ``topic`` (all partitions, from the start), stopping after
    ``expect`` records, after ``idle_s`` without records once some came (a first fetch on a loaded
    machine can take longer than that), or after ``max_s``."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                      consumer_timeout_ms=200)
    try:
        deadline = time.monotonic() + max_s  # for the topic and for its records
        wait_for(lambda: c.partitions_for_topic(topic) is not None, max_s, f"topic {topic} to exist")
        parts = c.partitions_for_topic(topic)
        c.assign([TopicPartition(topic, p) for p in sorted(parts)])
        c.seek_to_beginning()
        out: list[tuple[bytes, bytes]] = []
        last = time.monotonic()
        while time.monotonic() < deadline:
            polled = c.poll(timeout_ms=200)
            n = 0
            for records in polled.values():
                for r in records:
                    out.append((r.key, r.value))
                    n += 1
            now = time.monotonic()
            if n:
                last = now
            if (expect is not None and len(out) >= expect) or (out and now - last > idle_s):
                break
        return out
    finally:
        c.close()
