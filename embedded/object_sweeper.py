"""Retention and compaction for the embedded broker's records: a thread that deletes expired batch objects.

Tansu's ``s3`` engine (``TansuBroker(object_store=...)``) keeps each produced record batch as one object,
``clusters/<cluster id>/topics/<topic>/partitions/<10-digit partition>/records/<20-digit base offset>.batch``, and
never deletes one. Every ``interval_s`` :class:`ObjectSweeper` lists the batch objects of each topic it has a
policy for, asks the rule (``log_retention.removable``) which may go, and deletes them. Tansu reads around the
gaps as Kafka does after retention or compaction: its fetch lists the objects from the requested offset on, and
ListOffsets(earliest) answers the base offset of the oldest object left (tests/embedded/test_object_sweeper.py).
Nothing else in the bucket is deleted (``watermark.json``, the groups' offsets); the cluster's ``meta.json`` is
read for the names of the topics without a policy, which are left alone and named once in the log.

Compaction needs the keys of every batch of a partition: each object is read once (objects never change) and its
keys kept until the object is gone from a listing, so the sweeper's memory follows what the store keeps. On
doubt nothing is deleted: a listing that fails skips its topic, an object that cannot be read or parsed stops
compaction of its partition for that sweep, a failed delete stops that partition's sweep (a later batch may go
only because an earlier one did). Errors are counted and logged at most once per ``ERROR_LOG_INTERVAL_S``; none
ends the thread.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Self

from kafka.record.default_records import DefaultRecordBatch

from flowtracer.embedded.bucket_client import (
    LAST_MODIFIED_RESOLUTION_S,
    BucketClient,
    BucketError,
    ObjectInfo,
)
from flowtracer.embedded.log_retention import KeyedRecord, RetentionPolicy, StoredBatch, removable

log = logging.getLogger(__name__)

ERROR_LOG_INTERVAL_S = 30.0
"""At most one error line per this many seconds (the first at once); the rest are counted."""
BATCH_NAME = re.compile(r"partitions/(\d{10})/records/(\d{20})\.batch")
"""The end of a batch object's key after ``topics/<topic>/``: partition and base offset."""


@dataclass(frozen=True)
class SweepStats:
    """What the sweeper has done; deleted counts and errors since it was made, kept counts as of the last sweep."""

    sweeps: int = 0
    """Sweeps completed."""
    objects_deleted: int = 0
    bytes_deleted: int = 0
    objects_kept: int = 0
    """Batch objects of the swept topics left after the last sweep."""
    bytes_kept: int = 0
    last_sweep_s: float = 0.0
    """How long the last sweep took, s."""
    last_sweep_at_s: float | None = None
    """The time the last completed sweep judged ages against, Unix s (taken before it listed anything)."""
    errors: int = 0
    last_sweep_errors: int = 0
    """Errors in the last completed sweep: 0 means it listed, read and deleted everything it meant to."""
    cached_batches: int = 0
    """Batch objects whose keys are held in memory (compacted topics only)."""


def batch_records(data: bytes) -> tuple[KeyedRecord, ...]:
    """The keys of a Kafka v2 record batch (an object's content), each marked tombstone or not.

    Raises ValueError when the bytes are not a whole v2 batch with a good CRC. A control batch (transaction
    markers) reads as records without a key, which compaction keeps.
    """
    if len(data) < 61 or data[16] != 2:  # 61 bytes: the v2 header; byte 16: the magic
        raise ValueError(f"not a v2 record batch ({len(data)} bytes)")
    if int.from_bytes(data[8:12], "big") + 12 != len(data):  # batch length: what follows it
        raise ValueError(f"batch length {int.from_bytes(data[8:12], 'big')} does not match {len(data)} bytes")
    batch = DefaultRecordBatch(data)
    if not batch.validate_crc():
        raise ValueError("CRC mismatch")
    if batch.is_control_batch:
        return tuple(KeyedRecord(None, False) for _ in batch)
    return tuple(KeyedRecord(r.key, r.value is None) for r in batch)


class ObjectSweeper:
    """Deletes the batch objects that each topic's :class:`RetentionPolicy` lets go, every ``interval_s`` s.

    Args:
        endpoint: the store, ``http://host:port`` (``ObjectStore.endpoint``).
        bucket: the broker's bucket (``ObjectStore.bucket``).
        cluster_id: the broker's cluster id (``TansuBroker.cluster_id``): its objects are under ``clusters/<id>/``.
        policies: topic name -> policy (``log_retention.policies_from_plan``); other topics are left alone.
        interval_s: seconds from the end of one sweep to the start of the next.
        timeout_s: seconds each request to the store may take.
        clock: Unix time, s (the store's LastModified is compared with it: the store must share the clock).

    :meth:`start` and :meth:`stop` are idempotent; :meth:`sweep` runs one sweep in the caller's thread.
    """

    def __init__(self, endpoint: str, bucket: str, cluster_id: str, policies: Mapping[str, RetentionPolicy],
                 interval_s: float = 5.0, timeout_s: float = 5.0, clock: Callable[[], float] = time.time) -> None:
        self.client = BucketClient(endpoint, bucket, timeout_s)
        self.root = f"clusters/{cluster_id}/topics/"
        self.meta_key = f"clusters/{cluster_id}/meta.json"
        self.policies = dict(policies)
        self.interval_s = interval_s
        self.clock = clock
        self.records: dict[str, tuple[KeyedRecord, ...]] = {}  # object key -> its records (objects never change)
        self.unmanaged: set[str] = set()  # topics without a policy, named once
        self.totals = SweepStats()
        self.lock = threading.Lock()  # guards totals
        self.sweeping = threading.Lock()  # one sweep at a time (the thread's and a caller's)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.error_logged_s = -ERROR_LOG_INTERVAL_S  # time.monotonic() of the last error line
        self.errors_unlogged = 0

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def start(self) -> Self:
        """Sweep now and then every ``interval_s`` in a daemon thread; returns ``self``."""
        if self.thread is None:
            self.stopping.clear()
            self.thread = threading.Thread(target=self.run, name="object-sweeper", daemon=True)
            self.thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it (a sweep under way ends after the topic it is at). Safe to call twice."""
        thread, self.thread = self.thread, None
        if thread is not None:
            self.stopping.set()
            thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def run(self) -> None:
        """The thread: sweep, wait ``interval_s`` (or until stopped), again."""
        while not self.stopping.is_set():
            try:
                self.sweep(self.stopping)
            except Exception as e:  # the last resort: a sweeper that dies frees nothing ever again
                self.error(f"sweep failed: {e!r}")
            self.stopping.wait(self.interval_s)

    def stats(self) -> SweepStats:
        """A snapshot of the counters."""
        with self.lock:
            return self.totals

    # -- one sweep -------------------------------------------------------------------------------------------------

    def sweep(self, abort: threading.Event | None = None) -> None:
        """List, judge and delete once over every topic with a policy; ``abort`` set ends it before the next topic."""
        with self.sweeping:
            started = time.monotonic()
            now_s = self.clock()
            errors_before = self.stats().errors
            self.name_unmanaged()
            kept: list[ObjectInfo] = []
            listed: set[str] = set()
            failed: list[str] = []  # prefixes of topics not listed: their cached keys stay
            for topic, policy in self.policies.items():
                if abort is not None and abort.is_set():
                    return  # stop() is waiting: the rest of this sweep is dropped, counters untouched
                prefix = f"{self.root}{topic}/partitions/"
                try:
                    objects = self.client.objects(prefix)
                except BucketError as e:
                    self.error(f"cannot list topic {topic}: {e}")
                    failed.append(prefix)
                    continue
                for partition in by_partition(objects, prefix).values():
                    listed.update(o.key for o in partition.values())
                    kept += self.sweep_partition(partition, policy, now_s).values()
            # Objects that left the listings (deleted by us, or with their topic) leave the cache.
            self.records = {k: v for k, v in self.records.items()
                            if k in listed or k.startswith(tuple(failed))}
            with self.lock:
                self.totals = replace(
                    self.totals, sweeps=self.totals.sweeps + 1, objects_kept=len(kept),
                    bytes_kept=sum(o.size for o in kept), last_sweep_s=time.monotonic() - started,
                    last_sweep_at_s=now_s, last_sweep_errors=self.totals.errors - errors_before,
                    cached_batches=len(self.records))

    def sweep_partition(self, objects: dict[int, ObjectInfo], policy: RetentionPolicy,
                        now_s: float) -> dict[int, ObjectInfo]:
        """Delete what ``policy`` lets go of one partition's ``objects`` (base offset -> object); return the rest."""
        batches = [StoredBatch(offset, o.last_modified_s + LAST_MODIFIED_RESOLUTION_S,
                               self.batch_keys(o) if policy.compact else None)
                   for offset, o in objects.items()]
        left = dict(objects)
        for offset in removable(batches, policy, now_s):
            o = left[offset]
            try:
                self.client.delete(o.key)
            except BucketError as e:
                # Oldest first, and a later batch may be removable only because this one is gone (a tombstone
                # that this batch's old value made necessary): stop here.
                self.error(f"cannot delete {o.key}: {e}")
                break
            del left[offset]
            self.records.pop(o.key, None)
            with self.lock:
                self.totals = replace(self.totals, objects_deleted=self.totals.objects_deleted + 1,
                                      bytes_deleted=self.totals.bytes_deleted + o.size)
        return left

    def name_unmanaged(self) -> None:
        """Log, once each, the broker's topics that have no policy (Tansu lists its topics in the cluster's
        ``meta.json``, which is only read)."""
        try:
            topics = json.loads(self.client.get(self.meta_key))["topics"]
        except BucketError as e:
            if "HTTP 404" not in str(e):  # no topic created yet
                self.error(f"cannot read the broker's topics: {e}")
            return
        except (ValueError, KeyError, TypeError) as e:
            self.error(f"unreadable {self.meta_key}: {e!r}")
            return
        for topic in sorted(set(topics) - set(self.policies) - self.unmanaged):
            self.unmanaged.add(topic)
            log.info("object sweeper: topic %s has no retention policy; its batch objects are kept", topic)

    def batch_keys(self, o: ObjectInfo) -> tuple[KeyedRecord, ...] | None:
        """The records of object ``o``, read once and cached; None when it cannot be read or parsed now.

        Failures are not cached, the object is read again at the next sweep: a failure may pass (s3rver, the store
        tried first, listed an object before its content was all written).
        """
        if o.key in self.records:
            return self.records[o.key]
        try:
            records = batch_records(self.client.get(o.key))
        except BucketError as e:
            self.error(f"cannot read {o.key}: {e}; its partition is not compacted this time")
            return None
        except Exception as e:  # whatever the parser raises on bad bytes
            self.error(f"unreadable batch object {o.key} ({o.size} bytes): {e!r}; its partition is not "
                       "compacted this time")
            return None
        self.records[o.key] = records
        return records

    def error(self, message: str) -> None:
        """Count an error; log it unless another was logged less than ``ERROR_LOG_INTERVAL_S`` ago."""
        with self.lock:
            self.totals = replace(self.totals, errors=self.totals.errors + 1)
        now = time.monotonic()
        if now - self.error_logged_s < ERROR_LOG_INTERVAL_S:
            self.errors_unlogged += 1
            return
        more = f" ({self.errors_unlogged} more errors since the last line)" if self.errors_unlogged else ""
        log.warning("object sweeper: %s%s", message, more)
        self.error_logged_s, self.errors_unlogged = now, 0


def by_partition(objects: list[ObjectInfo], prefix: str) -> dict[int, dict[int, ObjectInfo]]:
    """partition -> base offset -> batch object, of a topic's listing under ``prefix`` (other objects left out)."""
    out: dict[int, dict[int, ObjectInfo]] = defaultdict(dict)
    for o in objects:
        m = BATCH_NAME.fullmatch(o.key, len(prefix) - len("partitions/"))
        if m:
            out[int(m[1])][int(m[2])] = o
    return out
