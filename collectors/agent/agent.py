"""The agent loop: wall-clock aligned windows, one FlowBatch per host and leaf, into Kafka.

Every ``interval`` the agent waits for the next boundary of the source's clock (multiples of the
interval since the Unix epoch, so every host's windows and the switch samples line up), samples
every host the source reads *as of that boundary*, and sends each host's batches keyed by leaf
(``flowtracer.flows.v1``, key = leaf name; docs/schemas.md). The first sample is a baseline. A
host whose sample failed gets no batch; its next batch spans from its last good boundary. When
the agent falls more than one interval behind, it skips to the latest boundary and the next
window covers the gap (still aligned, longer than one interval). A read that raises inside the
source costs that part of one window (``sources/guard.py``), and a ``sample()`` that raises as a
whole costs one window, as does a host's sample that makes its pipeline raise (parts ``prepare`` and
``window``: that host only): counted in ``flowtracer_agent_source_failures_total{part}``, logged once
per cause, and the agent goes on.

Why one module over 400 lines: a window is one sequence over one state (the hosts' pipelines, their last good
boundaries, the counters): waiting for the boundary (all hosts, or each as its data lands with a ``PerHostSource``),
step 1 per host, step 2 across hosts, the metrics.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from google.protobuf.json_format import MessageToDict
from prometheus_client import Counter, Gauge, Histogram

from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.host_pipeline import HostPipeline
from flowtracer.collectors.agent.host_window import HostSample, PipelineConfig, WindowStats
from flowtracer.collectors.agent.peers.exchange import PeerExchange
from flowtracer.collectors.agent.peers.matching import PeerDirectory
from flowtracer.collectors.agent.sources.guard import PartGuard
from flowtracer.collectors.agent.sources.inventory import Inventory
from flowtracer.collectors.agent.sources.nccl_shapes import merge_counts
from flowtracer.collectors.agent.sources.registry import FlowSource, PerHostSource
from flowtracer.collectors.agent.tracing.plan import TraceFlow
from flowtracer.collectors.agent.tracing.tracer import Tracer
from flowtracer.collectors.agent.tracing.wiring import dst_leaves, trace_flows
from flowtracer.collectors.self_metrics import SelfMetrics
from flowtracer.fabric.topology import Topology
from flowtracer.schemas.topics import DEFAULT_PARTITIONS, PATH_TRACES
from flowtracer.schemas.topics import key as topic_key
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.schemas.v1 import traces_pb2 as tpb

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where batches go: ``KafkaSink`` or ``StdoutSink``."""

    def send(self, topic: str, key: bytes, value: bytes | None, partition: int | None = None) -> None: ...

    def flush(self, timeout: float | None = None) -> bool: ...

    def close(self, timeout: float = 10.0) -> None: ...


class StdoutSink:
    """Writes each FlowBatch as one JSON line (for trying the agent without Kafka)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def send(self, topic: str, key: bytes, value: bytes | None, partition: int | None = None) -> None:
        kind = tpb.PathTrace if topic == PATH_TRACES.name else pb.FlowBatch
        msg = None if value is None else kind.FromString(value)
        rec = {"topic": topic, "key": key.decode(), "value": None if msg is None else MessageToDict(msg)}
        if partition is not None:
            rec["partition"] = partition
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    def partitions_for(self, topic: str) -> int:
        """Stdout has no topics: the contract's default partition count."""
        return DEFAULT_PARTITIONS

    def flush(self, timeout: float | None = None) -> bool:
        return True

    def close(self, timeout: float = 10.0) -> None:
        pass


@dataclass
class AgentMetrics:
    """The agent's own Prometheus instruments."""

    windows: Counter
    batches: Counter
    flows: Counter
    malformed: Counter
    unresolved: Counter
    sample_errors: Counter
    source_failures: Counter
    window_seconds: Histogram
    lag_seconds: Gauge
    hosts: Gauge
    peer_hosts: Gauge
    peer_published: Counter
    peer_malformed: Counter
    nccl_forgotten: Gauge
    nccl_unknown: Counter

    @classmethod
    def create(cls, m: SelfMetrics) -> AgentMetrics:
        r = m.registry
        return cls(
            windows=Counter("flowtracer_agent_windows", "Windows completed.", registry=r),
            batches=Counter("flowtracer_agent_batches", "FlowBatches sent to the sink.", registry=r),
            flows=Counter("flowtracer_agent_flows", "Flow records sent, by byte source.", ["byte_source"], registry=r),
            malformed=Counter("flowtracer_agent_malformed_records", "Input records skipped as malformed.",
                              registry=r),
            unresolved=Counter("flowtracer_agent_unresolved_dst", "Flows sent without a destination IP.",
                               registry=r),
            sample_errors=Counter("flowtracer_agent_sample_errors", "Host samples that could not be read.",
                                  registry=r),
            source_failures=Counter("flowtracer_agent_source_failures", "Reads of one part of a source (rdma_qp, "
                                    "rdma_stat, sysfs, nccl_log, snapshot, sample) that raised; the part is "
                                    "missing for that window.", ["part"], registry=r),
            window_seconds=Histogram("flowtracer_agent_window_seconds", "CPU-side time to sample and build "
                                     "one window (s).", registry=r,
                                     buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)),
            lag_seconds=Gauge("flowtracer_agent_lag_seconds", "How far behind its boundary the last window "
                              "was sent (s).", registry=r),
            hosts=Gauge("flowtracer_agent_hosts", "Hosts this agent reports for.", registry=r),
            peer_hosts=Gauge("flowtracer_agent_peer_hosts", "Other hosts whose QP ends this agent holds.",
                             registry=r),
            peer_published=Counter("flowtracer_agent_peer_tables_published", "QP tables published for the other "
                                   "agents.", registry=r),
            peer_malformed=Counter("flowtracer_agent_peer_tables_malformed", "QP tables of other hosts skipped as "
                                   "malformed.", registry=r),
            nccl_forgotten=Gauge("flowtracer_agent_nccl_forgotten", "NCCL log state forgotten by its bounds "
                                 "(cumulative): processes, communicators, queued sends, QP tags and collective calls "
                                 "over their limits, tags of QPs gone.", ["what"], registry=r),
            nccl_unknown=Counter("flowtracer_agent_nccl_unknown_lines", "NCCL log lines not understood, by shape "
                                 "(docs/agent.md): an unknown format, numbers out of bounds, or an unknown launcher "
                                 "prefix (that line is still read).", ["shape"], registry=r),
        )


@dataclass
class RunStats:
    """What a run did (returned by ``Agent.run``; also the /healthz details)."""

    windows: int = 0
    batches: int = 0
    flows: int = 0
    malformed: int = 0
    #: Failed reads by source part (``PartGuard``): the part was missing for that window.
    source_failures: dict[str, int] = field(default_factory=dict)
    last_window_end_ns: int = 0
    per_host: dict[str, int] = field(default_factory=dict)


#: How often the agent looks whether more hosts' data for the boundary exists (s).
POLL_S = 0.01


@dataclass
class _Round:
    """One window in the making: the hosts prepared so far (each with the agent's wall clock at its read, ns) and
    the QP ends they added."""

    boundary: int
    peers: PeerDirectory = field(default_factory=PeerDirectory)
    prepared: list[tuple[HostSample, int]] = field(default_factory=list)
    published: int = 0


class Agent:
    """Samples a source every window and sends FlowBatches to a sink.

    ``on_batch`` (optional) sees every batch after it is handed to the sink (tests, demo).
    ``exchange`` (optional) publishes this agent's QP ends and supplies the other hosts'.
    ``tracer`` (optional) is told every window's flows and traces their paths (docs/tracing.md).
    """

    def __init__(self, cfg: AgentConfig, source: FlowSource, sink: Sink, topology: Topology | None = None,
                 metrics: SelfMetrics | None = None,
                 on_batch: Callable[[Any], None] | None = None, exchange: PeerExchange | None = None,
                 tracer: Tracer | None = None) -> None:
        self.cfg = cfg
        self.tracer = tracer
        self._dst_leaf = dst_leaves(topology)
        self.exchange = exchange
        self._peer_malformed = 0
        self._nccl_shapes: dict[str, int] = {}  # NCCL unknown-line counts already exported, by shape
        self._nccl_labelled: set[str] = set()  # NCCL shapes exported under a label of their own, for good
        self._unknown_before: set[tuple[str, str, int, int, int]] = set()  # QPs whose peer was unknown
        self.source = source
        # The source boundary: a source whose sample() raises costs this window, not the agent.
        self._guard = PartGuard("agent")
        self._guards = [self._guard, *([g] if isinstance(g := getattr(source, "guard", None), PartGuard) else [])]
        self.sink = sink
        self.inventory = Inventory(topology)
        self.on_batch = on_batch
        self.metrics = AgentMetrics.create(metrics) if metrics is not None else None
        pc = PipelineConfig(agent_id=cfg.agent_id, default_mtu=cfg.default_mtu,
                            frame_overhead=cfg.frame_overhead_bytes, initial_psn=cfg.initial_psn, dscp=cfg.dscp,
                            job_id=cfg.job_id, nccl_zone=cfg.nccl_log_timezone)
        self._pc = pc
        self.pipelines = {h: HostPipeline(h, self.inventory, pc) for h in source.hosts()}
        self._last_ok: dict[str, int] = {}
        self.stats = RunStats()
        if self.metrics is not None:
            self.metrics.hosts.set(len(self.pipelines))

    def health(self) -> tuple[bool, dict[str, Any]]:
        """/healthz: healthy while windows keep completing (within three intervals)."""
        last = self.stats.last_window_end_ns
        late = last and (self.source.now_ns() - last) > 3 * self.cfg.interval_ns
        return (not late), {"windows": self.stats.windows, "last_window_end_ns": last, "hosts": len(self.pipelines)}

    def run(self, stop: threading.Event) -> RunStats:
        """Run until ``stop`` is set (or ``max_windows`` windows are done)."""
        interval = self.cfg.interval_ns
        boundary = -(-self.source.now_ns() // interval) * interval  # the next boundary, or now if on one
        while not stop.is_set():
            if isinstance(self.source, PerHostSource):
                if not self.window_as_ready(boundary, stop):
                    break
            else:
                if not self.source.wait_until(boundary, stop):
                    break
                self.window(boundary)
            if self.cfg.max_windows and self.stats.windows >= self.cfg.max_windows:
                break
            boundary += interval
            now = self.source.now_ns()
            if now >= boundary + interval:
                skipped = (now - boundary) // interval
                log.warning("agent fell %d windows behind; the next window covers the gap", skipped)
                boundary += skipped * interval
        return self.stats

    def window(self, boundary: int) -> None:
        """Sample every host as of ``boundary`` and send the batches of the windows ending there."""
        t0 = time.perf_counter()
        rnd = _Round(boundary)
        self._prepare(rnd, self._guard.read("sample", lambda: self.source.sample(boundary), []))
        self._finish(rnd, time.perf_counter() - t0)

    def window_as_ready(self, boundary: int, stop: threading.Event) -> bool:
        """``window`` for a ``PerHostSource``: each host is read and prepared as soon as its data for ``boundary``
        exists (step 1 needs no other host), the windows are built and sent once every host is in or not waited
        for (step 2 matches QPs across hosts, so it needs them all). False when ``stop`` was set first."""
        src = self.source
        assert isinstance(src, PerHostSource)
        rnd = _Round(boundary)
        pending = set(src.hosts())
        busy = 0.0  # the agent's own time, not its waits (``window_seconds``)
        while pending:
            ready, gone = self._guard.read("sample", lambda: src.poll(boundary, pending), ([], list(pending)))
            pending.difference_update(ready, gone)
            if ready:
                t0 = time.perf_counter()
                self._prepare(rnd, self._guard.read("sample", lambda r=ready: src.sample_hosts(boundary, r), []))
                busy += time.perf_counter() - t0
            elif pending and stop.wait(POLL_S):
                return False
        if stop.is_set():
            return False
        t0 = time.perf_counter()
        self._finish(rnd, busy + time.perf_counter() - t0)
        return True

    def _prepare(self, rnd: _Round, samples: list[HostSample]) -> None:
        """Step 1 for each of ``samples``: the host's addresses, NCCL lines and QP ends (published to the other
        agents when they are exchanged)."""
        # The agent's wall clock at the read (not the source's, which is the simulator's for ``sim``): the
        # processor compares the batches' window ends with it to show each host's clock skew.
        read_ns = time.time_ns()
        ex = self.exchange
        for s in samples:
            p = self.pipelines.get(s.host)
            if p is None:
                p = self.pipelines[s.host] = HostPipeline(s.host, self.inventory, self._pc)
            try:
                p.prepare(s, rnd.peers)
            except Exception as e:  # the boundary: a host's sample that trips a bug costs its window, never the agent
                self._guard.fail("prepare", e)
                continue
            rnd.prepared.append((s, read_ns))
            if ex is not None and p.qp_ends is not None:
                rnd.published += ex.publish(s.host, p.qp_ends, rnd.boundary)

    def _finish(self, rnd: _Round, busy_s: float) -> None:
        """Step 2: every prepared host's window, matched against all the hosts' QP ends, sent; then the metrics.
        ``busy_s``: the time the agent spent on this window so far (s)."""
        t0 = time.perf_counter()
        boundary, peers = rnd.boundary, rnd.peers
        ex = self.exchange
        if ex is not None:
            version = ex.remote.version  # what the directory below holds, at least
            peers.remote = ex.directory(boundary)
            self._await_peers(ex, peers, boundary, version)
        sent = 0
        seen = set()
        traced: list[TraceFlow] = []
        for s, read_ns in rnd.prepared:
            seen.add(s.host)
            start = self._last_ok.get(s.host, boundary)
            try:
                batches, ws = self.pipelines[s.host].window_encoded(s, start, boundary, peers, read_ns)
            except Exception as e:  # the same boundary: no batch for the host; its next window spans the gap
                self._guard.fail("window", e)
                continue
            self._last_ok[s.host] = boundary
            for b in batches:
                self.sink.send(self.cfg.topic, topic_key(b.leaf or b.host), b.value)
                if self.on_batch is not None or self.tracer is not None:
                    msg = pb.FlowBatch.FromString(b.value)
                    if self.on_batch is not None:
                        self.on_batch(msg)
                    if self.tracer is not None:
                        traced += trace_flows(msg, self._dst_leaf)
            sent += len(batches)
            self._count(ws, len(batches))
        if self.tracer is not None and traced:
            self.tracer.observe(traced)
        self._count_failures()
        if self.metrics is not None:
            missing = len(set(self.pipelines) - seen)
            if missing:
                self.metrics.sample_errors.inc(missing)
            self.metrics.window_seconds.observe(busy_s + time.perf_counter() - t0)
            logs = [p.nccl for p in self.pipelines.values()]
            for what in ("pids", "qps", "comms", "sends", "tags"):
                self.metrics.nccl_forgotten.labels(what).set(sum(getattr(n, f"forgotten_{what}") for n in logs))
            self.metrics.nccl_forgotten.labels("calls").set(sum(p.collectives.dropped for p in self.pipelines.values()))
            shapes = merge_counts([p.nccl.shapes for p in self.pipelines.values()], labelled=self._nccl_labelled)
            for shape, n in shapes.items():
                if n > self._nccl_shapes.get(shape, 0):
                    self.metrics.nccl_unknown.labels(shape).inc(n - self._nccl_shapes.get(shape, 0))
            self._nccl_shapes = shapes
            self.metrics.lag_seconds.set(max(0, self.source.now_ns() - boundary) / 1e9)
            self.metrics.windows.inc()
            if ex is not None:
                self.metrics.peer_hosts.set(len(ex.remote.seen()))
                self.metrics.peer_published.inc(rnd.published)
                self.metrics.peer_malformed.inc(ex.remote.malformed - self._peer_malformed)
                self._peer_malformed = ex.remote.malformed
        if sent:
            self.stats.windows += 1
        elif not self.stats.windows:
            log.info("baseline taken at %d ns for %d host(s)", boundary, len(rnd.prepared))
        self.stats.last_window_end_ns = boundary

    def _await_peers(self, ex: PeerExchange, peers: PeerDirectory, boundary: int, version: int) -> None:
        """When QPs appeared whose peer no table names yet, wait (up to ``peer_wait``, at most half
        an interval) for the other agents' tables of this boundary, so that a new connection's
        first window has its dst_ip too. QPs that stay unknown (a peer without an agent) cost a
        wait only in the window they appear in."""
        unknown = self._unknown_peers(peers)
        new = unknown - self._unknown_before
        wait_s = min(self.cfg.peer_wait.total_seconds(), self.cfg.interval.total_seconds() / 2)
        deadline = time.monotonic() + wait_s
        while new and ex.remote.wait_newer(version, deadline - time.monotonic()):
            version = ex.remote.version
            peers.remote = ex.directory(boundary)
            unknown = self._unknown_peers(peers)
            new &= unknown
        self._unknown_before = unknown

    def _unknown_peers(self, peers: PeerDirectory) -> set[tuple[str, str, int, int, int]]:
        """(host, device, port, lqpn, rqpn) of every connected QP of this agent's hosts whose peer
        is not known."""
        out: set[tuple[str, str, int, int, int]] = set()
        for p in self.pipelines.values():
            for end, (lq, rq) in (p.qp_ends or {}).items():
                miss = peers.peers(end, lq, rq) < 0
                if miss.any():
                    out.update((end.host, end.device, end.port, a, b) for a, b in zip(lq[miss].tolist(),
                                                                                      rq[miss].tolist(), strict=True))
        return out

    def _count_failures(self) -> None:
        """Carry the guards' failure counts into ``stats`` and the metric."""
        total: dict[str, int] = {}
        for g in self._guards:
            for part, n in g.failures.items():
                total[part] = total.get(part, 0) + n
        before, self.stats.source_failures = self.stats.source_failures, total
        if self.metrics is not None:
            for part, n in total.items():
                if n > before.get(part, 0):
                    self.metrics.source_failures.labels(part).inc(n - before.get(part, 0))

    def _count(self, ws: WindowStats, batches: int) -> None:
        st = self.stats
        st.batches += batches
        st.flows += ws.flows
        st.malformed += ws.malformed
        m = self.metrics
        if m is not None:
            m.batches.inc(batches)
            m.flows.labels("qp_counter").inc(ws.exact)
            m.flows.labels("psn_estimate").inc(ws.estimated)
            m.malformed.inc(ws.malformed)
            m.unresolved.inc(ws.unresolved_dst)
