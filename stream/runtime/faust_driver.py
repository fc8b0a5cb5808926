"""The Faust transport the processor's workers consume with: Faust's aiokafka driver and what flowtracer changes in it.

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
- **Changelog ends on Tansu** (``ConsumerThread._highwaters``, with ``check_changelog_ends``): table recovery reads
  each changelog partition to the end offset ListOffsets(latest) gives, and Tansu answers that with the base offset
  of the partition's last record batch plus one. The high watermark of a fetch is right on Tansu, so the listed end
  is checked by a fetch from just before it (:func:`fetched_ends`): the end is the larger of the two. On Apache
  Kafka they agree, and the check costs one fetch per recovery.
- **Broker connected** (``Consumer.broker_connected``): whether the worker's Kafka client holds a broker
  connection (the window clock stands still while it holds none, stall_clock.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import aiokafka
import faust
from faust.transport.drivers import TRANSPORTS
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from yarl import URL

log = logging.getLogger(__name__)

SCHEME = "flowtracer-kafka"
"""The broker URL scheme of :class:`Transport` (the ``faust.transports`` entry point in pyproject.toml)."""
CHECK_FETCH_TIMEOUT_MS = 2_000
"""How long the fetch that checks changelog ends may wait for the broker's answer, ms."""

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


class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's aiokafka consumer thread with the fetch wait, the seek and the changelog ends of the options."""

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
        """In the consumer's thread: the committed offsets, and where each stream partition was positioned."""
        consumer = self._ensure_consumer()
        # One request per partition, as aiokafka's seek_to_committed makes.
        committed = {tp: await consumer.committed(tp) for tp in consumer.assignment()}
        changelogs = self.app.tables.changelog_topics  # never committed: Faust's recovery positions those itself
        # Offset 0 counts as none, as in aiokafka's seek_to_committed: both mean "from the beginning".
        assigned = consumer.assignment()  # a rebalance may have begun while the offsets were asked for
        committed = {tp: offset for tp, offset in committed.items() if tp in assigned}
        uncommitted = [tp for tp, offset in committed.items() if not offset and tp.topic not in changelogs]
        for tp, offset in committed.items():
            if offset:
                consumer.seek(tp, offset)
        if uncommitted:
            await consumer.seek_to_beginning(*uncommitted)
        positions = {(tp.topic, tp.partition): offset for tp, offset in committed.items()
                     if offset and tp.topic not in changelogs}
        if uncommitted:
            try:
                beginning = await consumer.beginning_offsets(uncommitted)
            except Exception as exc:
                log.warning("beginning offsets of %d partitions not known (%s): their lag is not followed",
                            len(uncommitted), exc)
                beginning = {}
            positions.update({(tp.topic, tp.partition): offset for tp, offset in beginning.items()})
        return cast(dict[TP, "int | None"], committed), positions

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


class Consumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer, running :class:`ConsumerThread`."""

    _thread: ConsumerThread

    def _new_consumer_thread(self) -> ConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def broker_connected(self) -> bool | None:
        """Whether the consumer holds a broker connection (None: cannot be told, e.g. not started)."""
        return self._thread.broker_connected()


class Transport(faust_aiokafka.Transport):
    """Faust's aiokafka transport, consuming with :class:`Consumer`; :func:`configure` sets its options."""

    Consumer = Consumer
    options: DriverOptions = DriverOptions()
