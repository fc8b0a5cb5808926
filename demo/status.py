"""What the demo learns from the processor's output topics, and the terminal status built from it.

:class:`OutputWatcher` is a thread with a kafka-python consumer on ``fim``, ``collisions``,
``link-loads`` and ``dead-letter`` (manual assignment from the beginning: no consumer group, so
nothing to rebalance on an embedded broker), and with ``Observed.watch_flows`` the agents' FlowBatches too (a
heterogeneous job's iteration time, ``whatif/iterations.py``). It folds every record into :class:`Observed`, which
is pure (tests feed it messages). The terminal view drawn from it is demo/view_state.py (``flowtracer top`` reads
any deployment's output topics into the same :class:`Observed`).

Over 400 lines as one thing: what the demo reads from the output topics and the bounded state it keeps of them (an
hour of windows, ``window_rows``), which change together.
"""

from __future__ import annotations

import logging
import statistics
import sys
import threading
import time
from array import array
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from flowtracer.demo.flow_path_table import FlowPathTable
from flowtracer.demo.window_rows import Columns, WindowRows
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, flows_pb2
from flowtracer.stream.diagnosis.assembly import TOPICS as ASSEMBLED
from flowtracer.stream.diagnosis.assembly import WindowAssembler
from flowtracer.stream.diagnosis.service import reading_behind
from flowtracer.whatif.iterations import HostSample, host_sample, job_iteration_s, progress

log = logging.getLogger(__name__)

S = 1_000_000_000
GRACE_NS = 10 * S
"""A window without a fabric FIM sample is diagnosed this long after its first record (``flowtracer diagnose``'s
default --grace)."""
BASIS = {analytics_pb2.LOAD_BASIS_MEASURED: "measured", analytics_pb2.LOAD_BASIS_ATTRIBUTED: "attributed"}
WATCHED = tuple(dict.fromkeys((topics.FIM.name, topics.COLLISIONS.name, topics.LINK_LOADS.name,
                               topics.PATH_LOADS.name, topics.DEAD_LETTER.name, topics.LINK_CONGESTION.name,
                               topics.INCIDENTS.name, topics.COLLECTIVE_PROFILE.name, topics.FLOW_PATHS.name,
                               *ASSEMBLED)))
FLOW_BATCHES_KEPT = 8192
"""With ``watch_flows``: the newest agent FlowBatches kept (16 hosts x 1 s windows: over 8 minutes)."""
KEEP_WINDOWS_S = 3600.0
"""Per-window detail (FIM samples, link and path loads, latencies) is kept for the newest hour of windows, so a
demo that runs for days holds an hour, not every window since the start (issue 27); the summary covers those."""
PRUNE_EVERY_NS = 60 * S
"""Windows older than the kept span are dropped at most once per this much window time."""
INCIDENT_IDS_KEPT = 4096
"""Incident ids whose newest state is remembered (the most recently updated), so that counting incidents read and
closed stays bounded over days; an id forgotten and read again counts again."""
INCIDENT_STALE_S = 600.0
"""An open incident with no snapshot for this long (window time) is dropped from the open ones and counted as
stale: the diagnosis that owned it stopped or lost it, and it would otherwise stay open on screen forever."""


class _RowsByWindow(dict[int, WindowRows]):
    """window end ns -> :class:`WindowRows`, created on first use over one shared :class:`Columns`."""

    def __init__(self, columns: Columns) -> None:
        super().__init__()
        self.columns = columns

    def __missing__(self, end: int) -> WindowRows:
        rows = self[end] = WindowRows(self.columns)
        return rows


def keyed_rows(ints: tuple[bool, ...]) -> dict[int, WindowRows]:
    """An empty window end -> rows map whose windows share one column table (``ints``: the int fields)."""
    return _RowsByWindow(Columns(ints))


@dataclass
class CollisionSeen:
    """One (group, shared member) collision over the run. Times are window ends, ns."""

    group: str
    switch: str
    link: str
    idle_link: str
    first_end_ns: int
    last_end_ns: int
    windows: int = 0
    max_link_utilization: float = 0.0
    min_idle_utilization: float = 1.0
    #: windows whose harm could be judged (Collision.harm_basis set), and those judged harmful
    judged_windows: int = 0
    harmful_windows: int = 0
    #: (src_ip, dst_ip, udp_src_port) -> flow details (job, collective, comm, hosts, max bytes in a hop)
    flows: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)


@dataclass
class Observed:
    """Everything the demo has read from the output topics (pure: ``add`` takes topic, value, Kafka time)."""

    #: fabric FIM: window end ns -> basis -> fim
    fabric_fim: dict[int, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    #: newest measured FIM per ECMP group: group -> (window end ns, fim)
    group_fim: dict[str, tuple[int, float]] = field(default_factory=dict)
    collisions: dict[tuple[str, str], CollisionSeen] = field(default_factory=dict)
    #: window end ns -> measured bytes over switch-to-switch links (leaf uplinks and spine downlinks)
    fabric_bytes: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    #: window end ns -> measured bytes per directed link (switch-to-switch links only)
    link_bytes: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    #: window end ns -> switches that measured at least one link
    switches: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    #: per LinkLoad: its window end ns, and seconds from the window's end (the switch sample instant) to the record
    #: reaching Kafka (two flat arrays: 16 bytes a sample, not a tuple's ~100)
    latency_ends: array[int] = field(default_factory=lambda: array("q"))
    latency_s: array[float] = field(default_factory=lambda: array("d"))
    dead_letters: int = 0
    dead_letter_reasons: list[str] = field(default_factory=list)
    records: int = 0
    newest_end_ns: int = 0
    #: window end ns -> directed link -> (measured, attributed, unexplained) bytes, every link with a trusted delta
    #: (packed rows over one shared column table: demo/window_rows.py)
    link_loads: dict[int, WindowRows] = field(default_factory=lambda: keyed_rows((True, True, True)))
    #: window end ns -> path id -> (bytes placed, bytes placed by traces, confidence 0..1)
    path_loads: dict[int, WindowRows] = field(default_factory=lambda: keyed_rows((True, True, False)))
    #: resolver names the outputs carry; placement methods of the flows in collisions (method -> flow-windows)
    resolvers: set[str] = field(default_factory=set)
    collision_methods: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: the lowest Collision.confidence seen per (group, shared member)
    collision_confidence: dict[tuple[str, str], float] = field(default_factory=dict)
    #: the topology's switch names (to tell switch-to-switch links and measuring switches)
    switch_names: frozenset[str] = frozenset()
    undecodable: int = 0
    #: incident id -> newest state read back from the incidents topic ("open" / "closed"), the newest
    #: :data:`INCIDENT_IDS_KEPT` ids (insertion order is update order)
    incident_states: dict[str, str] = field(default_factory=dict)
    #: distinct incident ids read, closed, and dropped as stale (see :data:`INCIDENT_STALE_S`)
    incidents_read: int = 0
    incidents_closed: int = 0
    incidents_stale: int = 0
    #: incident id -> newest snapshot of each incident still open (the terminal view's incidents)
    open_incidents: dict[str, analytics_pb2.Incident] = field(default_factory=dict)
    #: each flow's published path and its changes (the per-flow score, demo/scoring.py)
    paths: FlowPathTable = field(default_factory=FlowPathTable)
    #: the diagnosis's windows, by the service's own assembly rule (demo/incidents.py takes the complete ones)
    assembler: WindowAssembler = field(default_factory=lambda: WindowAssembler(S, GRACE_NS))
    #: whether the watcher's last poll left records unread on some partition (no window completes meanwhile)
    behind: bool = False
    #: also read the agents' FlowBatches (a job's iteration time from NCCL opCounts: heterogeneous jobs)
    watch_flows: bool = False
    #: collectives per training iteration of the watched job (its ops' counts summed)
    ops_per_iteration: int = 1
    flow_batches: deque[flows_pb2.FlowBatch] = field(default_factory=lambda: deque(maxlen=FLOW_BATCHES_KEPT))
    host_samples: deque[HostSample] = field(default_factory=lambda: deque(maxlen=FLOW_BATCHES_KEPT))
    #: per-window detail older than this many ns before the newest window end is dropped (:data:`KEEP_WINDOWS_S`)
    keep_ns: int = round(KEEP_WINDOWS_S * S)
    #: windows ending before this were dropped (0: none yet); the newest window end of any per-window record
    pruned_before_ns: int = 0
    newest_any_ns: int = 0
    #: the next prune happens at the first window ending at or after this, ns
    next_prune_ns: int = 0

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics this observer folds in."""
        return WATCHED + ((topics.FLOWS.name,) if self.watch_flows else ())

    def add(self, topic: str, value: bytes | None, kafka_ts_ms: int, now_ns: int | None = None) -> None:
        """Fold one output record in; a record that does not decode is counted, never raised. ``now_ns``: when
        it arrived (monotonic ns, the diagnosis's grace clock; default now)."""
        if topic == topics.FLOWS.name:  # the agents' input to the pipeline, not one of its outputs
            try:
                batch = flows_pb2.FlowBatch.FromString(value or b"")
            except Exception:
                self.undecodable += 1
                return
            self.flow_batches.append(batch)
            self.host_samples.append(host_sample(batch))
            return
        self.records += 1
        if topic in ASSEMBLED:
            self.assembler.add(topic, value, time.monotonic_ns() if now_ns is None else now_ns)
        try:
            if topic == topics.FIM.name:
                self._fim(analytics_pb2.FimSample.FromString(value or b""))
            elif topic == topics.COLLISIONS.name:
                self._collision(analytics_pb2.Collision.FromString(value or b""))
            elif topic == topics.LINK_LOADS.name:
                self._link_load(analytics_pb2.LinkLoad.FromString(value or b""), kafka_ts_ms)
            elif topic == topics.PATH_LOADS.name:
                pl = analytics_pb2.PathLoad.FromString(value or b"")
                self.path_loads[pl.window_end_ns][pl.path_id] = (pl.bytes, pl.traced_bytes, pl.confidence)
                self._advance(pl.window_end_ns)
                if pl.resolver:
                    self.resolvers.add(pl.resolver)
            elif topic == topics.FLOW_PATHS.name:
                self.paths.add(topic, value, kafka_ts_ms)
            elif topic == topics.INCIDENTS.name:
                self._incident(analytics_pb2.Incident.FromString(value or b""))
            elif topic == topics.DEAD_LETTER.name:
                dl = analytics_pb2.DeadLetter.FromString(value or b"")
                self.dead_letters += 1
                if len(self.dead_letter_reasons) < 10:
                    self.dead_letter_reasons.append(f"{dl.topic}[{dl.partition}]@{dl.offset}: {dl.reason}")
        except Exception:  # a status display must not die on one odd record
            self.undecodable += 1

    def _incident(self, inc: analytics_pb2.Incident) -> None:
        """Fold one incident snapshot in: the open ones by id, counts of distinct ids read and closed."""
        before = self.incident_states.pop(inc.id, None)
        self.incident_states[inc.id] = inc.state
        if len(self.incident_states) > INCIDENT_IDS_KEPT:
            del self.incident_states[next(iter(self.incident_states))]
        self.incidents_read += before is None
        if inc.state == "open":
            self.open_incidents[inc.id] = inc
        else:
            self.incidents_closed += before in (None, "open")
            self.open_incidents.pop(inc.id, None)

    def drop_stale_incidents(self, newest_end_ns: int) -> None:
        """Drop open incidents whose newest snapshot ends :data:`INCIDENT_STALE_S` or more before
        ``newest_end_ns`` (ns), counting them in ``incidents_stale``."""
        cutoff = newest_end_ns - round(INCIDENT_STALE_S * S)
        for iid in [i for i, inc in self.open_incidents.items() if inc.window_end_ns < cutoff]:
            del self.open_incidents[iid]
            self.incidents_stale += 1

    def _advance(self, end_ns: int) -> None:
        """Note a window end; drop per-window detail older than ``keep_ns`` (at most once per PRUNE_EVERY_NS)."""
        if end_ns <= self.newest_any_ns:
            return
        self.newest_any_ns = end_ns
        if end_ns < self.next_prune_ns:
            return
        self.next_prune_ns = end_ns + PRUNE_EVERY_NS
        cutoff = end_ns - self.keep_ns
        dropped = 0
        for per_window in (self.fabric_fim, self.fabric_bytes, self.link_bytes, self.switches, self.link_loads,
                           self.path_loads):
            for end in [e for e in per_window if e < cutoff]:
                del per_window[end]
                dropped += 1
        keep = next((i for i, e in enumerate(self.latency_ends) if e >= cutoff), len(self.latency_ends))
        del self.latency_ends[:keep]
        del self.latency_s[:keep]
        if dropped or keep:
            self.pruned_before_ns = cutoff
        self.drop_stale_incidents(end_ns)
        self.paths.forget_ended(cutoff)

    def _fim(self, f: analytics_pb2.FimSample) -> None:
        basis = BASIS.get(f.basis)
        if basis is None:
            return
        if f.group == "fabric":
            self.fabric_fim[f.window_end_ns][basis] = f.fim
            self.newest_end_ns = max(self.newest_end_ns, f.window_end_ns)
            self._advance(f.window_end_ns)
        elif basis == "measured":
            old = self.group_fim.get(f.group)
            if old is None or f.window_end_ns >= old[0]:
                self.group_fim[f.group] = (f.window_end_ns, f.fim)

    def _collision(self, c: analytics_pb2.Collision) -> None:
        key = (c.group, c.link)
        seen = self.collisions.get(key)
        if seen is None:
            seen = self.collisions[key] = CollisionSeen(c.group, c.switch, c.link, c.idle_link, c.window_end_ns,
                                                        c.window_end_ns)
        seen.windows += 1
        seen.first_end_ns = min(seen.first_end_ns, c.window_end_ns)
        seen.last_end_ns = max(seen.last_end_ns, c.window_end_ns)
        seen.max_link_utilization = max(seen.max_link_utilization, c.link_utilization)
        seen.min_idle_utilization = min(seen.min_idle_utilization, c.idle_utilization)
        seen.judged_windows += bool(c.harm_basis)
        seen.harmful_windows += c.harmful
        self.collision_confidence[key] = min(self.collision_confidence.get(key, 1.0), c.confidence)
        for f in c.flows:
            k = (f.key.src_ip, f.key.dst_ip, f.key.udp_src_port)
            d = seen.flows.setdefault(k, {"src_ip": f.key.src_ip, "dst_ip": f.key.dst_ip,
                                          "udp_src_port": f.key.udp_src_port, "src_host": f.src_host,
                                          "dst_host": f.dst_host, "job_id": f.job_id, "collective": f.collective,
                                          "comm_id": f.comm_id, "max_bytes_per_hop": 0, "windows": 0})
            d["max_bytes_per_hop"] = max(d["max_bytes_per_hop"], f.bytes)
            self.collision_methods[f.method or "unknown"] += 1
            d["windows"] += 1
            d["collective"] = d["collective"] or f.collective
            d["job_id"] = d["job_id"] or f.job_id

    def _link_load(self, ll: analytics_pb2.LinkLoad, kafka_ts_ms: int) -> None:
        self._advance(ll.window_end_ns)
        if kafka_ts_ms > 0:
            self.latency_ends.append(ll.window_end_ns)
            self.latency_s.append(kafka_ts_ms / 1e3 - ll.window_end_ns / 1e9)
        if ll.resolver:
            self.resolvers.add(ll.resolver)
        if not ll.measured_valid:
            return
        link = sys.intern(ll.link)  # one string per link, not one per record
        self.link_loads[ll.window_end_ns][ll.link] = (ll.measured_bytes, ll.attributed_bytes, ll.unexplained_bytes)
        # The switch that measures a link: its transmitter, or the leaf a host transmits to.
        measurer = ll.src_node if ll.src_node in self.switch_names else ll.dst_node
        self.switches[ll.window_end_ns].add(sys.intern(measurer))
        if ll.src_node in self.switch_names and ll.dst_node in self.switch_names:
            self.fabric_bytes[ll.window_end_ns] += ll.measured_bytes
            self.link_bytes[ll.window_end_ns][link] = ll.measured_bytes

    # -- views ----------------------------------------------------------------------------------

    def latest_fabric(self) -> tuple[int, dict[str, float]] | None:
        """(window end ns, {basis: fim}) of the newest fabric sample."""
        if not self.fabric_fim:
            return None
        end = max(self.fabric_fim)
        return end, dict(self.fabric_fim[end])

    def current_collisions(self, hops: int = 3) -> list[CollisionSeen]:
        """Collisions seen within ``hops`` windows of the newest one, hottest first."""
        newest = max((c.last_end_ns for c in self.collisions.values()), default=0)
        now = [c for c in self.collisions.values() if c.last_end_ns > newest - hops * S]
        return sorted(now, key=lambda c: (-c.max_link_utilization, c.group))

    def recent_iteration_s(self, span_ns: int = 10 * S) -> float | None:
        """The busiest job's iteration time over the newest ``span_ns`` of agent windows, from NCCL opCounts."""
        if not self.host_samples:
            return None
        newest = max(s.end_ns for s in self.host_samples)
        return job_iteration_s(list(progress(self.host_samples, self.ops_per_iteration, newest - span_ns).values()))

    def latency_stats(self, from_end_ns: int = 0) -> dict[str, float | int | None]:
        """p50 / p99 / max seconds from switch sample instant (window end) to the LinkLoad in Kafka,
        over windows ending at or after ``from_end_ns``."""
        xs = sorted(v for end, v in zip(self.latency_ends, self.latency_s, strict=True) if end >= from_end_ns)
        if not xs:
            return {"p50_s": None, "p99_s": None, "max_s": None, "samples": 0}
        return {"p50_s": round(statistics.median(xs), 3), "p99_s": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], 3),
                "max_s": round(xs[-1], 3), "samples": len(xs)}


class Folds(Protocol):
    """What an :class:`OutputWatcher` folds records into: :class:`Observed`, or a narrower reader's state."""

    behind: bool

    @property
    def topics(self) -> tuple[str, ...]: ...

    def add(self, topic: str, value: bytes | None, kafka_ts_ms: int, now_ns: int | None = None) -> None: ...


F = TypeVar("F", bound=Folds)


class OutputWatcher(threading.Thread, Generic[F]):
    """Consumes the output topics into an :class:`Observed` (or another :class:`Folds`) until stopped. ``lock``
    guards ``observed``."""

    def __init__(self, bootstrap: str, observed: F | None = None, poll_ms: int = 300,
                 client_config: Mapping[str, Any] | None = None, since_s: float | None = None,
                 client_id: str = "flowtracer-demo-status", whole: frozenset[str] = frozenset()) -> None:
        super().__init__(name="demo-output-watcher", daemon=True)
        self.bootstrap = bootstrap
        #: read from this many seconds ago (by record time), None from the beginning
        self.since_s = since_s
        #: topics read from the beginning even with ``since_s``: compacted ones whose records are state, not events
        self.whole = whole
        self.client_id = client_id
        #: Extra KafkaConsumer settings (TLS/SASL: ``schemas.kafka_security.kafka_python_kwargs``).
        self.client_config = dict(client_config or {})
        self.observed: F = observed if observed is not None else Observed()  # type: ignore[assignment]
        self.lock = threading.Lock()
        self.poll_ms = poll_ms
        self._stop_event = threading.Event()
        self.error: str | None = None
        self.last_record_monotonic = time.monotonic()
        #: whether the last poll found every partition fetched and nothing left unread (set by the reader thread)
        self.caught_up = False

    def run(self) -> None:
        try:
            from kafka import KafkaConsumer, TopicPartition

            consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, group_id=None,
                                     client_id=self.client_id, auto_offset_reset="earliest",
                                     **self.client_config)
        except Exception as e:  # the demo goes on without a live status
            self.error = f"cannot consume the output topics: {e}"
            return
        try:
            parts = []
            deadline = time.monotonic() + 30
            for t in self.observed.topics:
                ps = consumer.partitions_for_topic(t)
                while not ps and time.monotonic() < deadline and not self._stop_event.is_set():
                    time.sleep(0.5)
                    ps = consumer.partitions_for_topic(t)
                parts += [TopicPartition(t, p) for p in sorted(ps or ())]
            consumer.assign(parts)  # no group: nothing joins, nothing is committed
            self._seek(consumer, parts)
            while not self._stop_event.is_set():
                self._poll(consumer, parts)
        except Exception as e:
            self.error = f"output watcher stopped: {type(e).__name__}: {e}"
            log.warning("%s", self.error)
        finally:
            consumer.close()

    def _seek(self, consumer: Any, parts: list[Any]) -> None:
        """To the beginning, or to the first record of the last ``since_s`` seconds (a partition with none: its
        end; a broker that cannot look offsets up by time: the beginning)."""
        whole = [p for p in parts if p.topic in self.whole]
        if whole:
            consumer.seek_to_beginning(*whole)
        parts = [p for p in parts if p.topic not in self.whole]
        if self.since_s is None or not parts:
            if parts:
                consumer.seek_to_beginning(*parts)
            return
        want_ms = int((time.time() - self.since_s) * 1e3)
        try:
            found = consumer.offsets_for_times({p: want_ms for p in parts})
        except Exception as e:  # e.g. an old broker: the whole retention, slower but complete
            log.info("offsets by time unavailable (%s); reading from the beginning", e)
            consumer.seek_to_beginning(*parts)
            return
        at_end = []
        for p in parts:
            hit = found.get(p)
            if hit is None:
                at_end.append(p)
            else:
                consumer.seek(p, hit.offset)
        if at_end:
            consumer.seek_to_end(*at_end)

    def _poll(self, consumer: Any, parts: list[Any]) -> int:
        batch = consumer.poll(timeout_ms=self.poll_ms)
        behind = reading_behind(consumer, parts)
        # Read to the end once every partition was fetched (its high watermark known) and none is behind: the
        # fetch's watermark, not ListOffsets (which the embedded broker gets wrong, DEVELOPERS.md).
        self.caught_up = not behind and all(consumer.highwater(tp) is not None for tp in parts)
        n = 0
        with self.lock:
            self.observed.behind = behind
            for records in batch.values():
                for r in records:
                    self.observed.add(r.topic, r.value, r.timestamp if r.timestamp_type == 0 else 0)
                    n += 1
        if n:
            self.last_record_monotonic = time.monotonic()
        return n

    def drain(self, quiet_s: float = 2.0, max_s: float = 15.0) -> None:
        """Wait until no record arrived for ``quiet_s`` (the processor's last outputs), then stop."""
        deadline = time.monotonic() + max_s
        while self.is_alive() and time.monotonic() < deadline:
            if time.monotonic() - self.last_record_monotonic >= quiet_s:
                break
            time.sleep(0.2)
        self.stop()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)
