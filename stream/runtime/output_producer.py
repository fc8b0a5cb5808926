"""The processor's outputs to Kafka: records appended to per-partition batches, handed to aiokafka in whole batches.

:meth:`OutputProducer.send` is a plain function: it appends the record to the open batch of its (topic, partition)
and returns that batch's future, which resolves with the batch's ``RecordMetadata`` once the broker acknowledged it
(``acks=all``) and fails if it was not. :meth:`OutputProducer.flush` hands every batch built so far to aiokafka's
sender (``AIOKafkaProducer.send_batch``) and returns without waiting for the acknowledgements: the commit protocol
(``commit.py``) waits for them before it acks the inputs. Faust's ``Topic.send`` costs a coroutine chain and the
producer start-up wrapper per record (``faust/topics.py``, ``Topic.publish_message``), and aiokafka's ``send`` a
coroutine, a metadata check and the partitioner per record (``aiokafka/producer/producer.py``); here a record costs
two dict lookups and one append to aiokafka's batch builder (``aiokafka/producer/message_accumulator.py``,
``BatchBuilder``). docs/benchmarks.md, "Output producer", has the figures.

Partitions: a keyed record goes where Kafka's default partitioner puts it (murmur2 of the key, the one rule in
:func:`flowtracer.schemas.topics.partition_for_key`), computed once per key (:class:`KeyPartitions`) from the
topic's partition count, asked of the producer's metadata once per topic; a record with an explicit partition goes
there (the attributions and group FIMs); a record with neither goes to one partition per topic until the next flush
(Kafka's sticky partitioner, KIP-480), so that keyless records (dead letters) fill one batch, not many.

Order: per partition, batches are handed over in the order they were started, one flush at a time, and aiokafka
keeps one request in flight per partition and re-queues a retried batch at the head (``Sender``,
``MessageAccumulator.reenqueue``), so records reach each partition in send order.

Which producer: our own ``AIOKafkaProducer``, built from the Faust app's producer settings
(:func:`producer_settings`: the same brokers, credentials, acks, batch and request sizes and request timeout that
Faust gives its own producer), not Faust's: Faust's aiokafka producer is a private attribute
(``faust.transport.drivers.aiokafka.Producer._producer``) that Faust replaces when its producer service restarts
(``on_start`` builds a new one), so sharing it needs a reach into Faust that can go stale, for one connection per
broker and one sender task less; per record both run the same aiokafka code. Our own starts and stops with the
worker that owns it. Idempotence stays off: Tansu, the embedded broker, lacks it (the guarantee is at-least-once,
and outputs are idempotent by key). A topic's partition count is asked once: adding partitions to an output topic
takes a worker restart to be used.

A broker that is gone: batches wait and are retried by aiokafka's sender as long as the request timeout (Faust's
``producer_request_timeout``, 20 minutes by default) and then fail, exactly as Faust's producer does; a hand-over
waits while the partition's previous batch is still queued (``MessageAccumulator.add_batch``), so :meth:`flush`
can block as long too. Nothing is dropped silently: every failure fails the future of the records it concerns.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.structs import RecordMetadata

from flowtracer.schemas.topics import partition_for_key

__all__ = ["BATCH_BYTES", "KeyPartitions", "OutputProducer", "producer_settings"]

MAX_KEYS = 1 << 18
"""Keys whose partition :class:`KeyPartitions` keeps (about 100 bytes each: 26 MB at most)."""

BATCH_BYTES = 256 * 1024
"""The producers' batch size (Faust's ``producer_max_batch_size``, bytes; Faust's and Kafka's default is 16 KiB). A
window's outputs are megabytes (about 12 MiB at 4,096 NICs): 16 KiB batches made some 1,300 batches a window, each a
future, a hand-over and its share of a request; 256 KiB batches cut the output path's CPU by a fifth
(docs/benchmarks.md, issue 30). A quarter of Kafka's default ``message.max.bytes`` (1 MiB), which a batch must fit."""

_RECORD_OVERHEAD = 100
"""Bytes a record adds to its key and value at most in a batch of its own (batch header 61, record fields 21,
length varints): a record whose key and value stay this far below ``max_request_size`` is not measured exactly."""

Future = asyncio.Future  # of RecordMetadata: the batch's (topic, partition, base offset, timestamp)


class KeyPartitions:
    """The partition of each record key per partition count, computed once (murmur2 is about 10 us a key in
    Python; a dict lookup 0.03 us).

    The keys are the outputs' entities: directed links, paths, ECMP groups, switches, NICs, jobs, and the flows of
    trace requests. All but the last two are bounded by the fabric; jobs and flows come and go over a long run, so
    the cache is emptied when it holds ``max_keys`` keys (and refilled by the keys still in use).
    """

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self.max_keys = max_keys
        self._by_count: dict[int, dict[bytes, int]] = {}
        self._size = 0

    def __call__(self, key: bytes, partitions: int) -> int:
        """Partition of ``key`` on a topic of ``partitions`` partitions."""
        cache = self.table(partitions)
        p = cache.get(key)
        if p is None:
            if self._size >= self.max_keys:
                for c in self._by_count.values():
                    c.clear()
                self._size = 0
            p = cache[key] = partition_for_key(key, partitions)
            self._size += 1
        return p

    def table(self, partitions: int) -> dict[bytes, int]:
        """The cached key -> partition of a topic of ``partitions`` partitions (read only: misses go through the
        call, which fills it); the same dict for good, emptied in place when the cache is."""
        cache = self._by_count.get(partitions)
        if cache is None:
            cache = self._by_count[partitions] = {}
        return cache

    def __len__(self) -> int:
        return self._size


def producer_settings(conf: Any) -> dict[str, Any]:
    """``AIOKafkaProducer`` keyword arguments from a Faust app's settings (``app.conf``): what Faust gives its own
    producer (``faust/transport/drivers/aiokafka.py``, ``Producer._settings_default`` and ``_settings_auth``, with
    its public ``server_list`` and ``credentials_to_aiokafka_auth``), without idempotence (Tansu lacks it)."""
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth, server_list

    return {
        "bootstrap_servers": server_list(conf.broker, 9092),  # Faust's aiokafka transport's default port
        "client_id": f"{conf.broker_client_id}-outputs",
        "acks": conf.producer_acks,  # -1: all in-sync replicas (Faust's default)
        "linger_ms": int(conf.producer_linger * 1000),
        "max_batch_size": conf.producer_max_batch_size,  # bytes
        "max_request_size": conf.producer_max_request_size,  # bytes
        "compression_type": conf.producer_compression_type,
        "request_timeout_ms": int(conf.producer_request_timeout * 1000),  # also how long a batch is retried
        "metadata_max_age_ms": conf.producer_metadata_max_age_ms,
        "connections_max_idle_ms": conf.producer_connections_max_idle_ms,
        "enable_idempotence": False,
        **credentials_to_aiokafka_auth(conf.broker_credentials, conf.ssl_context),
    }


def _new_future() -> Future[RecordMetadata]:
    return asyncio.get_running_loop().create_future()


@dataclass(slots=True, eq=False)
class _Batch:
    """One batch being built for one (topic, partition), and the future its records were given."""

    builder: BatchBuilder
    future: Future[RecordMetadata] = field(default_factory=_new_future)
    handed_over: bool = False


class OutputProducer:
    """Kafka outputs in batches per (topic, partition) over one ``AIOKafkaProducer`` of our own.

    Args:
        settings: ``AIOKafkaProducer`` keyword arguments (:func:`producer_settings` of the Faust app's settings,
            or plain ones in tests and benchmarks); its ``max_batch_size`` (bytes) bounds each batch and
            ``max_request_size`` (bytes) each record.
        partitions: the key -> partition cache (a fresh :class:`KeyPartitions` by default).
    """

    def __init__(self, settings: Mapping[str, Any], partitions: KeyPartitions | None = None) -> None:
        self.settings = dict(settings)
        self.max_request_size: int = self.settings.get("max_request_size", 1_048_576)  # aiokafka's default
        self.partitions = partitions or KeyPartitions()
        #: Batches handed over (one produce request carries up to one batch per partition of a broker).
        self.batches_sent = 0
        self._producer: AIOKafkaProducer | None = None
        self._counts: dict[str, int] = {}  # topic -> partition count
        # Records of topics whose partition count is asked at the next flush, in send order, each with its future.
        self._waiting: dict[str, list[tuple[bytes | None, bytes, int | None, Future[RecordMetadata]]]] = {}
        self._open: dict[tuple[str, int], _Batch] = {}
        self._full: list[tuple[tuple[str, int], _Batch]] = []  # closed for being full, in the order they filled
        self._sticky: dict[str, int] = {}  # topic -> partition of its keyless records until the next flush
        self._flushing = asyncio.Lock()

    @property
    def producer(self) -> AIOKafkaProducer:
        """The aiokafka producer (its ``client`` tells whether a broker is connected: ``faust_driver.connected``)."""
        if self._producer is None:
            raise RuntimeError("OutputProducer is not started")
        return self._producer

    async def start(self) -> None:
        """Connect (aiokafka's bootstrap: the brokers' metadata)."""
        if self._producer is None:
            producer = AIOKafkaProducer(**self.settings)
            await producer.start()
            self._producer = producer

    async def stop(self) -> None:
        """Hand over what is built, then wait for every batch's acknowledgement or failure (as long as the request
        timeout while the broker is gone, as Faust's producer does when it stops), and close."""
        if self._producer is not None:
            await self.flush()
            producer, self._producer = self._producer, None
            await producer.stop()

    def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> Future[RecordMetadata]:
        """Append a record to its (topic, partition)'s batch; the future resolves when the broker acknowledged the
        batch (with its metadata) and fails if it did not. ``partition`` None: Kafka's default partitioner's."""
        count = self._counts.get(topic)
        if count is None:
            count = self._known_count(topic)
        if count is None or topic in self._waiting:
            return self._wait_for_count(topic, key, value, partition)
        return self._append(topic, count, key, value, partition)

    def send_keyed(self, topic: str, records: Iterable[tuple[bytes, bytes]]) -> list[Future[RecordMetadata]]:
        """:meth:`send` of many keyed records ``(key, value)`` of one topic, in order, each to its key's partition;
        returns the futures of the batches they went to, each once (a batch's records share its future).

        A window's outputs are tens of thousands of records: per record this is a cache lookup and an append to the
        open batch; a new or full batch, or a record near ``max_request_size``, takes :meth:`send`'s path."""
        count = self._counts.get(topic)
        if count is None:
            count = self._known_count(topic)
        if count is None or topic in self._waiting:
            return list(dict.fromkeys(self._wait_for_count(topic, k, v, None) for k, v in records))
        partition_of, cached = self.partitions, self.partitions.table(count)
        open_batches, append = self._open, self._append
        small = self.max_request_size - _RECORD_OVERHEAD  # key + value bytes that fit a request without measuring
        futures: dict[Future[RecordMetadata], None] = {}
        for key, value in records:
            p = cached.get(key)
            if p is None:
                p = partition_of(key, count)
            batch = open_batches.get((topic, p))
            if batch is None or len(key) + len(value) > small or \
                    batch.builder.append(timestamp=None, key=key, value=value) is None:
                futures[append(topic, count, key, value, p)] = None  # (a full batch refused it: _append rotates)
            else:
                futures[batch.future] = None
        return list(futures)

    async def flush(self) -> None:
        """Hand every batch built so far to aiokafka's sender, in order per partition; does not wait for the
        acknowledgements. A hand-over that fails fails the futures of that partition's batches."""
        async with self._flushing:  # one flush at a time: a partition's batches leave in the order they were built
            await self._place_waiting()
            queues: dict[tuple[str, int], list[_Batch]] = {}
            for tp, batch in self._full:
                queues.setdefault(tp, []).append(batch)
            for tp, batch in self._open.items():
                queues.setdefault(tp, []).append(batch)
            self._full, self._open, self._sticky = [], {}, {}
            # Round k hands over every partition's k-th batch: a partition's next batch waits until aiokafka's sender
            # has taken its previous one (add_batch), and the sender takes the waiting batches of all partitions of
            # a broker into its next request, so the rounds overlap with the requests.
            failed: dict[tuple[str, int], BaseException] = {}
            try:
                for k in range(max((len(q) for q in queues.values()), default=0)):
                    for tp, queue in queues.items():
                        if k < len(queue):
                            await self._hand_over(tp, queue[k], failed)
            except BaseException as e:  # cancelled: what was not handed over must not wait for ever
                for queue in queues.values():
                    for batch in queue:
                        if not batch.handed_over:
                            _fail(batch.future, KafkaError(f"flush interrupted before the hand-over: {e!r}"))
                raise

    # -- placing records ---------------------------------------------------------------------------------------

    def _append(self, topic: str, count: int, key: bytes | None, value: bytes,
                partition: int | None) -> Future[RecordMetadata]:
        if partition is None:
            partition = self.partitions(key, count) if key is not None else self._sticky_partition(topic, count)
        elif not 0 <= partition < count:
            return _failed(ValueError(f"partition {partition} of topic {topic}: it has {count} partitions"))
        size = len(value) + (len(key) if key is not None else 0)
        if size + _RECORD_OVERHEAD > self.max_request_size:
            size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, [])
            if size > self.max_request_size:
                return _failed(MessageSizeTooLargeError(
                    f"record of {size} bytes for topic {topic} is over max_request_size {self.max_request_size}"))
        tp = (topic, partition)
        batch = self._open.get(tp)
        if batch is None:
            batch = self._open[tp] = _Batch(self.producer.create_batch())
        if batch.builder.append(timestamp=None, key=key, value=value) is None:  # full: the next flush sends it
            self._full.append((tp, batch))
            batch = self._open[tp] = _Batch(self.producer.create_batch())
            batch.builder.append(timestamp=None, key=key, value=value)  # a new batch takes any first record
        return batch.future

    def _sticky_partition(self, topic: str, count: int) -> int:
        p = self._sticky.get(topic)
        if p is None:
            p = self._sticky[topic] = random.randrange(count)
        return p

    def _known_count(self, topic: str) -> int | None:
        """The topic's partition count if the producer's metadata has it (aiokafka's bootstrap asks for every
        topic's), kept for good."""
        known = self.producer.client.cluster.partitions_for_topic(topic)
        if not known:
            return None
        count = self._counts[topic] = len(known)
        return count

    def _wait_for_count(self, topic: str, key: bytes | None, value: bytes,
                        partition: int | None) -> Future[RecordMetadata]:
        """Hold a record until the next flush has asked the topic's partition count (behind any held before); it
        gets a future of its own, tied to its batch's once placed (once per topic: the cost does not matter)."""
        fut = _new_future()
        self._waiting.setdefault(topic, []).append((key, value, partition, fut))
        return fut

    async def _place_waiting(self) -> None:
        """Ask the partition count of each topic with held records, then place them in their batches."""
        for topic in list(self._waiting):
            try:
                count = len(await self.producer.partitions_for(topic))
                if not count:  # Tansu creates a topic of 0 partitions when asked to
                    raise KafkaError(f"topic {topic} has no partitions")
            except KafkaError as e:  # an unknown topic (Apache Kafka without auto-creation) after the request timeout
                for *_, fut in self._waiting.pop(topic):
                    _fail(fut, e)
                continue
            self._counts[topic] = count
            for key, value, partition, fut in self._waiting.pop(topic):  # with those sent while the count was asked
                self._append(topic, count, key, value, partition).add_done_callback(
                    lambda f, ours=fut: _copy_outcome(f, ours))

    # -- handing over ------------------------------------------------------------------------------------------

    async def _hand_over(self, tp: tuple[str, int], batch: _Batch, failed: dict[tuple[str, int], BaseException]
                         ) -> None:
        """Give one batch to aiokafka's sender and tie its acknowledgement to the batch's future; after a failed
        hand-over the partition's later batches fail too (sending them would reorder the partition)."""
        if tp in failed:
            _fail(batch.future, failed[tp])
            return
        batch.builder.close()  # nothing more goes in: aiokafka's own send() must not append to it either
        try:
            acked = await self.producer.send_batch(batch.builder, tp[0], partition=tp[1])
        except Exception as e:  # closed, timed out waiting for the previous batch, topic or partition unknown
            failed[tp] = e
            _fail(batch.future, e)
            return
        batch.handed_over = True
        self.batches_sent += 1
        acked.add_done_callback(lambda f, ours=batch.future: _copy_outcome(f, ours))


def _failed(exc: BaseException) -> Future[RecordMetadata]:
    fut: Future[RecordMetadata] = asyncio.get_running_loop().create_future()
    fut.set_exception(exc)
    return fut


def _fail(fut: Future[RecordMetadata], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


def _copy_outcome(source: Future[RecordMetadata], target: Future[RecordMetadata]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.set_exception(KafkaError("the batch's delivery was cancelled"))
    elif (exc := source.exception()) is not None:
        target.set_exception(exc)
    else:
        target.set_result(source.result())

