"""The Faust app: the thin I/O layer around the processor's stages.

One agent consumes the four co-partitioned topics (counters, flows, path traces, attributions) so
that Faust assigns partition n of all four to the same worker; a second agent consumes the one-partition
group-FIM topic for the fabric-wide FIM. Records are decoded, buffered in their partition's
stage, and held un-acked (an extra reference on the Faust message) until the windows they belong
to are finalized, their outputs are acknowledged by Kafka and durable in the sink: only then are
they acked, so offsets are never committed past unwritten data (the protocol is
:class:`~flowtracer.stream.runtime.commit.CommitProtocol`; the stages live in
:class:`~flowtracer.stream.runtime.processor.Processor`). A crash or a rebalance replays
the un-acked records and the idempotent outputs (keyed by entity, stamped with the window end)
overwrite what they had written.

Tansu notes (the embedded broker): ``exactly_once`` needs idempotent/transactional producers,
which Tansu lacks, so the guarantee is at-least-once with idempotent sinks; the session timeout is
low (4 s) so that a joining worker is not kept waiting 30 s; on Tansu, whose ListOffsets(latest) answers the last
batch's base offset + 1, table recovery checks each changelog's end by a fetch (faust_driver.py), so that outputs
are produced in batches (before, one record per produce request). The workers consume with flowtracer's Faust
transport (faust_driver.py: every change to Faust's consumer is there).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import faust
from faust.types import TP

from flowtracer.schemas import topics
from flowtracer.schemas.fabric import Fabric
from flowtracer.schemas.kafka_security import faust_settings
from flowtracer.schemas.topology import load_topology
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.runtime import faust_driver
from flowtracer.stream.runtime.commit import CommitProtocol
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.dead_letters import drop_unwritable, rejected_dead_letters
from flowtracer.stream.runtime.inputs import BadRecord
from flowtracer.stream.runtime.processor import FABRIC_KEY, Metrics, Processor
from flowtracer.stream.runtime.read_positions import ReadPositions
from flowtracer.stream.runtime.stall_clock import StallClock
from flowtracer.stream.runtime.web import web_settings
from flowtracer.stream.sinks.base import Rejected
from flowtracer.stream.sinks.line_protocol import PointError
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.outputs import KEYED

__all__ = ["Metrics", "Processor", "build_app", "fabric_changelog_topic", "state_changelog_topic"]

log = logging.getLogger(__name__)

LinesFn = Callable[[Emitted], list[str]]
STATE_TABLE = topics.STATE_TABLE
FABRIC_TABLE = topics.FABRIC_TABLE
_INPUTS = frozenset({topics.COUNTERS.name, topics.FLOWS.name, topics.PATH_TRACES.name})


@dataclass
class _Lag:
    """The input partitions with unread records as last asked (at ``at_ns``), and whether reading is held back."""

    unread: frozenset[tuple[str, int]] = frozenset()
    at_ns: int = 0
    blocked: bool = False


def state_changelog_topic(cfg: ProcessorConfig) -> str:
    """Name Faust gives the stage-state table's changelog (created from the topic plan, ``schemas/topics.py``)."""
    return topics.changelog_name(cfg.app_id, topics.STATE_CHANGELOG)


def fabric_changelog_topic(cfg: ProcessorConfig) -> str:
    """Name Faust gives the fabric-state table's changelog (created from the topic plan, ``schemas/topics.py``)."""
    return topics.changelog_name(cfg.app_id, topics.FABRIC_CHANGELOG)


def build_app(cfg: ProcessorConfig, sink: Any, lines: LinesFn, fabric: Fabric | None = None
              ) -> tuple[faust.App, Processor]:
    """A configured Faust app and the Processor it drives. ``lines`` turns outputs into sink lines."""
    fabric = fabric or Fabric(load_topology(cfg.topology))
    brokers = faust_settings(cfg.kafka_security, cfg.kafka)  # broker URLs and TLS/SASL credentials
    settings: dict[str, Any] = {
        **brokers,
        "broker_consumer": faust_driver.consumer_brokers(brokers["broker"]),  # flowtracer's transport
        "processing_guarantee": "at_least_once",
        "broker_session_timeout": cfg.session_timeout_s,
        "broker_heartbeat_interval": min(1.0, cfg.session_timeout_s / 4),
        "consumer_auto_offset_reset": "earliest",
        "topic_partitions": cfg.partitions,
        "topic_allow_declare": False,  # topics are created by ensure_topics with the contract's counts
        "topic_disable_leader": True,
        "store": "memory://",
        "datadir": str(cfg.data_dir),
        **web_settings(cfg.web_port, cfg.web_bind),  # flowtracer's views only, on cfg's address (web.py)
        "stream_wait_empty": False,
        "broker_commit_every": 100,
        "broker_commit_interval": 1.0,
    }
    app = faust.App(cfg.app_id, **settings)
    raw = {"key_serializer": "raw", "value_serializer": "raw"}
    attributions = topics.internal_name(cfg.app_id, topics.ATTRIBUTIONS)
    group_fim = topics.internal_name(cfg.app_id, topics.GROUP_FIM)
    inputs = app.topic(topics.COUNTERS.name, topics.SWITCH_CONGESTION.name, topics.FLOWS.name, topics.PATH_TRACES.name,
                       attributions, **raw)
    group_fim_in = app.topic(group_fim, **raw)
    out = {t.name: app.topic(t.name, **raw) for t in topics.OUTPUT_TOPICS}
    out[topics.ATTRIBUTIONS.name] = app.topic(attributions, **raw)
    out[topics.GROUP_FIM.name] = app.topic(group_fim, **raw)
    # Per-partition stage state (the last published window, rolling FIM history, resolver knowledge),
    # written with the partition explicitly because it is saved after the outputs are durable, outside
    # any one event's context. The fabric stage's state has a one-partition table of its own, so that
    # the assignor gives its changelog to the owner of the one-partition group-FIM topic. Faust
    # recovers a worker's tables before its streams resume, so a stage created at its partition's
    # first record finds what the previous owner saved.
    stage_state = app.Table(STATE_TABLE, partitions=cfg.partitions, key_type=str)  # values: json
    fabric_state = app.Table(FABRIC_TABLE, partitions=1, key_type=str)

    def saved_state(key: str) -> Any:
        return (fabric_state if key == FABRIC_KEY else stage_state).data.get(key)

    def save_state(partition: int, key: str, value: dict[str, Any]) -> Any:
        table = fabric_state if key == FABRIC_KEY else stage_state
        table.data[key] = value
        return table.send_changelog(partition, key, value)

    proc = Processor(cfg, fabric, RESOLVERS[cfg.resolver], saved_state)

    async def dead_letter_rejected(rejected: Rejected) -> list[Any]:
        """The store refused these points for good: to the dead-letter topic, one record per window."""
        proc.metrics.sink_rejected.labels(str(rejected.status)).inc(len(rejected.lines))
        letters = rejected_dead_letters(rejected, getattr(sink, "name", ""), proc.worker, time.time_ns())
        proc.metrics.dead_letters.inc(len(letters))
        log.warning("dead letters: %d points in %d windows: %s", len(rejected.lines), len(letters), rejected.reason)
        return [await send(topics.DEAD_LETTER.name, None, dl.SerializeToString()) for dl in letters]

    commits = CommitProtocol(sink, save_state, dead_letter=dead_letter_rejected)
    ledger = commits.ledger
    contract_topic = {attributions: topics.ATTRIBUTIONS.name, group_fim: topics.GROUP_FIM.name}
    lock = asyncio.Lock()
    # Windows are not waited out while the worker is cut off from Kafka: no source could reach it (stall_clock.py).
    clock = StallClock(cfg.grace_ns)

    def broker_gone() -> bool:
        return faust_driver.broker_connected(app) is False  # unknown counts as connected

    # Consumer lag per input partition: a source whose records are not read yet is not waited out by the clock.
    positions = ReadPositions()
    # On Tansu, whose ListOffsets(latest) is wrong for batched partitions, recovery checks the ends by a fetch.
    faust_driver.configure(app, faust_driver.DriverOptions(fetch_wait_ms=cfg.fetch_wait_ms,
                                                           check_changelog_ends=cfg.tansu,
                                                           on_positioned=positions.positioned))
    lag = _Lag()

    def highwater(topic: str, partition: int) -> int | None:
        try:
            return app.consumer.highwater(TP(topic, partition))  # type: ignore[no-any-return]
        except Exception:
            return None

    def unread(wall: int) -> frozenset[tuple[str, int]]:
        """Input partitions (contract topic names) with records not read yet; none while reading is held back by
        the ack ledger's bound (then only releases can free it: the clock rules must apply). Asked at most every
        0.1 s: it is a high-watermark lookup per partition, and the step runs after every record."""
        if lag.blocked:
            return frozenset()
        if wall - lag.at_ns > 100_000_000:
            lag.unread = frozenset((contract_topic.get(t, t), p) for t, p in positions.unread(highwater))
            lag.at_ns = wall
        return lag.unread

    def window_clock(wall: int) -> int:
        # Which sources are behind is asked only while the clock has time to catch up (after a cut-off).
        return clock.now(wall, commits.oldest_unreleased_ns, bool(clock.lag_ns) and proc.any_behind(),
                         broker_gone())

    async def send(topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> asyncio.Future[Any]:
        return await out[topic].send(key=key, value=value, partition=partition)  # type: ignore[return-value]

    async def publish(e: Emitted) -> None:
        """Send a finalization's outputs, write them to the sink, and queue its holds for release."""
        # Stamped before the sends: with the broker gone a send can wait a minute for metadata, and that
        # minute must count as unacknowledged output, or the window clock would not stand still (stall_clock.py).
        started_ns = time.time_ns()
        futures = []
        try:
            text = lines(e)
        except PointError:  # an output no encoder can write: dead-lettered alone, the window is written
            letters = drop_unwritable(e, proc.worker, started_ns)
            proc.metrics.dead_letters.inc(len(letters))
            log.warning("dead letters: %d outputs cannot be written: %s", len(letters),
                        "; ".join(dl.reason for dl in letters[:3]))
            futures += [await send(topics.DEAD_LETTER.name, None, dl.SerializeToString()) for dl in letters]
            text = lines(e)
        for out in KEYED:  # the registry's order (stages/outputs.py)
            for r in getattr(e, out.kind):
                futures.append(await send(out.topic.name, topics.key(getattr(r, out.key)), r.SerializeToString()))
        for dl in e.dead_letters:  # the input records of windows that failed (stages/emitted.py, failed_window)
            dl.worker, dl.received_ns = proc.worker, started_ns
            futures.append(await send(topics.DEAD_LETTER.name, None, dl.SerializeToString()))
        proc.metrics.dead_letters.inc(len(e.dead_letters))
        for dest, ab in e.attributions:
            futures.append(await send(topics.ATTRIBUTIONS.name, None, ab.SerializeToString(), dest))
        for gb in e.group_fims:
            futures.append(await send(topics.GROUP_FIM.name, None, gb.SerializeToString(), 0))
        ticket = await commits.write(text)  # waits out sink backpressure: nothing is dropped
        commits.published(ticket, futures, e.tokens, proc.states_to_save(), at_ns=started_ns)
        for observe in proc.observers:
            observe(e)
        if e.fims:
            proc.metrics.last_window.set(max(f.window_end_ns for f in e.fims) / 1e9)

    def release() -> None:
        """Ack the inputs the commit protocol lets go (see commit.py)."""
        for event in commits.release():
            event.ack()
        proc.metrics.pending.set(ledger.held())
        proc.metrics.ledger_overflows.set(ledger.overflows)

    async def step() -> None:
        async with lock:
            wall = time.time_ns()
            e = proc.finalize(window_clock(wall), unread(wall))
            if e.windows:
                await publish(e)
            await commits.drain_rejected()  # refused points go to the dead-letter topic before any commit past them
            release()

    async def dead_letter(event: Any, reason: str) -> asyncio.Future[Any]:
        proc.metrics.dead_letters.inc()
        m = event.message
        log.warning("dead letter from %s[%d]@%d: %s", m.topic, m.partition, m.offset, reason)
        dl = analytics_pb2.DeadLetter(schema_version=topics.SCHEMA_VERSION, topic=m.topic, partition=m.partition,
                                      offset=m.offset, key=m.key or b"", value=m.value or b"", reason=reason,
                                      received_ns=time.time_ns(), worker=proc.worker)
        return await send(topics.DEAD_LETTER.name, m.key, dl.SerializeToString())

    async def consume(stream: Any) -> None:
        async for event in stream.events():
            m = event.message
            m.incref()  # acked by the ledger, in offset order, once every stage holding it published
            hold = ledger.receive(m.topic, m.partition, m.offset, event)
            positions.read(m.topic, m.partition, m.offset)
            wall = time.time_ns()
            clock.received(wall)
            try:
                holds = proc.accept(contract_topic.get(m.topic, m.topic), m.partition, m.value, hold, wall, m.key,
                                    window_clock(wall), m.headers)
            except BadRecord as e:
                # Held until the dead letter is acknowledged, like any output.
                commits.published(0, [await dead_letter(event, str(e))], [hold], at_ns=wall)
                continue
            ledger.accepted(hold, holds)
            await step()
            while ledger.full(m.topic, m.partition):  # bounded: read no more until the timer's steps release
                lag.blocked = True
                await asyncio.sleep(0.1)
            lag.blocked = False

    async def fatal(exc: BaseException) -> None:
        # A crashed agent would leave the worker running but deaf. Stop the worker instead: its
        # un-acked records are replayed by the next worker (or this one, restarted by its supervisor).
        log.error("processor stopping: %s: %s", type(exc).__name__, exc, exc_info=exc)
        proc.failure = exc
        await app.crash(exc)

    @app.agent(inputs, name="join")
    async def join(stream: Any) -> None:
        try:
            await consume(stream)
        except Exception as exc:
            await fatal(exc)

    @app.agent(group_fim_in, name="fabric")
    async def fabric_fim(stream: Any) -> None:
        try:
            await consume(stream)
        except Exception as exc:
            await fatal(exc)

    @app.timer(interval=min(0.5, cfg.hop_s / 2))
    async def tick() -> None:
        try:
            await step()
        except Exception as exc:
            await fatal(exc)

    @app.on_partitions_assigned.connect
    async def on_assigned(app: faust.App, assigned: set[Any], **kwargs: Any) -> None:
        # A record read before the revocation but processed after it may have recreated a stage of a
        # partition that went to another worker: forget it, or it would publish a partial window.
        mine = {(tp.topic, tp.partition) for tp in assigned}
        proc.drop_partitions({p for p in proc.partitions() if (topics.COUNTERS.name, p) not in mine})
        if (group_fim, 0) not in mine:
            proc.drop_fabric()
        ledger.revoke(ledger.partitions() - mine)
        positions.forget(positions.partitions() - mine)

    @app.on_partitions_revoked.connect
    async def on_revoked(app: faust.App, revoked: set[Any], **kwargs: Any) -> None:
        gone = {tp.partition for tp in revoked if tp.topic in _INPUTS}
        proc.drop_partitions(gone)
        if any(tp.topic == group_fim for tp in revoked):
            proc.drop_fabric()
        ledger.revoke({(tp.topic, tp.partition) for tp in revoked})
        positions.forget((tp.topic, tp.partition) for tp in revoked)

    return app, proc
