"""The Faust app: declares the topics, tables, agents, timer and rebalance signals, and hands them to the Worker.

One agent consumes the four co-partitioned topics (counters, flows, path traces, attributions) so
that Faust assigns partition n of all four to the same worker; a second agent consumes the one-partition
group-FIM topic for the fabric-wide FIM. Each agent hands every batch of fetched events to the
:class:`~flowtracer.stream.runtime.batch_worker.Worker` in one call (stream_batches.py); the worker holds each record
un-acked until its windows' outputs are acknowledged and durable (commit.py), so Faust's commits never pass unwritten
data. Faust keeps assignment, acks, commits, tables and the timer.

Tansu notes (the embedded broker): ``exactly_once`` needs idempotent/transactional producers,
which Tansu lacks, so the guarantee is at-least-once with idempotent sinks; the session timeout is
low (4 s) so that a joining worker is not kept waiting 30 s; on Tansu, whose ListOffsets(latest) answers the last
batch's base offset + 1, table recovery checks each changelog's end by a fetch (faust_driver.py). Outputs are
produced in batches, one produce request per partition and flush. The workers consume with flowtracer's Faust
transport (faust_driver.py: every change to Faust's consumer is there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import faust
from faust.types import TP

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import load_topology
from flowtracer.plumbing.kafka_security import faust_settings
from flowtracer.schemas import topics
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.runtime import faust_driver
from flowtracer.stream.runtime.batch_worker import LinesFn, Worker
from flowtracer.stream.runtime.commit import CommitProtocol
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.metrics import Metrics
from flowtracer.stream.runtime.output_producer import BATCH_BYTES, OutputProducer, producer_settings
from flowtracer.stream.runtime.processor import FABRIC_KEY, Processor
from flowtracer.stream.runtime.stream_batches import batches
from flowtracer.stream.runtime.web import web_settings

__all__ = ["Metrics", "Processor", "build_app", "fabric_changelog_topic", "state_changelog_topic"]

log = logging.getLogger(__name__)

STATE_TABLE = topics.STATE_TABLE
FABRIC_TABLE = topics.FABRIC_TABLE
STOP_OUTPUTS_S = 10.0
"""How long a stopping worker waits for its outputs' acknowledgements (s)."""


def state_changelog_topic(cfg: ProcessorConfig) -> str:
    """Name Faust gives the stage-state table's changelog (created from the topic plan, ``schemas/topics.py``)."""
    return topics.changelog_name(cfg.app_id, topics.STATE_CHANGELOG)


def fabric_changelog_topic(cfg: ProcessorConfig) -> str:
    """Name Faust gives the fabric-state table's changelog (created from the topic plan, ``schemas/topics.py``)."""
    return topics.changelog_name(cfg.app_id, topics.FABRIC_CHANGELOG)


def build_app(cfg: ProcessorConfig, sink: Any, lines: LinesFn, fabric: Fabric | None = None,
              on_started: Callable[[], None] = lambda: None) -> tuple[faust.App, Processor]:
    """A configured Faust app and the Processor it drives. ``lines`` turns outputs into sink lines; ``on_started``
    runs once, when the worker's first batch arrives (``Worker``)."""
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
        "producer_max_batch_size": BATCH_BYTES,  # a window's outputs are megabytes (output_producer.py)
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

    def highwater(topic: str, partition: int) -> int | None:
        try:
            return app.consumer.highwater(TP(topic, partition))  # type: ignore[no-any-return]
        except Exception:
            return None

    def broker_gone() -> bool:
        return faust_driver.broker_connected(app) is False  # unknown counts as connected

    proc = Processor(cfg, fabric, RESOLVERS[cfg.resolver], saved_state)
    outputs = OutputProducer(producer_settings(app.conf))
    commits = CommitProtocol(sink, save_state, flush=outputs.flush)
    worker = Worker(proc, commits, outputs, lines, sink_name=getattr(sink, "name", ""), highwater=highwater,
                    broker_gone=broker_gone, contract_topic={attributions: topics.ATTRIBUTIONS.name,
                                                             group_fim: topics.GROUP_FIM.name},
                    on_started=on_started)
    commits.dead_letter = worker.dead_letter_rejected
    # On Tansu, whose ListOffsets(latest) is wrong for batched partitions, recovery checks the ends by a fetch.
    faust_driver.configure(app, faust_driver.DriverOptions(fetch_wait_ms=cfg.fetch_wait_ms,
                                                           check_changelog_ends=cfg.tansu,
                                                           on_positioned=worker.positioned))

    async def fatal(exc: BaseException) -> None:
        # A crashed agent would leave the worker running but deaf. Stop the worker instead: its
        # un-acked records are replayed by the next worker (or this one, restarted by its supervisor).
        log.error("processor stopping: %s: %s", type(exc).__name__, exc, exc_info=exc)
        proc.failure = exc
        await app.crash(exc)

    async def consume(stream: Any) -> None:
        try:
            async for events in batches(stream):
                await worker.receive(events)
        except Exception as exc:
            await fatal(exc)

    @app.agent(inputs, name="join")
    async def join(stream: Any) -> None:
        await consume(stream)

    @app.agent(group_fim_in, name="fabric")
    async def fabric_fim(stream: Any) -> None:
        await consume(stream)

    @app.timer(interval=min(0.5, cfg.hop_s / 2))
    async def tick() -> None:
        try:
            await worker.step()
        except Exception as exc:
            await fatal(exc)

    @app.on_before_shutdown.connect
    async def stop_outputs(app: faust.App, **kwargs: Any) -> None:
        # What is not acknowledged by then is not committed either: the next owner replays it. Bounded: with the
        # broker gone the producer would wait out its request timeout (minutes).
        try:
            await asyncio.wait_for(outputs.stop(), STOP_OUTPUTS_S)
        except TimeoutError:
            log.warning("outputs not acknowledged %.0f s into the shutdown: left to be replayed", STOP_OUTPUTS_S)

    @app.on_partitions_assigned.connect
    async def on_assigned(app: faust.App, assigned: set[Any], **kwargs: Any) -> None:
        worker.on_assigned((tp.topic, tp.partition) for tp in assigned)

    @app.on_partitions_revoked.connect
    async def on_revoked(app: faust.App, revoked: set[Any], **kwargs: Any) -> None:
        worker.on_revoked((tp.topic, tp.partition) for tp in revoked)

    return app, proc
