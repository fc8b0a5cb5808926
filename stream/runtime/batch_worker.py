"""A processor worker's hot path, batch by batch: records in, windows stepped, outputs published, inputs released.

The Faust app (app.py) hands every batch of events its agents fetched to :meth:`Worker.receive` in one call
(stream_batches.py). Each record is decoded and buffered in its partition's stage by the
:class:`~flowtracer.stream.runtime.processor.Processor` and held un-acked (an extra reference on the Faust message,
an :class:`~flowtracer.stream.runtime.ack_ledger.AckLedger` hold) until the windows it belongs to are finalized, their
outputs acknowledged by Kafka and durable in the sink (:class:`~flowtracer.stream.runtime.commit.CommitProtocol`):
only then is it acked, so offsets are never committed past unwritten data. A crash or a rebalance replays the
un-acked records, and the idempotent outputs (keyed by entity, stamped with the window end) overwrite what they had
written.

Windows are checked once per batch (:meth:`Worker.step`), and at least every ``step_every_s`` of work within a long
batch, and on the app's timer: per record, checking cost more than the stages' own work. Nothing here imports Faust:
events need a ``message`` (topic, partition, offset, key, value, headers, ``incref``) and an ``ack``; the outputs go
through an :class:`Outputs` producer; the consumer's high watermarks and connection come in as functions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.runtime.commit import Ack, CommitProtocol
from flowtracer.stream.runtime.dead_letters import drop_unwritable, rejected_dead_letters
from flowtracer.stream.runtime.inputs import BadRecord
from flowtracer.stream.runtime.processor import Processor
from flowtracer.stream.runtime.read_positions import Highwater, ReadPositions
from flowtracer.stream.runtime.stall_clock import StallClock
from flowtracer.stream.sinks.base import Rejected
from flowtracer.stream.sinks.line_protocol import PointError
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.outputs import KEYED

log = logging.getLogger(__name__)

LinesFn = Callable[[Emitted], list[str]]
"""Turns a finalization's outputs into the sink's lines."""
TopicPartition = tuple[str, int]
INPUTS = frozenset({topics.COUNTERS.name, topics.FLOWS.name, topics.PATH_TRACES.name})
"""Input topics whose revoked partitions take their stages with them."""
UNREAD_EVERY_NS = 100_000_000
"""How often the consumer's lag is asked (ns): a high-watermark lookup per partition."""


class Outputs(Protocol):
    """The output producer: ``send`` queues a record and returns its future (resolved when the broker acknowledges
    it), ``send_keyed`` queues many keyed records of one topic and returns their futures (each once), ``flush`` sends
    what is queued (``output_producer.py``); ``start`` connects (called again: nothing)."""

    def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None = None
             ) -> asyncio.Future[Any]: ...

    def send_keyed(self, topic: str, records: Iterable[tuple[bytes, bytes]]) -> list[asyncio.Future[Any]]: ...

    async def flush(self) -> None: ...

    async def start(self) -> None: ...


def never() -> bool:
    return False


def no_highwater(topic: str, partition: int) -> int | None:
    return None


@dataclass
class Lag:
    """The input partitions with unread records (contract topic names) as last asked (at ``at_ns``), and whether
    reading is held back by the ack ledger's bound."""

    unread: frozenset[TopicPartition] = frozenset()
    at_ns: int = 0
    blocked: bool = False


class Worker:
    """One worker's records, windows, outputs and acks.

    Args:
        proc: the stages of the partitions this worker owns.
        commits: the offset-commit protocol (its ledger holds the records read); its ``flush`` is ``outputs.flush``.
        outputs: where outputs, attributions, group FIMs and dead letters are sent.
        lines: the sink's lines of a finalization.
        sink_name: named in the dead letters of lines the sink refused.
        highwater: the consumer's high watermark of a partition (its consumer lag: read_positions.py).
        broker_gone: whether the consumer holds no broker connection (stall_clock.py).
        contract_topic: the contract name of each internal topic (the app id's attributions, group FIMs).
        step_every_s: within a long batch, windows are checked at least this often (s).
        on_started: called once, when the first batch arrives (Faust, its tables and the producer are up): the
            worker process settles its heap there (heap.py).
    """

    def __init__(self, proc: Processor, commits: CommitProtocol, outputs: Outputs, lines: LinesFn, *,
                 sink_name: str = "", highwater: Highwater = no_highwater, broker_gone: Callable[[], bool] = never,
                 contract_topic: Mapping[str, str] | None = None, step_every_s: float = 0.1,
                 on_started: Callable[[], None] = lambda: None) -> None:
        self.proc = proc
        self.commits = commits
        self.ledger = commits.ledger
        self.outputs = outputs
        self.lines = lines
        self.sink_name = sink_name
        self.highwater = highwater
        self.broker_gone = broker_gone
        self.contract_topic = dict(contract_topic or {})
        #: The topic each internal output goes to (its contract name with the app id).
        self.internal = {contract: topic for topic, contract in self.contract_topic.items()}
        self.step_every_ns = round(step_every_s * 1e9)
        # Windows are not waited out while the worker is cut off from Kafka: no source could reach it.
        self.clock = StallClock(proc.cfg.grace_ns)
        #: The next offset to read per input partition: with the high watermarks, the consumer's lag.
        self.positions = ReadPositions()
        self.lag = Lag()
        self.lock = asyncio.Lock()  # one step at a time: the agents and the timer all step
        self._starting = asyncio.Lock()
        self._started = False
        self.on_started = on_started

    def contract(self, topic: str) -> str:
        """The contract name of a topic this worker reads (internal topics carry the app id)."""
        return self.contract_topic.get(topic, topic)

    # -- records in --------------------------------------------------------------------------------------------

    async def receive(self, events: Sequence[Any]) -> None:
        """Take a batch of fetched events (each partition's in offset order), then check the windows once.

        Each record is held (``incref``: acked by the ledger, in offset order, once every stage holding it
        published); a record that cannot be used becomes a dead letter and is held until that is acknowledged.
        Reading stops while a partition holds the ledger's bound (``AckLedger.full``) until the timer's steps
        release records.
        """
        if not self._started:
            await self.start()
        wall = time.time_ns()
        self.clock.received(wall)
        behind_ns = wall - self.window_clock(wall)
        step_at = wall + self.step_every_ns
        read: set[TopicPartition] = set()
        for event in events:
            m = event.message
            m.incref()
            hold = self.ledger.receive(m.topic, m.partition, m.offset, event)
            self.positions.read(m.topic, m.partition, m.offset)
            read.add((m.topic, m.partition))
            now = time.time_ns()
            try:
                holds = self.proc.accept(self.contract(m.topic), m.partition, m.value, hold, now, m.key,
                                         now - behind_ns, m.headers)
            except BadRecord as e:
                self.commits.published(0, [self.dead_letter(m, str(e))], [hold], at_ns=now)
                continue
            self.ledger.accepted(hold, holds)
            if now >= step_at:  # a long batch: its windows are not left waiting
                await self.step()
                wall = time.time_ns()
                behind_ns, step_at = wall - self.window_clock(wall), wall + self.step_every_ns
        await self.step()
        while any(self.ledger.full(*tp) for tp in read):  # bounded: read no more until the timer's steps release
            self.lag.blocked = True
            await asyncio.sleep(0.1)
        self.lag.blocked = False

    async def start(self) -> None:
        """Start the output producer (once: both agents may come first)."""
        async with self._starting:
            if self._started:
                return
            await self.outputs.start()
            self._started = True
            self.on_started()

    def dead_letter(self, m: Any, reason: str) -> asyncio.Future[Any]:
        """Send an input record that cannot be used to the dead-letter topic; returns the send's future."""
        self.proc.metrics.dead_letters.inc()
        log.warning("dead letter from %s[%d]@%d: %s", m.topic, m.partition, m.offset, reason)
        dl = analytics_pb2.DeadLetter(schema_version=topics.SCHEMA_VERSION, topic=m.topic, partition=m.partition,
                                      offset=m.offset, key=m.key or b"", value=m.value or b"", reason=reason,
                                      received_ns=time.time_ns(), worker=self.proc.worker)
        return self.outputs.send(topics.DEAD_LETTER.name, m.key, dl.SerializeToString())

    # -- windows, outputs, acks --------------------------------------------------------------------------------

    def window_clock(self, wall: int) -> int:
        """The clock the window rules wait by at wall time ``wall`` (ns): it stands still while cut off from Kafka.
        Which sources are behind is asked only while the clock has time to catch up (after a cut-off)."""
        behind = bool(self.clock.lag_ns) and self.proc.any_behind()
        return self.clock.now(wall, self.commits.oldest_unreleased_ns, behind, self.broker_gone())

    def unread(self, wall: int) -> frozenset[TopicPartition]:
        """Input partitions (contract names) with records not read yet; none while reading is held back by the
        ack ledger's bound (then only releases can free it: the clock rules must apply). Asked at most every
        ``UNREAD_EVERY_NS``."""
        if self.lag.blocked:
            return frozenset()
        if wall - self.lag.at_ns > UNREAD_EVERY_NS:
            self.lag.unread = frozenset((self.contract(t), p) for t, p in self.positions.unread(self.highwater))
            self.lag.at_ns = wall
        return self.lag.unread

    async def step(self) -> None:
        """Finalize what every stage can, publish it, and ack the inputs the commit protocol lets go."""
        async with self.lock:
            wall = time.time_ns()
            e = self.proc.finalize(self.window_clock(wall), self.unread(wall))
            if e.windows:
                await self.publish(e)
            else:
                await self.commits.flush()  # dead letters of records read since the last step
            await self.commits.drain_rejected()  # refused points go to the dead-letter topic before any commit
            self.release()

    async def publish(self, e: Emitted) -> None:
        """Send a finalization's outputs, write them to the sink, and queue its holds for release."""
        # Stamped before the sends: with the broker gone a send can wait a minute for metadata, and that
        # minute must count as unacknowledged output, or the window clock would not stand still (stall_clock.py).
        started_ns = time.time_ns()
        send = self.outputs.send
        attributions = self.internal.get(topics.ATTRIBUTIONS.name, topics.ATTRIBUTIONS.name)
        group_fims = self.internal.get(topics.GROUP_FIM.name, topics.GROUP_FIM.name)
        futures: list[Ack] = []
        try:
            text = self.lines(e)
        except PointError:  # an output no encoder can write: dead-lettered alone, the window is written
            letters = drop_unwritable(e, self.proc.worker, started_ns)
            self.proc.metrics.dead_letters.inc(len(letters))
            log.warning("dead letters: %d outputs cannot be written: %s", len(letters),
                        "; ".join(dl.reason for dl in letters[:3]))
            futures += [send(topics.DEAD_LETTER.name, None, dl.SerializeToString()) for dl in letters]
            text = self.lines(e)
        key = topics.key
        for out in KEYED:  # the registry's order (stages/outputs.py); each kind in one call (tens of thousands)
            records = getattr(e, out.kind)
            if records:
                field = out.key
                futures += self.outputs.send_keyed(out.topic.name, [(key(getattr(r, field)), r.SerializeToString())
                                                                    for r in records])
        for dl in e.dead_letters:  # the input records of windows that failed (stages/emitted.py, failed_window)
            dl.worker, dl.received_ns = self.proc.worker, started_ns
            futures.append(send(topics.DEAD_LETTER.name, None, dl.SerializeToString()))
        self.proc.metrics.dead_letters.inc(len(e.dead_letters))
        for dest, ab in e.attributions:
            futures.append(send(attributions, None, ab.SerializeToString(), dest))
        for gb in e.group_fims:
            futures.append(send(group_fims, None, gb.SerializeToString(), 0))
        await self.commits.checkpoint(futures, text, e.tokens, self.proc.states_to_save(), at_ns=started_ns)
        for observe in self.proc.observers:
            observe(e)
        if e.fims:
            self.proc.metrics.last_window.set(max(f.window_end_ns for f in e.fims) / 1e9)

    async def dead_letter_rejected(self, rejected: Rejected) -> list[Ack]:
        """The store refused these points for good: to the dead-letter topic, one record per window."""
        metrics = self.proc.metrics
        metrics.sink_rejected.labels(str(rejected.status)).inc(len(rejected.lines))
        letters = rejected_dead_letters(rejected, self.sink_name, self.proc.worker, time.time_ns())
        metrics.dead_letters.inc(len(letters))
        log.warning("dead letters: %d points in %d windows: %s", len(rejected.lines), len(letters), rejected.reason)
        return [self.outputs.send(topics.DEAD_LETTER.name, None, dl.SerializeToString()) for dl in letters]

    def release(self) -> None:
        """Ack the inputs the commit protocol lets go (commit.py)."""
        for event in self.commits.release():
            event.ack()
        self.proc.metrics.pending.set(self.ledger.held())
        self.proc.metrics.ledger_overflows.set(self.ledger.overflows)

    # -- assignment --------------------------------------------------------------------------------------------

    def positioned(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The consumer was sought to these offsets (a rebalance, a recovery): the next offset read per partition."""
        self.positions.positioned(offsets)

    def on_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        """The partitions this worker owns now (after a rebalance): forget every other one.

        A record read before the revocation but processed after it may have recreated a stage of a partition that
        went to another worker: it is forgotten here, or it would publish a partial window.
        """
        mine = set(assigned)
        contract = {(self.contract(t), p) for t, p in mine}
        self.proc.drop_partitions({p for p in self.proc.partitions() if (topics.COUNTERS.name, p) not in contract})
        if (topics.GROUP_FIM.name, 0) not in contract:
            self.proc.drop_fabric()
        self.ledger.revoke(self.ledger.partitions() - mine)
        self.positions.forget(self.positions.partitions() - mine)

    def on_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        """Partitions taken away (a rebalance begins): their stages, holds and read positions go; the new owner
        replays their un-acked records."""
        gone = set(revoked)
        contract = {(self.contract(t), p) for t, p in gone}
        self.proc.drop_partitions({p for t, p in contract if t in INPUTS})
        if any(t == topics.GROUP_FIM.name for t, _ in contract):
            self.proc.drop_fabric()
        self.ledger.revoke(gone)
        self.positions.forget(gone)
