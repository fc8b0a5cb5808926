"""The embedded broker on the object store: Tansu's ``s3`` engine against embedded/s3_server.py.

What the retention of the embedded default rests on: every produced batch becomes an object in the
store (not broker memory), and the broker serves it back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from flowtracer.embedded.bucket_client import BucketClient
from flowtracer.embedded.object_store import ObjectStore, ObjectStoreError
from flowtracer.embedded.tansu import TansuBroker

RECORDS = 200


@pytest.fixture(scope="module")
def store() -> Iterator[ObjectStore]:
    with ObjectStore() as s:
        yield s


def batch_keys(store: ObjectStore, topic: str) -> list[str]:
    """Keys of the record-batch objects of ``topic`` (every page of the listing)."""
    objects = BucketClient(store.endpoint, store.bucket).objects("clusters/")
    return [o.key for o in objects if f"/topics/{topic}/" in o.key and o.key.endswith(".batch")]


def test_records_are_objects_in_the_store_and_read_back(store: ObjectStore) -> None:
    with TansuBroker(object_store=store) as broker:
        assert broker.storage_engine == f"s3://{store.bucket}/"
        broker.create_topics({"objects": 1})
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False, linger_ms=0)
        for i in range(RECORDS):
            producer.send("objects", key=b"k", value=str(i).encode()).get(timeout=10)
        producer.close()
        # one send at a time: one batch each, so one object each
        assert len(batch_keys(store, "objects")) == RECORDS
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("objects", 0)])
        values = [int(m.value) for m in consumer]
        consumer.close()
        assert values == list(range(RECORDS))
    stats = store.stats()
    assert stats["objects"] >= RECORDS and stats["bytes"] > 0


def test_a_taken_port_is_named(store: ObjectStore) -> None:
    with pytest.raises(ObjectStoreError, match=f"port 127.0.0.1:{store.port} is already in use"):
        ObjectStore(port=store.port).start()


def test_concurrent_producers_to_one_partition_lose_no_acknowledged_record(store: ObjectStore) -> None:
    """Tansu's s3 engine hands out offsets by a conditional PUT of the partition's watermark (``If-Match``) and
    creates each batch object with ``If-None-Match: *``. A store that ignores them (s3rver did) lets concurrent
    produces reuse offsets and overwrite each other's batches: acknowledged records vanish."""
    per_producer = 150
    acked: list[int] = []
    lock = threading.Lock()

    def produce(n: int) -> None:
        p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False, linger_ms=0)
        for i in range(per_producer):
            md = p.send("shared", key=b"k", value=f"{n}:{i}".encode()).get(timeout=30)
            with lock:
                acked.append(md.offset)
        p.close()

    with TansuBroker(object_store=store) as broker:
        broker.create_topics({"shared": 1})
        threads = [threading.Thread(target=produce, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(acked) == len(set(acked)) == 3 * per_producer, "offsets were handed out twice"
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("shared", 0)])
        read = {m.offset: m.value for m in consumer}
        consumer.close()
    assert sorted(read) == sorted(acked)
    assert sorted(read.values()) == sorted(f"{n}:{i}".encode() for n in range(3) for i in range(per_producer))
