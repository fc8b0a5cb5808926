"""The Faust app: the thin I/O layer around the processor's stages.

One agent consumes the four co-partitioned topics (counters, flows, path traces, attributions) so
that Faust assigns partition n of all four to the same worker; a second agent consumes the one-partition
group-FIM topic for the fabric-wide FIM. Records are decoded, buffered in their partition's
stage, and held un-acked (an extra reference on the Faust message) until the windows they belong
to are finalized, their outputs are acknowledged by Kafka and durable in the sink: only then are
they acked, so offsets are never committed past unwritten data. A crash or a rebalance replays
the un-acked records and the idempotent outputs (keyed by entity, stamped with the window end)
overwrite what they had written.

Tansu notes (the embedded broker): ``exactly_once`` needs idempotent/transactional producers,
which Tansu lacks, so the guarantee is at-least-once with idempotent sinks; the session timeout is
low (4 s) so that a joining worker is not kept waiting 30 s; ``producer_max_batch_size=1`` when
running against Tansu, whose wrong ListOffsets(latest) otherwise loses changelog updates.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import faust
from prometheus_client import CollectorRegistry, Counter, Gauge

from flowtracer.schemas import topics
from flowtracer.schemas.fabric import Fabric
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.topology import load_topology
from flowtracer.schemas.v1 import analytics_pb2, counters_pb2, flows_pb2, internal_pb2
from flowtracer.stream.analytics.collisions import CollisionRule
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.resolvers.contract import Resolver, TraceConsumer
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.resolvers.trace import TraceConfig, TraceResolver
from flowtracer.stream.runtime import faust_seek
from flowtracer.stream.runtime.ack_ledger import AckLedger
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.inputs import BadRecord, check_event_time, decode, decode_trace
from flowtracer.stream.sinks.base import SinkBackpressure
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.fabric import FabricStage
from flowtracer.stream.stages.flows import FlowsStage
from flowtracer.stream.stages.links import LinksStage

log = logging.getLogger(__name__)

LinesFn = Callable[[Emitted], list[str]]
STATE_TABLE = "stage-state"
FABRIC_TABLE = "fabric-state"
FABRIC_KEY = "fabric"
_INPUTS = frozenset({topics.COUNTERS.name, topics.FLOWS.name, topics.PATH_TRACES.name})


@dataclass
class _Pending:
    """A published finalization: its outputs, then the stage states saved once those are durable."""

    ticket: int
    futures: list[asyncio.Future[Any]]
    tokens: list[Any]
    states: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    saving: list[Any] | None = None  # the state sends, once started


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.records = Counter("flowtracer_processor_records", "Input records consumed", ["topic"], registry=r)
        self.dead_letters = Counter("flowtracer_processor_dead_letters", "Records sent to the dead-letter topic",
                                    registry=r)
        self.windows = Counter("flowtracer_processor_windows", "Windows finalized", ["stage"], registry=r)
        self.late = Gauge("flowtracer_processor_late_records", "Records for windows already finalized", registry=r)
        self.unattributed = Gauge("flowtracer_processor_unattributed_flows",
                                  "Flows whose ends are not in the topology (cumulative)", registry=r)
        self.incomplete = Gauge("flowtracer_processor_incomplete_windows",
                                "Windows finalized without a source that was expected (cumulative)", registry=r)
        self.trace_disagreements = Gauge("flowtracer_processor_trace_disagreements",
                                         "Path traces untrusted for contradicting the counters (cumulative)",
                                         registry=r)
        self.ahead = Gauge("flowtracer_processor_source_ahead_seconds",
                           "Newest record's event time minus the worker's clock, by source kind (s; > 0: ahead)",
                           ["kind"], registry=r)
        self.pending = Gauge("flowtracer_processor_pending_acks", "Input records held until outputs are durable",
                             registry=r)
        self.last_window = Gauge("flowtracer_processor_last_window_end_seconds",
                                 "End of the newest finalized window (Unix seconds)", registry=r)


class Processor:
    """The stages of every partition this worker owns, and the ack ledger. Holds no Faust objects
    except the events it was given as ack tokens."""

    def __init__(self, cfg: ProcessorConfig, fabric: Fabric, resolver_cls: type[Resolver]) -> None:
        self.cfg = cfg
        self.input_topics = frozenset(t.name for t in topics.INPUT_TOPICS)
        self.fabric = fabric
        self.links = LinkIndex(fabric)
        self.resolver_cls = resolver_cls
        self.uses_counters = resolver_cls.name != "hash"
        self.uses_traces = issubclass(resolver_cls, TraceConsumer)
        self.flows: dict[int, FlowsStage] = {}
        self.link_stages: dict[int, LinksStage] = {}
        self._senders = frozenset(partition_for(sw, cfg.partitions) for sw in fabric.switch_names)
        self._fabric: FabricStage | None = None
        self.rule = CollisionRule(heavy_share=cfg.heavy_share, max_flows_reported=cfg.max_flows_per_link,
                                  min_confidence=cfg.collision_confidence)
        self.metrics = Metrics()
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self._dirty_flows: set[int] = set()
        self._dirty_links: set[int] = set()
        self._dirty_fabric = False
        #: Called with every published finalization (the dashboard's feed); must not raise or block.
        self.observers: list[Callable[[Emitted], None]] = []

    def flows_stage(self, p: int) -> FlowsStage:
        if p not in self.flows:
            stage = FlowsStage(p, self.cfg.partitions, self.fabric, self.links, self.new_resolver(),
                               self.cfg.hop_ns, self.cfg.grace_ns, self.uses_counters, self.cfg.max_flows_per_link,
                               self.cfg.heavy_share)
            saved = self.saved_state(f"flows:{p}")
            if saved:
                stage.restore(saved)
            log.info("flows stage of partition %d: %s", p, _restored(saved))
            self.flows[p] = stage
        return self.flows[p]

    def new_resolver(self) -> Resolver:
        """A resolver for one flows partition, with the processor's settings for the trace resolver."""
        if self.resolver_cls is TraceResolver:
            return TraceResolver(self.fabric, TraceConfig(max_age_ns=round(self.cfg.trace_max_age_s * 1e9)))
        return self.resolver_cls(self.fabric)

    def trace_disagreements(self) -> int:
        """Path traces found to contradict the counters, over this worker's flows stages (cumulative)."""
        return sum(getattr(s.resolver, "disagreements", 0) for s in self.flows.values())

    def links_stage(self, p: int) -> LinksStage:
        if p not in self.link_stages:
            stage = LinksStage(p, self.cfg.partitions, self.fabric, self.links, self.cfg.hop_ns,
                               self.cfg.grace_ns, self.cfg.rolling_hops, self.rule, self.resolver_cls.name)
            saved = self.saved_state(f"links:{p}")
            if saved:
                stage.restore(saved)
            log.info("links stage of partition %d: %s", p, _restored(saved))
            self.link_stages[p] = stage
        return self.link_stages[p]

    @property
    def fabric_stage(self) -> FabricStage:
        if self._fabric is None:
            self._fabric = FabricStage(self.cfg.hop_ns, self.cfg.grace_ns, self.cfg.rolling_hops, self._senders)
            saved = self.saved_state(FABRIC_KEY)
            if saved:
                self._fabric.restore(saved)
            log.info("fabric stage: %s", _restored(saved))
        return self._fabric

    def saved_state(self, key: str) -> dict[str, Any] | None:
        """State a previous owner of the partition saved (set by the app to read its Faust tables)."""
        return None

    def states_to_save(self) -> list[tuple[int, str, dict[str, Any]]]:
        """(partition, key, state) of every stage that finalized windows since the last call; the
        fabric stage's key is ``FABRIC_KEY`` (partition 0 of its own one-partition table)."""
        out = []
        for p in sorted(self._dirty_flows):
            if p in self.flows:
                out.append((p, f"flows:{p}", self.flows[p].state()))
        for p in sorted(self._dirty_links):
            if p in self.link_stages:
                out.append((p, f"links:{p}", self.link_stages[p].state()))
        if self._dirty_fabric and self._fabric is not None:
            out.append((0, FABRIC_KEY, self._fabric.state()))
        self._dirty_flows.clear()
        self._dirty_links.clear()
        self._dirty_fabric = False
        return out

    def accept(self, topic: str, partition: int, value: bytes | None, token: Any, now_ns: int,
               key: bytes | None = None) -> int:
        """Buffer a decoded record in its stage(s); return how many holds it took (0: nothing kept).

        Raises BadRecord for records that belong in the dead-letter topic.
        """
        self.metrics.records.labels(topic).inc()
        if topic == topics.PATH_TRACES.name:
            flow_id, trace = decode_trace(key, value)
            return int(self.flows_stage(partition).add_trace(flow_id, trace, token)) if self.uses_traces else 0
        msg = decode(topic, value)
        if topic in self.input_topics:
            # Dead-letters a record stamped beyond the bound; the skew of the rest is visible per kind.
            ahead = check_event_time(msg, now_ns, round(self.cfg.max_ahead_s * 1e9))
            self.metrics.ahead.labels(type(msg).__name__).set(ahead / 1e9)
        late_before = self._late()
        holds = 0
        if isinstance(msg, flows_pb2.FlowBatch):
            holds += self.flows_stage(partition).add_flows(msg, token, now_ns)
        elif isinstance(msg, counters_pb2.CounterBatch):
            if self.uses_counters:
                holds += self.flows_stage(partition).add_counters(msg, token, now_ns)
            holds += self.links_stage(partition).add_counters(msg, token, now_ns)
        elif isinstance(msg, internal_pb2.AttributionBatch):
            holds += self.links_stage(partition).add_attributions(msg, token, now_ns)
        elif isinstance(msg, internal_pb2.GroupFimBatch):
            holds += self.fabric_stage.add(msg, token, now_ns)
        if self._late() > late_before and self._late() <= 20:  # the first few, then the metric says it
            log.warning("late record from %s[%d] (%s) for a window already finalized; counted, not reopened",
                        topic, partition, _describe(msg))
        return holds

    def _late(self) -> int:
        return sum(s.tracker.late for s in self._stages())

    def _stages(self) -> list[FlowsStage | LinksStage | FabricStage]:
        fabric = [self._fabric] if self._fabric is not None else []
        return [*self.flows.values(), *self.link_stages.values(), *fabric]

    def finalize(self, now_ns: int) -> Emitted:
        """Everything every stage can finalize now."""
        out = Emitted()
        for name, stages, dirty in (("flows", self.flows, self._dirty_flows),
                                    ("links", self.link_stages, self._dirty_links)):
            for p, stage in stages.items():
                e = stage.finalize(now_ns)
                if e.windows:
                    dirty.add(p)
                    self.metrics.windows.labels(name).inc(e.windows)
                out.extend(e)
        if self._fabric is not None:
            e = self._fabric.finalize(now_ns)
            if e.windows:
                self._dirty_fabric = True
                self.metrics.windows.labels("fabric").inc(e.windows)
            out.extend(e)
        unattributed = sum(s.unattributed.flows for s in self.flows.values())
        self.metrics.unattributed.set(unattributed)
        self.metrics.trace_disagreements.set(self.trace_disagreements())
        self.metrics.late.set(self._late())
        self.metrics.incomplete.set(sum(s.tracker.incomplete for s in self._stages()))
        return out

    def drop_partitions(self, partitions: set[int]) -> None:
        """Forget revoked partitions: their un-acked records will be replayed by the new owner."""
        for p in partitions:
            self.flows.pop(p, None)
            self.link_stages.pop(p, None)

    def partitions(self) -> set[int]:
        """Partitions with a flows or links stage."""
        return set(self.flows) | set(self.link_stages)

    def drop_fabric(self) -> None:
        """Forget the fabric stage (its partition was revoked): the new owner replays its records."""
        self._fabric = None


def _restored(saved: dict[str, Any] | None) -> str:
    if not saved:
        return "no saved state, starting afresh"
    return f"restored, continuing after window end {saved.get('released_up_to')}"


def _describe(msg: Any) -> str:
    for name in ("switch", "host", "source_partition"):
        if hasattr(msg, name):
            end = getattr(msg, "window_end_ns", 0) or getattr(msg, "timestamp_ns", 0)
            return f"{name} {getattr(msg, name)}, window end {end}"
    return type(msg).__name__


def state_changelog_topic(cfg: ProcessorConfig) -> str:
    """Name Faust gives the stage-state table's changelog (created explicitly with the input partition count)."""
    return f"{cfg.app_id}-{STATE_TABLE}-changelog"


def fabric_changelog_topic(cfg: ProcessorConfig) -> str:
    """Name Faust gives the fabric-state table's changelog (created explicitly with one partition)."""
    return f"{cfg.app_id}-{FABRIC_TABLE}-changelog"


def build_app(cfg: ProcessorConfig, sink: Any, lines: LinesFn, fabric: Fabric | None = None
              ) -> tuple[faust.App, Processor]:
    """A configured Faust app and the Processor it drives. ``lines`` turns outputs into sink lines."""
    faust_seek.install()
    fabric = fabric or Fabric(load_topology(cfg.topology))
    proc = Processor(cfg, fabric, RESOLVERS[cfg.resolver])
    settings: dict[str, Any] = {
        "broker": [f"kafka://{b.strip()}" for b in cfg.kafka.split(",")],
        "processing_guarantee": "at_least_once",
        "broker_session_timeout": cfg.session_timeout_s,
        "broker_heartbeat_interval": min(1.0, cfg.session_timeout_s / 4),
        "consumer_auto_offset_reset": "earliest",
        "topic_partitions": cfg.partitions,
        "topic_allow_declare": False,  # topics are created by ensure_topics with the contract's counts
        "topic_disable_leader": True,
        "store": "memory://",
        "datadir": str(cfg.data_dir),
        "web_enabled": cfg.web_port > 0,
        "web_port": cfg.web_port or 6066,
        "web_bind": "127.0.0.1",
        "stream_wait_empty": False,
        "broker_commit_every": 100,
        "broker_commit_interval": 1.0,
    }
    if cfg.tansu:
        settings["producer_max_batch_size"] = 1
    app = faust.App(cfg.app_id, **settings)
    raw = {"key_serializer": "raw", "value_serializer": "raw"}
    attributions = topics.internal_name(cfg.app_id, topics.ATTRIBUTIONS)
    group_fim = topics.internal_name(cfg.app_id, topics.GROUP_FIM)
    inputs = app.topic(topics.COUNTERS.name, topics.FLOWS.name, topics.PATH_TRACES.name, attributions, **raw)
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

    proc.saved_state = saved_state  # type: ignore[method-assign]
    contract_topic = {attributions: topics.ATTRIBUTIONS.name, group_fim: topics.GROUP_FIM.name}
    pending: deque[_Pending] = deque()
    ledger = AckLedger()
    lock = asyncio.Lock()

    async def send(topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> asyncio.Future[Any]:
        return await out[topic].send(key=key, value=value, partition=partition)  # type: ignore[return-value]

    async def publish(e: Emitted) -> None:
        """Send a finalization's outputs, write them to the sink, and queue its tokens for acking."""
        futures = []
        for ll in e.link_loads:
            futures.append(await send(topics.LINK_LOADS.name, topics.key(ll.link), ll.SerializeToString()))
        for pl in e.path_loads:
            futures.append(await send(topics.PATH_LOADS.name, topics.key(pl.path_id), pl.SerializeToString()))
        for f in e.fims:
            futures.append(await send(topics.FIM.name, topics.key(f.group), f.SerializeToString()))
        for c in e.collisions:
            futures.append(await send(topics.COLLISIONS.name, topics.key(c.group), c.SerializeToString()))
        for dest, ab in e.attributions:
            futures.append(await send(topics.ATTRIBUTIONS.name, None, ab.SerializeToString(), dest))
        for gb in e.group_fims:
            futures.append(await send(topics.GROUP_FIM.name, None, gb.SerializeToString(), 0))
        ticket = 0
        out_lines = lines(e)
        while out_lines:
            try:
                ticket = sink.write(out_lines)
                break
            except Exception as exc:  # SinkBackpressure: wait; nothing is dropped, Kafka lag grows
                if not isinstance(exc, SinkBackpressure):
                    raise
                await asyncio.sleep(0.2)
                sink.raise_if_failed()
        pending.append(_Pending(ticket, futures, e.tokens, proc.states_to_save()))
        for observe in proc.observers:
            observe(e)
        if e.fims:
            proc.metrics.last_window.set(max(f.window_end_ns for f in e.fims) / 1e9)

    def release() -> None:
        """Ack, in order, the inputs of finalizations whose outputs are all acknowledged and durable.

        The stages' states (which windows they published, rolling history) are saved only after the
        outputs are durable, and the inputs acked only after the states are: a new owner then never
        skips a window whose outputs were lost, and never replays one whose state it was given.
        """
        sink.raise_if_failed()
        while pending:
            head = pending[0]
            if not all(f.done() for f in head.futures) or not sink.durable(head.ticket):
                break
            for f in head.futures:
                if f.exception() is not None:
                    raise RuntimeError(f"output send failed: {f.exception()}")
            if head.saving is None:
                head.saving = [save_state(p, key, value) for p, key, value in head.states]
            if not all(f.done() for f in head.saving):
                break
            for f in head.saving:
                if f.exception() is not None:
                    raise RuntimeError(f"saving stage state failed: {f.exception()}")
            pending.popleft()
            for token in head.tokens:
                ledger.release(token)
        for event in ledger.ackable():
            event.ack()
        proc.metrics.pending.set(ledger.held())

    async def step() -> None:
        async with lock:
            e = proc.finalize(time.time_ns())
            if e.windows:
                await publish(e)
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
            try:
                holds = proc.accept(contract_topic.get(m.topic, m.topic), m.partition, m.value, hold, time.time_ns(),
                                    m.key)
            except BadRecord as e:
                # Held until the dead letter is acknowledged, like any output.
                pending.append(_Pending(0, [await dead_letter(event, str(e))], [hold]))
                continue
            ledger.accepted(hold, holds)
            await step()

    async def fatal(exc: BaseException) -> None:
        # A crashed agent would leave the worker running but deaf. Stop the worker instead: its
        # un-acked records are replayed by the next worker (or this one, restarted by its supervisor).
        log.error("processor stopping: %s: %s", type(exc).__name__, exc, exc_info=exc)
        app._flowtracer_failed = True  # type: ignore[attr-defined]
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

    @app.on_partitions_revoked.connect
    async def on_revoked(app: faust.App, revoked: set[Any], **kwargs: Any) -> None:
        gone = {tp.partition for tp in revoked if tp.topic in _INPUTS}
        proc.drop_partitions(gone)
        if any(tp.topic == group_fim for tp in revoked):
            proc.drop_fabric()
        ledger.revoke({(tp.topic, tp.partition) for tp in revoked})

    return app, proc
