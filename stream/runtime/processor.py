"""The stages of every partition a worker owns (no Faust objects); their metrics are in :mod:`.metrics`.

Records are decoded and buffered in their partition's flows and links stages (and the fabric stage
for group FIMs); ``finalize`` collects what every stage can publish now and remembers which stages
changed, so that their states are saved once the outputs are durable (:mod:`.commit`). Stage state
saved by a previous owner of a partition is read through the ``saved_state`` function the app gives
(its Faust tables).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from flowtracer.fabric.routing import Fabric
from flowtracer.schemas import topics
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.v1 import counters_pb2, flows_pb2, internal_pb2
from flowtracer.stream.analytics.collisions import CollisionRule
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.resolvers.contract import Resolver, TraceConsumer
from flowtracer.stream.resolvers.trace import TraceConfig, TraceResolver
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.inputs import BadRecord, check_event_time, decode, decode_trace, event_time
from flowtracer.stream.runtime.metrics import Metrics
from flowtracer.stream.runtime.plausibility import Plausibility
from flowtracer.stream.runtime.record_origin import OriginCheck
from flowtracer.stream.runtime.source_clocks import SourceClocks, reading
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.fabric import STREAMS as FABRIC_STREAMS
from flowtracer.stream.stages.fabric import FabricStage
from flowtracer.stream.stages.flows import STREAMS as FLOWS_STREAMS
from flowtracer.stream.stages.flows import FlowsStage
from flowtracer.stream.stages.links import STREAMS as LINKS_STREAMS
from flowtracer.stream.stages.links import LinksStage
from flowtracer.stream.stages.window_policy import producing
from flowtracer.stream.stages.window_tracker import WindowTracker

log = logging.getLogger(__name__)

FABRIC_KEY = "fabric"
StageT = TypeVar("StageT", FlowsStage, LinksStage, FabricStage)
SavedState = Callable[[str], "dict[str, Any] | None"]
"""Stage state a previous owner saved, by key (``flows:<p>``, ``links:<p>``, ``FABRIC_KEY``); None if none."""


def no_saved_state(key: str) -> dict[str, Any] | None:
    """No previous owner: every stage starts afresh."""
    return None


class Processor:
    """The stages of every partition this worker owns. Holds no Faust objects except the ack-ledger
    holds it was given as tokens."""

    def __init__(self, cfg: ProcessorConfig, fabric: Fabric, resolver_cls: type[Resolver],
                 saved_state: SavedState = no_saved_state) -> None:
        self.cfg = cfg
        self.input_topics = frozenset(t.name for t in topics.INPUT_TOPICS)
        #: Stage state a previous owner of the partition saved (the app reads its Faust tables).
        self.saved_state = saved_state
        self.fabric = fabric
        # The fabric's routing tables and ECMP groups (cached on it) are built now, at start-up, not by the first
        # record's stage: at 4,096 NICs that is about 0.4 CPU-s a worker would otherwise spend among its records.
        fabric.ecmp_groups  # noqa: B018 (a cached property: evaluated for its cache)
        self.links = LinkIndex(fabric)
        self.plausible = Plausibility(fabric)  # what the topology and physics allow of an input record
        self.resolver_cls = resolver_cls
        self.uses_traces = issubclass(resolver_cls, TraceConsumer)
        self.flows: dict[int, FlowsStage] = {}
        self.link_stages: dict[int, LinksStage] = {}
        self._senders = frozenset(partition_for(sw, cfg.partitions) for sw in fabric.switch_names)
        self._fabric: FabricStage | None = None
        self.rule = CollisionRule(heavy_share=cfg.heavy_share, max_flows_reported=cfg.max_flows_per_link,
                                  min_confidence=cfg.collision_confidence)
        #: The newest clock reading of every switch and host this worker hears from (the health view shows it).
        self.clocks = SourceClocks()
        self.metrics = Metrics(clocks=self.clocks)
        #: Per stage (``("flows", p)``, ...), the unread streams and upstream releases it was last asked with.
        self._asked: dict[tuple[str, int], tuple[frozenset[str], dict[str, int] | None]] = {}
        #: Set by the app when the worker stops on an error (the worker then exits 1).
        self.failure: BaseException | None = None
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self._dirty_flows: set[int] = set()
        self._dirty_links: set[int] = set()
        self._dirty_fabric = False
        #: Called with every published finalization (the dashboard's feed); must not raise or block.
        self.observers: list[Callable[[Emitted], None]] = []
        #: Set by ``require_host_signatures``: agent records must be signed by the host they name.
        self.origin: OriginCheck | None = None

    def flows_stage(self, p: int) -> FlowsStage:
        if p not in self.flows:
            stage = FlowsStage(p, self.cfg.partitions, self.fabric, self.links, self.new_resolver(),
                               # Every resolver reads the leaves' counters: infer learns from them, trace checks
                               # traces and hash its model against them.
                               self.cfg.hop_ns, self.cfg.grace_ns, True, self.cfg.max_flows_per_link,
                               self.cfg.heavy_share)
            self.flows[p] = self._restore(stage, f"flows:{p}", f"flows stage of partition {p}")
        return self.flows[p]

    def new_resolver(self) -> Resolver:
        """A resolver for one flows partition, with the processor's settings for the trace resolver."""
        if self.resolver_cls is TraceResolver:
            return TraceResolver(self.fabric, TraceConfig(unstamped_valid_ns=round(self.cfg.trace_max_age_s * 1e9)))
        return self.resolver_cls(self.fabric)

    def trace_disagreements(self) -> int:
        """Path traces found to contradict the counters, over this worker's flows stages (cumulative)."""
        return sum(getattr(s.resolver, "disagreements", 0) for s in self.flows.values())

    def links_stage(self, p: int) -> LinksStage:
        if p not in self.link_stages:
            stage = LinksStage(p, self.cfg.partitions, self.fabric, self.links, self.cfg.hop_ns,
                               self.cfg.grace_ns, self.cfg.rolling_hops, self.rule, self.resolver_cls.name)
            self.link_stages[p] = self._restore(stage, f"links:{p}", f"links stage of partition {p}")
        return self.link_stages[p]

    @property
    def fabric_stage(self) -> FabricStage:
        if self._fabric is None:
            stage = FabricStage(self.cfg.hop_ns, self.cfg.grace_ns, self.cfg.rolling_hops, self._senders)
            self._fabric = self._restore(stage, FABRIC_KEY, "fabric stage")
        return self._fabric

    def _restore(self, stage: StageT, key: str, what: str) -> StageT:
        """``stage`` with the state a previous owner saved under ``key``, if any (logged as ``what``)."""
        saved = self.saved_state(key)
        if saved:
            stage.restore(saved)
        log.info("%s: %s", what, _restored(saved))
        return stage

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

    def require_host_signatures(self, master: bytes) -> None:
        """From now on refuse flows and path traces not signed by the host they name (``record_origin``)."""
        self.origin = OriginCheck(master, self.metrics.registry)

    def accept(self, topic: str, partition: int, value: bytes | None, token: Any, now_ns: int,
               key: bytes | None = None, clock_ns: int | None = None, headers: Any = None) -> int:
        """Buffer a decoded record in its stage(s); return how many holds it took (0: nothing kept).

        ``now_ns`` is the wall clock (event times are checked against it), ``clock_ns`` the clock the window
        rules wait by (:class:`~flowtracer.stream.runtime.stall_clock.StallClock`; default ``now_ns``).
        ``headers`` are the record's (the host signature, checked when ``require_host_signatures`` was called).
        Raises BadRecord for records that belong in the dead-letter topic.
        """
        self.metrics.tally.record(topic)
        try:  # nothing is held yet: whatever goes wrong up to the stages makes the record a dead letter
            if topic == topics.PATH_TRACES.name:
                flow_id, trace = decode_trace(key, value)
                if self.origin is not None:
                    self.origin.check(topic, key, value, headers, trace)
                if trace is not None:
                    self.plausible.check(trace)
                return int(self.flows_stage(partition).add_trace(flow_id, trace, token)) if self.uses_traces else 0
            msg = decode(topic, value)
            if self.origin is not None:
                self.origin.check(topic, key, value, headers, msg)
            if topic in self.input_topics:
                self.plausible.check(msg)  # BadRecord naming the field: what no source could send
                # Read before the check: a clock far ahead is dead-lettered, and this is where its skew shows.
                self._read_clock(msg, partition, now_ns)
                # Dead-letters a record stamped beyond the bound; the skew of the rest is visible per kind.
                ahead = check_event_time(msg, now_ns, round(self.cfg.max_ahead_s * 1e9))
                self.metrics.tally.ahead_ns[type(msg).__name__] = ahead
        except BadRecord:
            raise
        except Exception as e:  # a bug on a record nobody foresaw: that record's, never the worker's
            log.error("a %s record could not be checked (%s: %s); dead-lettered", topic, type(e).__name__, e,
                      exc_info=e)
            raise BadRecord(f"cannot check this {topic} record: {type(e).__name__}: {e}") from None
        now_ns = now_ns if clock_ns is None else clock_ns
        adds: tuple[tuple[WindowTracker, Callable[[Any, Any, int], bool]], ...]
        if isinstance(msg, flows_pb2.FlowBatch):
            flows = self.flows_stage(partition)
            adds = ((flows.tracker, flows.add_flows),)
        elif isinstance(msg, counters_pb2.CounterBatch):
            flows, links = self.flows_stage(partition), self.links_stage(partition)
            adds = ((flows.tracker, flows.add_counters), (links.tracker, links.add_counters))
        elif isinstance(msg, counters_pb2.CongestionBatch):
            links = self.links_stage(partition)
            adds = ((links.tracker, links.add_congestion),)
        elif isinstance(msg, internal_pb2.AttributionBatch):
            links = self.links_stage(partition)
            adds = ((links.tracker, links.add_attributions),)
        elif isinstance(msg, internal_pb2.GroupFimBatch):
            fabric = self.fabric_stage
            adds = ((fabric.tracker, fabric.add),)
        else:
            return 0
        late_before = sum(t.late for t, _ in adds)  # only the stages it goes to: this runs for every record
        holds = sum(int(add(msg, token, now_ns)) for _, add in adds)
        if sum(t.late for t, _ in adds) > late_before and self._late() <= 20:  # the first few, then the metric
            log.warning("late record from %s[%d] (%s) for a window already finalized; counted, not reopened",
                        topic, partition, _describe(msg))
        return holds

    def _read_clock(self, msg: Any, partition: int, now_ns: int) -> None:
        stamps = event_time(msg)
        r = reading(type(msg).__name__, partition, stamps, now_ns) if stamps is not None else None
        if r is not None:
            self.clocks.observe(r)  # the sources it evicts leave the metrics with it (metrics.py, at scrape time)
            self.metrics.tally.clock(r)

    def any_behind(self) -> bool:
        """Whether a source of any stage is behind the others of its stage (``WindowTracker.behind``)."""
        return any(s.tracker.behind() for s in self._stages())

    def _late(self) -> int:
        return sum(s.tracker.late for s in self._stages())

    def _stages(self) -> list[FlowsStage | LinksStage | FabricStage]:
        fabric = [self._fabric] if self._fabric is not None else []
        return [*self.flows.values(), *self.link_stages.values(), *fabric]

    def finalize(self, now_ns: int, unread: frozenset[tuple[str, int]] = frozenset()) -> Emitted:
        """Everything every stage can finalize now. ``unread``: the (contract topic, partition) pairs with records
        this worker has not read yet (consumer lag): their sources are not waited out by the clock (window_tracker.py).

        Only the stages that may release a window are asked (``_may_release``): with hundreds of sources per stage,
        asking every stage at every step cost more than the stages' own work.
        """
        out = Emitted()
        flows_unread = {p: _streams(FLOWS_STREAMS, p, unread) for p in self.flows}
        links_unread = {p: _streams(LINKS_STREAMS, p, unread) for p in self.link_stages}
        for p, stage in self.flows.items():
            if self._may_release(("flows", p), stage.tracker, now_ns, flows_unread[p]):
                e = stage.finalize(now_ns, flows_unread[p])
                if self._counted(e, "flows"):
                    self._dirty_flows.add(p)
                    out.extend(e)
        attr = _busy("attr", self.flows, flows_unread)
        for p, stage in self.link_stages.items():
            if self._may_release(("links", p), stage.tracker, now_ns, links_unread[p], attr):
                e = stage.finalize(now_ns, links_unread[p], attr)
                if self._counted(e, "links"):
                    self._dirty_links.add(p)
                    out.extend(e)
        if self._fabric is not None:
            groups = _busy("groups", self.link_stages, links_unread)
            fabric_unread = _streams(FABRIC_STREAMS, 0, unread)
            if self._may_release(("fabric", 0), self._fabric.tracker, now_ns, fabric_unread, groups):
                e = self._fabric.finalize(now_ns, fabric_unread, groups)
                if self._counted(e, "fabric"):
                    self._dirty_fabric = True
                    out.extend(e)
        unattributed = sum(s.unattributed.flows for s in self.flows.values())
        self.metrics.unattributed.set(unattributed)
        self.metrics.trace_disagreements.set(self.trace_disagreements())
        self.metrics.late.set(self._late())
        self.metrics.incomplete.set(sum(s.tracker.incomplete for s in self._stages()))
        self.metrics.overflowed.set(sum(s.tracker.overflowed for s in self._stages()))
        self.clocks.forget_stale(now_ns)
        return out

    def _may_release(self, key: tuple[str, int], tracker: WindowTracker, now_ns: int, unread: frozenset[str],
                     upstream: dict[str, int] | None = None) -> bool:
        """Whether a stage may release a window at ``now_ns``: its unread streams or its upstream stages' releases
        changed since it was last asked, or, given those, a record came since or its oldest window's time has come
        (``WindowTracker.next_due_ns``)."""
        asked = (unread, upstream)
        if self._asked.get(key) != asked:
            self._asked[key] = asked
            return True
        due = tracker.next_due_ns()
        return due is not None and due <= now_ns

    def _counted(self, e: Emitted, stage: str) -> bool:
        """Whether ``e`` finalized windows (counted in the metric for ``stage``)."""
        if e.windows:
            self.metrics.windows.labels(stage).inc(e.windows)
        return bool(e.windows)

    def drop_partitions(self, partitions: set[int]) -> None:
        """Forget revoked partitions: their un-acked records will be replayed by the new owner."""
        for p in partitions:
            self.flows.pop(p, None)
            self.link_stages.pop(p, None)
            self._asked.pop(("flows", p), None)
            self._asked.pop(("links", p), None)
        self.clocks.forget_partitions(partitions)

    def partitions(self) -> set[int]:
        """Partitions with a flows or links stage."""
        return set(self.flows) | set(self.link_stages)

    def drop_fabric(self) -> None:
        """Forget the fabric stage (its partition was revoked): the new owner replays its records."""
        self._fabric = None
        self._asked.pop(("fabric", 0), None)


def _streams(streams: dict[str, str], partition: int, unread: frozenset[tuple[str, int]]) -> frozenset[str]:
    """The streams (source name prefixes) of a stage's partition with records not read yet."""
    return frozenset(k for k, topic in streams.items() if (topic, partition) in unread) if unread else frozenset()


def _busy(prefix: str, stages: Mapping[int, FlowsStage | LinksStage], unread: Mapping[int, frozenset[str]]
          ) -> dict[str, int]:
    """``<prefix>:<q>`` -> the window end stage ``q`` of this worker has released, for the stages that will send
    more (window_policy.producing): their output for a later window is still to come."""
    return {f"{prefix}:{q}": s.tracker.released_up_to for q, s in stages.items()
            if producing(s.tracker.holding(), unread[q])}


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
