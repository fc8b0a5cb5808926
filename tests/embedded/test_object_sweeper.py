"""The object sweeper against the real parts, in compressed time: the object store, Tansu on its ``s3`` engine,
kafka-python.

Retention is 2 s and the sweep interval 0.5 s. Every wait is on something observed (a sweep completed, a record
received, an object gone), with deadlines made of the settings plus ``PATIENCE_S`` for a loaded machine; no
assertion depends on how fast anything ran. The bounds are derived from what was observed: which records were
produced when, and when each completed sweep judged ages.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder
from waiting import wait_for

from flowtracer.embedded.bucket_client import LAST_MODIFIED_RESOLUTION_S, BucketClient, ObjectInfo
from flowtracer.embedded.log_retention import RetentionPolicy, policies_from_plan
from flowtracer.embedded.managed_process import free_port
from flowtracer.embedded.object_store import ObjectStore
from flowtracer.embedded.object_sweeper import ObjectSweeper, batch_records, by_partition
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.plumbing.topic_admin import TopicPlan, apply

RETENTION_MS = 2_000
INTERVAL_S = 0.5
DELETE_RETENTION_MS = 1_000
"""Tombstones of the compacted topic may go 1 s after they were written."""
PRODUCE_FOR_S = 4 * RETENTION_MS / 1000
"""The producer writes for four retention periods."""
AHEAD = 20
"""The producer waits while it is more than this many records ahead of the consumer group: the group keeps up."""
PATIENCE_S = 60.0
"""What a deadline adds to the settings, s: a loaded machine may be that slow, a broken sweeper waits in vain."""
RETENTION_S = RETENTION_MS / 1000
STALE_S = RETENTION_S + LAST_MODIFIED_RESOLUTION_S
"""A batch object whose LastModified is older than this at a sweep's time is past retention for sure."""

DELETE_TOPIC = "sweep-delete"
COMPACT_TOPIC = "sweep-compact"
UNMANAGED_TOPIC = "sweep-unmanaged"
PLAN = [
    TopicPlan(DELETE_TOPIC, 2, {"retention.ms": str(RETENTION_MS)}),
    TopicPlan(COMPACT_TOPIC, 1, {"cleanup.policy": "compact", "delete.retention.ms": str(DELETE_RETENTION_MS)}),
    TopicPlan(UNMANAGED_TOPIC, 1, {}),  # keeps everything: no policy, left alone
]


@dataclass
class Bed:
    store: ObjectStore
    broker: TansuBroker
    sweeper: ObjectSweeper
    bucket: BucketClient = field(init=False)

    def __post_init__(self) -> None:
        self.bucket = BucketClient(self.store.endpoint, self.store.bucket)

    def key(self, rest: str) -> str:
        return f"clusters/{self.broker.cluster_id}/{rest}"

    def batches(self, topic: str) -> dict[int, dict[int, ObjectInfo]]:
        """partition -> base offset -> batch object, as the store lists them now."""
        prefix = self.key(f"topics/{topic}/partitions/")
        return by_partition(self.bucket.objects(prefix), prefix)

    def watermark_high(self, topic: str, partition: int) -> int:
        """The partition's high watermark as Tansu keeps it, in an object the sweeper must never delete."""
        return int(json.loads(self.bucket.get(self.key(f"topics/{topic}/partitions/{partition:010d}/watermark.json")))
                   ["high"])


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    """Store, broker on it, the plan's topics created through the topic admin, and a sweeper running its policies."""
    logs = tmp_path_factory.mktemp("object-sweeper")
    with ObjectStore(log_dir=logs) as store, TansuBroker(object_store=store, log_dir=logs) as broker:
        assert apply(broker.bootstrap, PLAN, timeout_s=PATIENCE_S) == []
        policies = policies_from_plan(PLAN)
        assert set(policies) == {DELETE_TOPIC, COMPACT_TOPIC}
        with ObjectSweeper(store.endpoint, store.bucket, broker.cluster_id, policies, interval_s=INTERVAL_S) as sw:
            yield Bed(store, broker, sw)


class GroupReader(ConsumerRebalanceListener):
    """A consumer group member reading ``topic`` in a thread; ``received[partition]`` is [(offset, value, wall s)],
    ``passed`` the number of offsets it has got past (each partition's last offset received + 1, summed)."""

    def __init__(self, bed: Bed, topic: str, group: str) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=bed.broker.bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=True, auto_commit_interval_ms=200, session_timeout_ms=6000,
            heartbeat_interval_ms=1000)
        self.assignments = 0
        self.consumer.subscribe([topic], listener=self)
        self.received: dict[int, list[tuple[int, bytes, float]]] = {}
        self.passed = 0
        self.failure: BaseException | None = None
        self.assigned = threading.Event()
        self.changed = threading.Condition()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        """A (re)balance gave this member its partitions (a second one may deliver records again)."""
        self.assignments += 1

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        pass

    def run(self) -> None:
        try:
            self.read()
        except BaseException as e:
            with self.changed:
                self.failure = e
                self.changed.notify_all()
            raise
        finally:
            self.consumer.close()

    def read(self) -> None:
        while not self.stopping.is_set():
            for tp, messages in self.consumer.poll(timeout_ms=100).items():
                now = time.time()
                with self.changed:
                    self.received.setdefault(tp.partition, []).extend((m.offset, m.value, now) for m in messages)
                    self.passed = sum(r[-1][0] + 1 for r in self.received.values())
                    self.changed.notify_all()
            if self.consumer.assignment():
                self.assigned.set()
        self.consumer.commit()

    def wait_passed(self, n: int, deadline_s: float) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: self.passed >= n or self.failure is not None, deadline_s):
                raise AssertionError(f"the group got past {self.passed} offsets, waited for {n} for {deadline_s} s")
            if self.failure is not None:
                raise AssertionError(f"the group's consumer failed: {self.failure!r}")

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


def test_retention_bounds_the_store_and_a_group_that_keeps_up_gets_every_record(bed: Bed) -> None:
    """Four retention periods of records, each its own batch, alternately to two partitions. After each clean
    sweep no batch object past retention is left but the newest of a partition, so the number of objects is what
    was produced since a retention before that sweep; the group sees every record in order (a gap only where a
    record was past retention when the group got past it); Tansu's offsets and high watermarks are unchanged."""
    group = "sweep-keeps-up"
    reader = GroupReader(bed, DELETE_TOPIC, group)
    producer = KafkaProducer(bootstrap_servers=bed.broker.bootstrap, enable_idempotence=False, linger_ms=0)
    for _ in range(3):  # a topic without a policy: its batches outlive the retention of the others
        producer.send(UNMANAGED_TOPIC, value=b"kept").get(timeout=PATIENCE_S)
    sent: dict[int, list[float]] = {0: [], 1: []}  # partition -> wall time each record was sent, by offset
    acked: dict[int, list[float]] = {0: [], 1: []}  # ... and its produce was answered (it was written before)
    checks, most = 0, {0: 0, 1: 0}
    seen_sweep = bed.sweeper.stats().sweeps
    assert reader.assigned.wait(PATIENCE_S), "the group did not get its partitions"
    started = time.time()
    try:
        while time.time() - started < PRODUCE_FOR_S:
            i = len(sent[0]) + len(sent[1])
            reader.wait_passed(i - AHEAD, PATIENCE_S)
            p = i % 2
            sent[p].append(time.time())
            meta = producer.send(DELETE_TOPIC, value=b"%d" % len(sent[p]), partition=p).get(timeout=PATIENCE_S)
            acked[p].append(time.time())
            assert meta.offset == len(sent[p]) - 1
            stats = bed.sweeper.stats()
            if stats.sweeps > seen_sweep and stats.last_sweep_errors == 0:
                seen_sweep = stats.sweeps
                assert stats.last_sweep_at_s is not None
                listed = bed.batches(DELETE_TOPIC)
                for part, objects in listed.items():
                    stale = [o for o in objects.values() if o.last_modified_s + STALE_S < stats.last_sweep_at_s]
                    assert len(stale) <= 1, f"partition {part}: {len(stale)} objects past retention at the last sweep"
                    # so the objects left are at most those answered since a retention before the sweep, and one
                    since = stats.last_sweep_at_s - STALE_S
                    bound = sum(1 for t in acked[part] if t >= since) + 1
                    assert len(objects) <= bound, f"partition {part}: {len(objects)} objects, at most {bound}"
                    most[part] = max(most[part], len(objects))
                checks += 1
        produced = len(sent[0]) + len(sent[1])
        reader.wait_passed(produced, PATIENCE_S)
    finally:
        reader.stop()
        producer.close()
    assert checks >= 3, f"only {checks} clean sweeps were checked in {PRODUCE_FOR_S} s"
    assert bed.sweeper.stats().objects_deleted > 0
    for p in (0, 1):
        got = reader.received[p]
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets)), f"in order, each record once ({reader.assignments} assignments)"
        assert all(v == b"%d" % (o + 1) for o, v, _ in got)
        assert offsets[-1] == len(sent[p]) - 1
        # A batch goes only once LastModified + 1 s + retention is past, and LastModified + 1 s > the time it was
        # sent: a record skipped earlier than a retention after it was sent was lost, not expired.
        missing = sorted(set(range(len(sent[p]))) - set(offsets))
        after = {o: next(t for o2, _, t in got if o2 > o) for o in missing}
        unexpected = [o for o in missing if sent[p][o] + RETENTION_S >= after[o]]
        assert not unexpected, f"partition {p}: records {unexpected} skipped before they were past retention"
        assert most[p] < len(sent[p]), f"partition {p}: the store kept all {most[p]} batches"
        # what is not records stays: Tansu's high watermark, and the group's committed offsets
        assert bed.watermark_high(DELETE_TOPIC, p) == len(sent[p])
    assert json.loads(bed.bucket.get(bed.key(f"groups/consumers/{group}.json")))
    assert len(bed.batches(UNMANAGED_TOPIC)[0]) == 3 and UNMANAGED_TOPIC in bed.sweeper.unmanaged

    # Production over: retention leaves the newest batch of each partition only. ListOffsets(earliest) then
    # answers its offset, and a new group reads from there on.
    deadline_s = STALE_S + INTERVAL_S + PATIENCE_S
    wait_for(lambda: all(len(objs) == 1 for objs in bed.batches(DELETE_TOPIC).values()), deadline_s,
             "retention to leave one batch object per partition")
    fresh = KafkaConsumer(bootstrap_servers=bed.broker.bootstrap, group_id="sweep-fresh",
                          auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        tps = [TopicPartition(DELETE_TOPIC, p) for p in (0, 1)]
        assert fresh.beginning_offsets(tps) == {tp: len(sent[tp.partition]) - 1 for tp in tps}
        fresh.assign(tps)
        last: dict[int, int] = {}
        deadline = time.monotonic() + PATIENCE_S
        while len(last) < 2 and time.monotonic() < deadline:
            for tp, messages in fresh.poll(timeout_ms=200).items():
                last[tp.partition] = messages[0].offset
        assert last == {p: len(sent[p]) - 1 for p in (0, 1)}
    finally:
        fresh.close()


def test_a_compacted_topic_reads_back_as_the_latest_value_of_each_key(bed: Bed) -> None:
    """Repeating keys, some deleted, in batches of one to three records, compacted while they are written. Once
    every tombstone is past ``delete.retention.ms`` at a sweep, a reader from the start gets exactly the latest value
    of each key and none of the deleted ones; each batch object left holds a key's latest record (or is the newest)."""
    rng = random.Random(27)
    keys = [b"key-%02d" % k for k in range(12)]
    truth: dict[bytes, bytes] = {}
    producer = KafkaProducer(bootstrap_servers=bed.broker.bootstrap, enable_idempotence=False, linger_ms=50)
    last_offset = -1
    try:
        for n in range(400):
            futures = []
            for _ in range(rng.randint(1, 3)):
                key = rng.choice(keys)
                value = None if rng.random() < 0.2 else b"%d" % n
                futures.append(producer.send(COMPACT_TOPIC, key=key, value=value, partition=0))
                if value is None:
                    truth.pop(key, None)
                else:
                    truth[key] = value
            producer.flush()
            last_offset = max(f.get(timeout=PATIENCE_S).offset for f in futures)
        for key in keys[:3]:  # these end deleted, whatever came before
            producer.send(COMPACT_TOPIC, key=key, value=None, partition=0)
            truth.pop(key, None)
        producer.flush()
        last_offset += 3
    finally:
        producer.close()
    assert bed.watermark_high(COMPACT_TOPIC, 0) == last_offset + 1

    written = max(o.last_modified_s for o in bed.batches(COMPACT_TOPIC)[0].values())
    settled = written + LAST_MODIFIED_RESOLUTION_S + DELETE_RETENTION_MS / 1000
    wait_for(lambda: (bed.sweeper.stats().last_sweep_at_s or 0) > settled and bed.sweeper.stats().last_sweep_errors == 0,
             settled - time.time() + INTERVAL_S + PATIENCE_S, "a clean sweep after every tombstone is old enough")
    left = bed.batches(COMPACT_TOPIC)[0]
    assert len(left) <= len(keys) + 1, f"{len(left)} batch objects left for {len(keys)} keys"

    reader = KafkaConsumer(bootstrap_servers=bed.broker.bootstrap, auto_offset_reset="earliest",
                           enable_auto_commit=False)
    seen: dict[bytes, bytes] = {}
    offsets: list[int] = []
    try:
        reader.assign([TopicPartition(COMPACT_TOPIC, 0)])
        deadline = time.monotonic() + PATIENCE_S
        while (not offsets or offsets[-1] < last_offset) and time.monotonic() < deadline:
            for messages in reader.poll(timeout_ms=200).values():
                for m in messages:
                    offsets.append(m.offset)
                    if m.value is None:
                        seen.pop(m.key, None)
                    else:
                        seen[m.key] = m.value
    finally:
        reader.close()
    assert offsets and offsets[-1] == last_offset
    assert offsets == sorted(set(offsets))
    assert len(offsets) < last_offset + 1, "compaction deleted records"
    assert seen == truth


# -- errors: counted, logged, never fatal, nothing deleted on doubt -------------------------------------------------

def put(store: ObjectStore, key: str, data: bytes) -> None:
    request = urllib.request.Request(f"{store.endpoint}/{store.bucket}/{key}", data=data, method="PUT")
    with urllib.request.urlopen(request, timeout=5):
        pass


def encoded(*records: tuple[bytes, bytes | None]) -> bytes:
    """A Kafka v2 record batch of (key, value) records, as Tansu stores one."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=0, key=key, value=value, headers=[])
    return bytes(builder.build())


def test_batch_records_reads_keys_and_tombstones_and_refuses_bad_bytes() -> None:
    data = encoded((b"a", b"1"), (b"b", None))
    assert [(r.key, r.tombstone) for r in batch_records(data)] == [(b"a", False), (b"b", True)]
    for bad in (data[:-1], data[:30], b"x" * 100, data[:-1] + bytes([data[-1] ^ 1])):
        with pytest.raises(ValueError):
            batch_records(bad)


def test_an_unreadable_batch_stops_compaction_of_its_partition_only(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Hand-made batch objects of a made-up cluster: partition 0 has a corrupt object and keeps everything,
    partition 1 is compacted; the sweeper counts the error, caches only what it read, and goes on."""
    with ObjectStore(log_dir=tmp_path_factory.mktemp("sweeper-errors")) as store:
        base = "clusters/made-up/topics/t/partitions"
        for p in (0, 1):
            put(store, f"{base}/{p:010d}/records/{0:020d}.batch", encoded((b"a", b"1")))
            put(store, f"{base}/{p:010d}/records/{1:020d}.batch", encoded((b"a", b"2")))
            put(store, f"{base}/{p:010d}/records/{3:020d}.batch", encoded((b"b", b"1")))
            put(store, f"{base}/{p:010d}/watermark.json", b'{"low":null,"high":4,"timestamps":null}')
        put(store, f"{base}/{0:010d}/records/{2:020d}.batch", b"not a record batch")
        put(store, f"{base}/{1:010d}/records/{2:020d}.batch", encoded((b"c", b"1")))
        sweeper = ObjectSweeper(store.endpoint, store.bucket, "made-up", {"t": RetentionPolicy(compact=True)},
                                clock=lambda: time.time() + 60)
        sweeper.sweep()
        stats = sweeper.stats()
        assert (stats.sweeps, stats.errors, stats.last_sweep_errors) == (1, 1, 1)
        assert (stats.objects_deleted, stats.objects_kept, stats.cached_batches) == (1, 7, 6)  # not the bad one
        client = BucketClient(store.endpoint, store.bucket)
        left = by_partition(client.objects(f"{base}/"), f"{base}/")
        assert {p: sorted(objs) for p, objs in left.items()} == {0: [0, 1, 2, 3], 1: [1, 2, 3]}
        assert len(client.objects(f"{base}/")) == 7 + 2  # and both watermarks


def test_an_unreachable_store_is_an_error_not_the_end_of_the_thread() -> None:
    sweeper = ObjectSweeper(f"http://127.0.0.1:{free_port()}", "none", "c", {"t": RetentionPolicy(retention_ms=1)},
                            interval_s=0.01, timeout_s=1.0)
    assert sweeper.start() is sweeper.start()  # idempotent: one thread
    thread = sweeper.thread
    assert thread is not None
    wait_for(lambda: sweeper.stats().sweeps >= 2, PATIENCE_S, "two sweeps of an unreachable store")
    assert thread.is_alive()
    sweeper.stop()
    sweeper.stop()
    assert not thread.is_alive()
    stats = sweeper.stats()
    assert stats.errors >= 2 and stats.objects_deleted == 0 and stats.last_sweep_errors >= 1
