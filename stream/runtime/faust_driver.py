"""The Faust transport the processor's workers consume with: Faust's aiokafka driver and what flowtracer changes in it.

Over 400 lines because it is one thing: every change flowtracer makes to Faust's consumer, in one place.

Faust picks a consumer's transport by the scheme of its broker URLs (``App._new_transport``, faust/app/base.py:
``transport.by_url(conf.broker_consumer[0])``) from ``faust.transport.drivers.TRANSPORTS``, which also lists every
``faust.transports`` setuptools entry point (faust/transport/drivers/__init__.py). pyproject.toml registers
:class:`Transport` there as ``flowtracer-kafka``; :func:`consumer_brokers` gives the URLs that pick it (producers
stay on Faust's ``kafka://``) and :func:`configure` hands it a worker's :class:`DriverOptions`. Every change is a
subclass method of Faust's aiokafka driver (faust/transport/drivers/aiokafka.py, faust-streaming 0.15):

- **Fetch wait** (``ConsumerThread._create_worker_consumer``): Faust gives its worker consumer a fixed 1.5 s; the
  options set it (``ProcessorConfig.fetch_wait_ms`` says why it matters on Tansu).
- **Seek to committed** (``ConsumerThread.seek_to_committed``): aiokafka's ``seek_to_committed`` skips partitions
  whose committed offset is missing or 0, so a worker taking over a partition nothing was acked in yet skipped the
  records Faust had dropped while the partition was not active (a rebalance or recovery in progress). With
  ``consumer_auto_offset_reset="earliest"`` "no commit" means "from the beginning", so such stream partitions are
  sought there; the records read twice are at-least-once redeliveries, which the stages absorb. Where each stream
  partition was positioned goes to ``DriverOptions.on_positioned`` (read_positions.py needs it on a backlog).
- **Records fetched before a seek** (``Consumer._drain_messages``, :class:`SeekEpochs`): Faust's reader hands the
  records its consumer thread fetched to the streams on the event loop, and a seek to the committed offsets (after a
  rebalance) can come in between. aiokafka discards what it still buffers for a sought partition (``Fetcher.seek_to``,
  ``FetchResult.check_assignment``, aiokafka/consumer/fetcher.py), not what it already returned. A batch fetched
  before the seek but handed over after it was taken as the next
  records: its first offset, above the committed one, made a "gap" up to it that Faust counts as acked, and the
  records of the gap, fetched again from the sought offset, were then dropped as older than the newest delivered
  (a survivor of the failover test sought counters[0] to offset 30 and got 53 first; docs/benchmarks.md, Failover).
  Dropping records below the committed offset does not catch it (53 is above it): every seek gives its partitions a
  new epoch, each fetch is stamped with its partitions' epochs, and a record whose stamp is not its partition's
  latest is dropped before its offset is compared with anything: no gap, no ack; the consumer fetches it again from
  the sought offset. A short fetch wait made such a batch likely (the failover test, tests/e2e/
  test_processor_scaleout.py, lost or changed outputs in 3 of 4 runs at 100 ms before).
- **No task per record** (``Consumer._drain_messages``, :func:`deliver`): Faust's reader hands each record over
  under mode's ``wait_first`` (the delivery raced against the flow's suspension: four tasks, an ``asyncio.wait`` and
  a turn of the event loop per record), so an agent woke for every record and the worker's batches
  (stream_batches.py) held one record each. The delivery (the conductor's ``on_message``: flow control, producer
  buffer, decode, ``put`` into the stream's queue) now runs directly for its first step; almost always it completes
  there, without a task or a turn of the loop. When it would wait (a full stream buffer, flow control suspended by a
  rebalance) the rest runs under ``wait_first`` exactly as Faust runs it (:func:`resume`), so a rebalance still
  abandons a stuck delivery; while the flow is suspended Faust's own path is taken from the start. The reader still
  lets other tasks run every ``YIELD_EVERY`` records.
- **Changelog ends on Tansu** (``ConsumerThread._highwaters``, with ``check_changelog_ends``): table recovery reads
  each changelog partition to the end offset ListOffsets(latest) gives, and Tansu answers that with the base offset
  of the partition's last record batch plus one. The high watermark of a fetch is right on Tansu, so the listed end
  is checked by a fetch from just before it (:func:`fetched_ends`): the end is the larger of the two. On Apache
  Kafka they agree, and the check costs one fetch per recovery.
- **Broker connected** (``Consumer.broker_connected``): whether the worker's Kafka client holds a broker
  connection (the window clock stands still while it holds none, stall_clock.py).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import aiokafka
import faust
from faust.transport.consumer import CONSUMER_FETCHING, RecordMap
from faust.transport.drivers import TRANSPORTS
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from mode import Service, ServiceT
from yarl import URL

log = logging.getLogger(__name__)

SCHEME = "flowtracer-kafka"
"""The broker URL scheme of :class:`Transport` (the ``faust.transports`` entry point in pyproject.toml)."""
CHECK_FETCH_TIMEOUT_MS = 2_000
"""How long the fetch that checks changelog ends may wait for the broker's answer, ms."""
YIELD_EVERY = 100
"""Records the reader hands over before it lets other tasks run (as Faust's does)."""

Positioned = Callable[[dict[tuple[str, int], int]], None]
"""Told {(topic, partition): offset}, the next offset the worker reads in each stream partition, after a seek."""


@dataclass(frozen=True)
class DriverOptions:
    """What a worker's consumer does differently from Faust's (module docstring)."""

    #: How long the broker may hold a fetch that finds no records, ms (aiokafka's ``fetch_max_wait_ms``); None:
    #: Faust's (1,500 ms, a literal in ``_create_worker_consumer``).
    fetch_wait_ms: int | None = None
    #: Check changelog end offsets by a fetch during table recovery (the broker is Tansu).
    check_changelog_ends: bool = False
    #: Called on the event loop after each seek to the committed offsets.
    on_positioned: Positioned | None = None


def consumer_brokers(brokers: Iterable[str]) -> list[str]:
    """Faust's ``broker_consumer`` setting for these ``kafka://`` broker URLs: the same servers, picking
    :class:`Transport`. Raises RuntimeError when Faust cannot find it (flowtracer installed without its entry
    points: reinstall it)."""
    try:
        TRANSPORTS.get_alias(SCHEME)
    except KeyError:
        raise RuntimeError(f"Faust has no transport {SCHEME!r}: the 'faust.transports' entry point of flowtracer is "
                           "not installed (reinstall flowtracer: make setup)") from None
    return [str(URL(b).with_scheme(SCHEME)) for b in brokers]


def configure(app: faust.App, options: DriverOptions) -> None:
    """Give ``app``'s consumer transport these options (before the app starts). Raises RuntimeError when the app
    does not consume with :class:`Transport` (its ``broker_consumer`` is not from :func:`consumer_brokers`)."""
    transport = app.transport
    if not isinstance(transport, Transport):
        raise RuntimeError(f"the app consumes with {type(transport).__module__}.{type(transport).__name__}, not "
                           f"flowtracer's transport: set broker_consumer to consumer_brokers(...)")
    transport.options = options


def broker_connected(app: faust.App) -> bool | None:
    """Whether ``app``'s consumer holds a broker connection; None when it cannot be told (module docstring)."""
    consumer = app.consumer
    return consumer.broker_connected() if isinstance(consumer, Consumer) else None


def connected(client: Any) -> bool | None:
    """Whether an aiokafka client holds at least one open broker connection; None when it cannot be told (no
    client yet, or its connection table changed while read: the consumer runs in a thread of its own)."""
    conns = getattr(client, "_conns", None)
    if conns is None:
        return None
    try:
        return any(c.connected() for c in list(conns.values()))
    except RuntimeError:
        return None


async def fetched_ends(consumer: aiokafka.AIOKafkaConsumer, listed: Mapping[Any, int | None]
                       ) -> dict[Any, int | None]:
    """The end offset of each partition: the larger of the listed one and the high watermark of a fetch made
    from one before the listed end (``consumer``: a started aiokafka consumer outside any group)."""
    tps = [tp for tp, end in listed.items() if end is not None]
    if not tps:
        return dict(listed)
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, max(0, int(listed[tp] or 0) - 1))
    await consumer.getmany(*tps, timeout_ms=CHECK_FETCH_TIMEOUT_MS)
    out = dict(listed)
    for tp in tps:
        hw = consumer.highwater(tp)
        if hw is not None and hw > int(listed[tp] or 0):
            out[tp] = hw
    return out


async def _beginning_offsets(consumer: aiokafka.AIOKafkaConsumer, tps: list[TP]) -> dict[TP, int]:
    """The first retained offset of each partition; {} when the broker cannot tell (logged)."""
    if not tps:
        return {}
    try:
        return cast(dict[TP, int], await consumer.beginning_offsets(tps))
    except Exception as exc:
        log.warning("beginning offsets of %d partitions not known (%s): their lag is not followed", len(tps), exc)
        return {}


class SeekEpochs:
    """Which seek each partition's consumer position comes from, to tell records fetched before a partition's
    latest seek from those fetched after it. Seeks and fetches happen in the consumer's thread (and Faust's
    ``Consumer.seek`` on the event loop), the check on the event loop: one counter (``next`` on ``itertools.count``
    is atomic under the GIL) and single dict stores keep it consistent across the two."""

    def __init__(self) -> None:
        self._next = itertools.count(1)
        self._epoch: dict[Any, int] = {}

    def moved(self, tps: Iterable[Any]) -> None:
        """These partitions are being sought: call in the same step as the seek (no ``await`` between), so that
        no fetch falls in between."""
        epoch = next(self._next)
        for tp in tps:
            self._epoch[tp] = epoch

    def stamp(self, tps: Iterable[Any]) -> dict[Any, int]:
        """The current epochs of these partitions: stamp a fetch with them in the step it was drained in."""
        return {tp: self._epoch.get(tp, 0) for tp in tps}

    def current(self, tp: Any, stamp: Mapping[Any, int]) -> bool:
        """Whether records of ``tp`` from a fetch stamped ``stamp`` come from its latest seek."""
        return self._epoch.get(tp, 0) == stamp.get(tp, 0)


class Fetched(dict[TP, list[Any]]):
    """One fetch's records per partition (what Faust's ``getmany`` returns) and the seek epochs it was made at."""

    def __init__(self, records: RecordMap, stamp: Mapping[Any, int]) -> None:
        super().__init__(records)
        self.stamp = stamp


class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's aiokafka consumer thread with the fetch wait, the seek and the changelog ends of the options, and
    the seek epochs of its partitions."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.epochs = SeekEpochs()

    @property
    def options(self) -> DriverOptions:
        return cast(Transport, self.transport).options

    def _create_worker_consumer(self, transport: faust_aiokafka.Transport) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # Faust passes fetch_max_wait_ms=1500 as a literal; aiokafka reads the attribute when start() builds its
        # Fetcher (AIOKafkaConsumer.start, aiokafka/consumer/consumer.py), so it is set before that.
        if self.options.fetch_wait_ms is not None:
            consumer._fetch_max_wait_ms = self.options.fetch_wait_ms
        return consumer

    async def seek_to_committed(self) -> Mapping[TP, int]:
        """Seek every assigned partition to its committed offset, stream partitions without one to their
        beginning (module docstring); returns the committed offsets (None: none), as aiokafka's does."""
        committed, positions = await self.call_thread(self._seek_committed)
        if self.options.on_positioned is not None:
            self.options.on_positioned(positions)
        return committed

    async def _seek_committed(self) -> tuple[dict[TP, int | None], dict[tuple[str, int], int]]:
        """In the consumer's thread: seek, and return the committed offsets and where each stream partition now is.
        What is asked of the broker comes first, then the seeks and the return in one step, so that the event loop
        takes the new positions (Faust's read offsets, ``perform_seek``) before any record fetched from them."""
        consumer = self._ensure_consumer()
        changelogs = self.app.tables.changelog_topics  # never committed: Faust's recovery positions those itself
        # One request per partition, as aiokafka's seek_to_committed makes.
        committed = {tp: await consumer.committed(tp) for tp in consumer.assignment()}
        # Offset 0 counts as none, as in aiokafka's seek_to_committed: both mean "from the beginning".
        uncommitted = [tp for tp, offset in committed.items() if not offset and tp.topic not in changelogs]
        beginning = await _beginning_offsets(consumer, uncommitted)
        assigned = consumer.assignment()  # a rebalance may have begun meanwhile
        committed = {tp: offset for tp, offset in committed.items() if tp in assigned}
        # Offset 0 where the beginning is not known: out of range, the consumer resets it to the earliest
        # (consumer_auto_offset_reset, "earliest" in the processor).
        sought = {tp: offset or beginning.get(tp, 0) for tp, offset in committed.items()
                  if offset or tp in uncommitted}
        self.epochs.moved(sought)
        for tp, offset in sought.items():
            consumer.seek(tp, offset)
        positions = {(tp.topic, tp.partition): offset for tp, offset in sought.items()
                     if tp.topic not in changelogs and (committed[tp] or tp in beginning)}
        return cast(dict[TP, "int | None"], committed), positions

    def seek(self, partition: TP, offset: int) -> None:
        self.epochs.moved([partition])
        super().seek(partition, offset)

    async def seek_to_beginning(self, *partitions: Any) -> None:
        await self.call_thread(self._seek_to_beginning, *partitions)

    async def _seek_to_beginning(self, *partitions: Any) -> None:
        self.epochs.moved(partitions)
        await self._ensure_consumer().seek_to_beginning(*partitions)  # resets them before its first await

    async def _seek_wait(self, consumer: aiokafka.AIOKafkaConsumer, partitions: Mapping[TP, int]) -> None:
        self.epochs.moved(partitions)
        await super()._seek_wait(consumer, partitions)  # seeks them all before its first await

    async def _fetch_records(self, consumer: aiokafka.AIOKafkaConsumer, active_partitions: set[TP],
                             timeout: float | None = None, max_records: int | None = None) -> Fetched:
        records = await super()._fetch_records(consumer, active_partitions, timeout=timeout, max_records=max_records)
        return Fetched(records, self.epochs.stamp(records))  # the step aiokafka drained them in

    async def _highwaters(self, partitions: list[TP]) -> Mapping[TP, int]:
        listed = dict(await super()._highwaters(partitions))
        if not self.options.check_changelog_ends or self.consumer.in_transaction:
            return listed
        checker = self._create_client_consumer(cast(faust_aiokafka.Transport, self.transport))
        try:
            await checker.start()
            ends = await fetched_ends(checker, listed)
        except Exception as exc:
            log.warning("changelog end offsets not checked by a fetch (%s): using the listed ones", exc)
            return listed
        finally:
            await checker.stop()
        changed = {f"{tp.topic}[{tp.partition}]": (listed[tp], ends[tp]) for tp in ends if ends[tp] != listed[tp]}
        log.info("changelog end offsets of %d partitions checked by a fetch; corrected (listed, fetched): %s",
                 len(ends), changed or "none")
        return cast(Mapping[TP, int], ends)

    def broker_connected(self) -> bool | None:
        """Whether the thread's aiokafka client holds a broker connection (None: cannot be told)."""
        return connected(getattr(self._consumer, "_client", None))


class Yield:
    """Awaiting it yields ``item`` to the task running the awaiting coroutine, as the coroutine it stands for would."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self.item)


async def resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    """Finish a coroutine that already took its first step and yielded ``yielded`` (the future it waits for), as an
    asyncio Task would: what the task sends back is sent on, what it throws in (a cancellation, which also cancels
    the future waited for) is thrown on."""
    while True:
        try:
            sent = await Yield(yielded)
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value


async def deliver(consumer: Any, delivery: Coroutine[Any, Any, Any]) -> None:
    """Run one record's delivery; under ``wait_first`` with the flow-suspension event only if it has to wait (the
    module docstring, "No task per record")."""
    suspend = consumer.suspend_flow
    if suspend.is_set():
        await consumer.wait_first(delivery, suspend.wait())
        return
    try:
        yielded = delivery.send(None)
    except StopIteration:
        return
    await consumer.wait_first(resume(delivery, yielded), suspend.wait())


class Consumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer, running :class:`ConsumerThread`, whose reader drops records fetched before their
    partition's latest seek."""

    _thread: ConsumerThread
    #: The seek epochs of the fetch the reader is handing over.
    _stamp: Mapping[Any, int] = {}

    def _new_consumer_thread(self) -> ConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def _getmany(self, active_partitions: set[TP] | None, timeout: float) -> RecordMap:
        fetched = await self._thread.getmany(active_partitions, timeout)
        self._stamp = getattr(fetched, "stamp", {})
        return fetched

    async def _drain_messages(self, fetcher: ServiceT) -> None:
        """Faust's reader (``Consumer._drain_messages``, faust/transport/consumer.py) with the seek epochs: hand
        each fetched record to the streams (``self.callback``), in offset order per partition, skipping those at or
        below the partition's read offset and counting a jump past it as acked (a gap: transaction markers,
        compacted records); but first drop a record fetched before its partition's latest seek (module docstring).
        A seek while a record is being handed over has set the read offset itself: the record does not."""
        epochs = self._thread.epochs
        read_offset = self._read_offset
        acks_enabled_for = self.app.topics.acks_enabled_for
        consumer_stopped = cast(Service, self)._stopped.is_set
        fetcher_stopped = cast(Service, fetcher)._stopped.is_set
        since_yield = 0
        try:
            while not (consumer_stopped() or fetcher_stopped()):
                self.diag.set_flag(CONSUMER_FETCHING)
                records = self.getmany(timeout=1.0)
                await self.sleep(0)  # getmany can return at once, again and again
                if self.should_stop:
                    continue
                before_seek: Counter[TP] = Counter()
                async for tp, message in records:
                    since_yield += 1
                    if since_yield > YIELD_EVERY:
                        await asyncio.sleep(0)
                        since_yield = 0
                    stamp = self._stamp  # the epochs of this fetch (set by _getmany, inside getmany)
                    if not epochs.current(tp, stamp):  # after the last await before the offsets are compared
                        before_seek[tp] += 1
                        continue
                    offset = message.offset
                    r_offset = read_offset[tp]
                    if r_offset is not None and offset < r_offset:
                        self.log.dev("DROPPED MESSAGE ROFF %r: k=%r v=%r", offset, message.key, message.value)
                        continue
                    if r_offset and offset - r_offset > 1 and acks_enabled_for(message.topic):
                        await self._add_gap(tp, r_offset + 1, offset)
                    if self._commit_every is not None and self._n_acked >= self._commit_every:
                        self._n_acked = 0
                        await self.commit()
                    await deliver(self, self.callback(message))
                    if epochs.current(tp, stamp):
                        read_offset[tp] = offset
                for tp, n in before_seek.items():
                    log.info("dropped %d records of %s[%d] fetched before its latest seek: they are fetched again "
                             "from the sought offset", n, tp.topic, tp.partition)
                self.diag.unset_flag(CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                self.log.info("Broker stopped consumer, shutting down...")
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                self.log.info("Consumer shutting down for user cancel.")
                return
            raise
        except Exception as exc:
            self.log.exception("Drain messages raised: %r", exc)
            raise
        finally:
            self.diag.unset_flag(CONSUMER_FETCHING)

    def broker_connected(self) -> bool | None:
        """Whether the consumer holds a broker connection (None: cannot be told, e.g. not started)."""
        return self._thread.broker_connected()


class Transport(faust_aiokafka.Transport):
    """Faust's aiokafka transport, consuming with :class:`Consumer`; :func:`configure` sets its options."""

    Consumer = Consumer
    options: DriverOptions = DriverOptions()
