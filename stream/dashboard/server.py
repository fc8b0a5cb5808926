"""Live dashboard of one processor worker, served by its Faust web server on loopback.

``flowtracer process --web-port N`` serves, at ``http://127.0.0.1:N/dashboard/``:

* the fabric drawn as spines, leaves and hosts, every cable as two directed links coloured by the
  utilization of the newest window the worker finalized for them;
* the fabric-wide FIM (measured and attributed basis) and the per-group FIM as time series;
* the collisions of the last few hops with their flows, NCCL collective, communicator and job;
* the congested links of the last few hops with their cause (collision, incast, degraded link, pause spread from
  its origin over its chain of links, unknown) and the evidence;
* the flows by job (``flows_view``: each flow's newest published path; choosing a job or a flow lists its flows
  with their hops and highlights their links on the fabric drawing, ``/dashboard/api/flows?job=`` or ``?flow=``);
* the NCCL collectives per job (``collectives_view``: each communicator's operations, sizes, calls in the newest
  window and estimated bus bandwidth, from the agents' collective profiles);
* the incidents ``flowtracer diagnose`` (or the demo) published, open first, with their top suspects
  (``incident_feed``: read back from ``flowtracer.incidents.v1``, fabric-wide whatever the worker owns);
* pipeline health: lag (now - newest finalized window end), records consumed, dead letters, late
  records, records held until durable, switches whose counters arrived, hosts whose flows arrived,
  and the switches and hosts whose clock is off (skew and transit per source, ``runtime/source_clocks``).

What it shows is what *this worker* computed: a worker owns some partitions, so with several
workers each dashboard shows the links, groups and collisions of its own partitions (plus the
fabric-wide FIM if it owns the one-partition group-FIM topic). ``flowtracer demo`` runs one worker,
which sees everything.

Data flow: the app calls every function in ``Processor.observers`` with each finalization's
:class:`~flowtracer.stream.stages.emitted.Emitted` (``DashboardState.observe``); the browser polls
``/dashboard/api/state`` (JSON) once a second, answered from ``state_cache`` (the windowed part encoded once per
finalization, not per request, on the worker's event loop). :class:`DashboardState` is pure (no Faust, no I/O)
so it is tested without servers. Assets are plain HTML/JS/CSS shipped in the package
(``assets/``); nothing is fetched from the internet. Over 400 lines because the state, the JSON the page reads and
the views that serve it are one contract, changed together.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import Role
from flowtracer.schemas.v1 import analytics_pb2, common_pb2
from flowtracer.stream.dashboard.collectives_view import CollectivesView
from flowtracer.stream.dashboard.flows_view import FlowsView
from flowtracer.stream.dashboard.state_cache import StateCache
from flowtracer.stream.runtime.source_clocks import SourceClocks
from flowtracer.stream.stages.emitted import Emitted

log = logging.getLogger(__name__)

PREFIX = "/dashboard"
"""URL prefix of every dashboard route (nothing else is served: Faust's own views are off, runtime/web.py)."""

ASSETS: dict[str, str] = {
    "index.html": "text/html",
    "dashboard.js": "application/javascript",
    "dashboard.css": "text/css",
}
"""The bundled asset files (``stream/dashboard/assets/``) and their content types: the only files served."""

BASIS_NAME = {analytics_pb2.LOAD_BASIS_MEASURED: "measured", analytics_pb2.LOAD_BASIS_ATTRIBUTED: "attributed"}
_MS = 1_000_000


def _ms(ns: int) -> int:
    return ns // _MS


@dataclass
class _CollisionSeen:
    """A collision (group, shared link) and when it was seen; ``last`` is the newest Collision."""

    last: analytics_pb2.Collision
    first_end_ns: int
    windows: int = 1


@dataclass
class DashboardState:
    """The newest results of one worker, kept in memory for the dashboard (pure, no I/O).

    Args:
        fabric: the worker's fabric (nodes, links, groups).
        hop_ns: window hop in ns.
        history: FIM samples kept per series (one per hop: 600 = 10 min at 1 s).
        collision_hops: a collision is *current* while seen within this many hops of the newest window.
        metrics: the processor's Prometheus registry (records, dead letters, ...), read for health.
        clocks: the processor's per-source clock readings (``SourceClocks``), shown in health; None: none.
        clock_ns: wall clock, ns since the epoch (tests pass their own).
    """

    fabric: Fabric
    hop_ns: int = 1_000_000_000
    history: int = 600
    collision_hops: int = 3
    metrics: Any = None
    owner: Mapping[str, str] = field(default_factory=dict)  # link id -> switch whose counters measure it
    clock_ns: Callable[[], int] = time.time_ns
    rolling_window_s: float = 10.0
    worker: str = ""
    clocks: SourceClocks | None = None
    #: the incident list (``incident_feed``): now ns -> {"list": [...], "error": str | None, "dropped": ids let go};
    #: None: not read
    incidents: Callable[[int], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        #: link id -> newest LinkLoad seen for it
        self.links: dict[str, analytics_pb2.LinkLoad] = {}
        #: (group, basis) -> deque of (window_end_ns, fim)
        self.series: dict[tuple[str, str], deque[tuple[int, float]]] = {}
        #: (group, basis) -> newest FimSample
        self.latest_fim: dict[tuple[str, str], analytics_pb2.FimSample] = {}
        self.collisions: dict[tuple[str, str], _CollisionSeen] = {}
        #: link id -> newest CongestionCause seen for it
        self.causes: dict[str, analytics_pb2.CongestionCause] = {}
        self.collectives = CollectivesView()
        self.flow_paths = FlowsView()
        self.newest_end_ns = 0
        self.windows = 0
        self.observed = 0
        self.errors = 0
        self._switches_reporting: dict[int, set[str]] = {}  # window end -> switches with measured links
        self._hosts_sending: dict[int, set[str]] = {}  # window end -> hosts whose flows were placed
        #: window end -> [placed bytes, bytes placed as sprayed flows' shares, paths carrying such shares]
        self._sprayed: dict[int, list[int]] = {}

    # -- input ----------------------------------------------------------------------------------

    def observe(self, e: Emitted) -> None:
        """Take one finalization's outputs. Never raises: a dashboard must not stop the worker."""
        try:
            self._observe(e)
        except Exception:  # pragma: no cover - defensive: log once per 100 failures
            self.errors += 1
            if self.errors % 100 == 1:
                log.exception("dashboard: could not take a finalization's outputs (processing continues)")

    def _observe(self, e: Emitted) -> None:
        self.observed += 1
        self.windows += e.windows
        for ll in e.link_loads:
            old = self.links.get(ll.link)
            if old is None or ll.window_end_ns >= old.window_end_ns:
                self.links[ll.link] = ll
            if ll.measured_valid:
                switch = self.owner.get(ll.link)
                if switch:
                    self._switches_reporting.setdefault(ll.window_end_ns, set()).add(switch)
            self._newest(ll.window_end_ns)
        for pl in e.path_loads:
            if pl.bytes > 0:
                self._hosts_sending.setdefault(pl.window_end_ns, set()).add(pl.src_host)
                w = self._sprayed.setdefault(pl.window_end_ns, [0, 0, 0])
                w[0] += pl.bytes
                w[1] += pl.sprayed_bytes
                w[2] += pl.sprayed_bytes > 0
            self._newest(pl.window_end_ns)
        for f in e.fims:
            basis = BASIS_NAME.get(f.basis)
            if basis is None:
                continue
            key = (f.group, basis)
            s = self.series.get(key)
            if s is None:
                s = self.series[key] = deque(maxlen=self.history)
            if s and s[-1][0] == f.window_end_ns:
                s[-1] = (f.window_end_ns, f.fim)  # a replay of the same window overwrites
            elif not s or s[-1][0] < f.window_end_ns:
                s.append((f.window_end_ns, f.fim))
            old_f = self.latest_fim.get(key)
            if old_f is None or f.window_end_ns >= old_f.window_end_ns:
                self.latest_fim[key] = f
            self._newest(f.window_end_ns)
        for c in e.collisions:
            key = (c.group, c.link)
            seen = self.collisions.get(key)
            if seen is None:
                self.collisions[key] = _CollisionSeen(c, c.window_end_ns)
            elif c.window_end_ns > seen.last.window_end_ns:
                seen.last = c
                seen.windows += 1
            self._newest(c.window_end_ns)
        for cc in e.congestion_causes:
            old_c = self.causes.get(cc.link)
            if old_c is None or cc.window_end_ns >= old_c.window_end_ns:
                self.causes[cc.link] = cc
            self._newest(cc.window_end_ns)
        self.collectives.observe(e.collective_profiles)
        self.flow_paths.observe(e.flow_paths)
        self._forget()

    def _newest(self, end_ns: int) -> None:
        self.newest_end_ns = max(self.newest_end_ns, end_ns)

    def _forget(self) -> None:
        keep_from = self.newest_end_ns - 10 * self.hop_ns
        for d in (self._switches_reporting, self._hosts_sending, self._sprayed):
            for end in [k for k in d if k < keep_from]:
                del d[end]

    # -- output ---------------------------------------------------------------------------------

    def topology(self) -> dict[str, Any]:
        """The fabric for drawing: rows of nodes (top tier first, hosts last) and every cable as its
        two directed links, ``up`` (towards the top tier) and ``down``."""
        topo = self.fabric.topology
        rank = {h.name: 0 for h in topo.hosts}
        rank.update({s.name: _TIER[s.role] for s in topo.switches})
        rows = [[s.name for s in topo.switches if s.role is role] for role in (Role.SUPER_SPINE, Role.SPINE, Role.LEAF)]
        hosts = [{"name": h.name, "leaves": sorted({n.leaf.split(":", 1)[0] for n in h.nics})} for h in topo.hosts]
        cables = []
        seen: set[str] = set()
        for lk in self.fabric.links.values():
            if lk.id in seen:
                continue
            seen.update((lk.id, lk.reverse_id))
            up, down = (lk.id, lk.reverse_id) if rank[lk.src_node] <= rank[lk.dst_node] else (lk.reverse_id, lk.id)
            u = self.fabric.links[up]
            cables.append({"up": up, "down": down, "lower": u.src_node, "upper": u.dst_node,
                           "host": lk.host_link, "speed_bps": lk.speed_bps})
        return {"name": topo.name, "rows": [r for r in rows if r], "hosts": hosts, "cables": cables,
                "groups": sorted(self.fabric.ecmp_groups), "hop_s": self.hop_ns / 1e9,
                "rolling_window_s": self.rolling_window_s, "worker": self.worker}

    def snapshot(self, top_groups: int = 8) -> dict[str, Any]:
        """Everything the page shows, as JSON-able data. Times in ms since the epoch."""
        now = self.clock_ns()
        return {**self.live(now), **self.windowed(top_groups)}

    def live(self, now_ns: int) -> dict[str, Any]:
        """The part of :meth:`snapshot` that moves with the clock and the counters: small, built per request."""
        return {"now_ms": _ms(now_ns), "health": self.health(now_ns),
                "incidents": self.incidents(now_ns) if self.incidents is not None else None}

    def windowed(self, top_groups: int = 8) -> dict[str, Any]:
        """The part of :meth:`snapshot` that changes only with an observed finalization (``observed``): links,
        FIM series, collisions, causes, collectives; 1.5 MB and more at 512 hosts x 8 NICs (``state_cache``)."""
        links = {}
        for lid, ll in self.links.items():
            links[lid] = {"u": round(ll.utilization, 5) if ll.measured_valid else None,
                          "mb": ll.measured_bytes if ll.measured_valid else None, "ab": ll.attributed_bytes,
                          "fc": ll.flow_count, "w": _ms(ll.window_end_ns)}
        fabric = {b: self._fim_json("fabric", b) for b in ("measured", "attributed")}
        groups = sorted({g for g, _ in self.series if g != "fabric"},
                        key=lambda g: -self._last("measured", g))
        group_json = {g: {b: self._fim_json(g, b) for b in ("measured", "attributed")} for g in groups[:top_groups]}
        current_from = self.newest_end_ns - self.collision_hops * self.hop_ns
        collisions = [self._collision_json(s) for s in sorted(
            self.collisions.values(), key=lambda s: (-s.last.window_end_ns, -s.last.link_utilization))
            if s.last.window_end_ns > current_from]
        causes = [self._cause_json(c) for c in sorted(
            self.causes.values(), key=lambda c: (c.cause == "pause_spread", c.origin, len(c.spread_links), c.link))
            if c.window_end_ns > current_from]
        # Flows without one path (method "sprayed"): the newest window's share of the placed bytes, shown as such
        sprayed = None
        if self._sprayed:
            end = max(self._sprayed)
            placed, sb, paths = self._sprayed[end]
            sprayed = {"window_end_ms": _ms(end), "bytes": sb, "placed_bytes": placed, "paths": paths}
        return {"newest_window_end_ms": _ms(self.newest_end_ns) or None, "sprayed": sprayed,
                "links": links, "fabric": fabric, "groups": group_json, "group_count": len(groups),
                "collisions": collisions, "congestion_causes": causes,
                "collectives": self.collectives.json(current_from), "jobs": self.flow_paths.jobs()}

    def _last(self, basis: str, group: str) -> float:
        s = self.series.get((group, basis))
        return s[-1][1] if s else -1.0

    def _fim_json(self, group: str, basis: str) -> dict[str, Any] | None:
        s = self.series.get((group, basis))
        f = self.latest_fim.get((group, basis))
        if not s or f is None:
            return None
        return {"fim": f.fim, "window_end_ms": _ms(f.window_end_ns), "members": f.members,
                "total_bytes": f.total_bytes, "cv": f.cv, "max_mean_ratio": f.max_mean_ratio,
                "member_links": list(f.member_links), "member_bytes": list(f.member_bytes),
                "series": [[_ms(t), round(v, 6)] for t, v in s]}

    def _collision_json(self, s: _CollisionSeen) -> dict[str, Any]:
        c = s.last
        return {"group": c.group, "switch": c.switch, "link": c.link, "link_utilization": c.link_utilization,
                "idle_link": c.idle_link, "idle_utilization": c.idle_utilization,
                "window_end_ms": _ms(c.window_end_ns), "first_seen_ms": _ms(s.first_end_ns), "windows": s.windows,
                "resolver": c.resolver, "flows": [flow_json(f) for f in c.flows],
                "harmful": c.harmful, "harm_basis": c.harm_basis, "link_ecn_marked_pkts": c.link_ecn_marked_pkts,
                "link_dropped_pkts": c.link_dropped_pkts, "link_pfc_pauses": c.link_pfc_pauses,
                "receiver_cnps": c.receiver_cnps}

    @staticmethod
    def _cause_json(c: analytics_pb2.CongestionCause) -> dict[str, Any]:
        return {"link": c.link, "cause": c.cause, "origin": c.origin, "spread_links": list(c.spread_links),
                "sibling": c.sibling, "pfc_pauses_received": c.pfc_pauses_received,
                "ecn_marked_pkts": c.ecn_marked_pkts, "dropped_pkts": c.dropped_pkts,
                "utilization": c.utilization if c.utilization >= 0 else None, "evidence": c.evidence,
                "window_end_ms": _ms(c.window_end_ns)}

    def health(self, now_ns: int) -> dict[str, Any]:
        """Lag, counts from the processor's metrics, and which switches and hosts reported recently."""
        lag = (now_ns - self.newest_end_ns) / 1e9 if self.newest_end_ns else None
        recent = [e for e in self._switches_reporting if e > self.newest_end_ns - 3 * self.hop_ns]
        switches = set().union(*(self._switches_reporting[e] for e in recent)) if recent else set()
        recent_h = [e for e in self._hosts_sending if e > self.newest_end_ns - 3 * self.hop_ns]
        hosts = set().union(*(self._hosts_sending[e] for e in recent_h)) if recent_h else set()
        all_switches = sorted(self.fabric.switch_names)
        out: dict[str, Any] = {
            "lag_s": round(lag, 3) if lag is not None else None,
            "windows": self.windows,
            "switches_reporting": len(switches), "switches_total": len(all_switches),
            "switches_silent": [s for s in all_switches if s not in switches] if switches else [],
            "hosts_sending": len(hosts), "hosts_total": len(self.fabric.topology.hosts),
            "worker": self.worker,
            # A clock off by half a hop or more puts its samples in a neighbouring window.
            "clocks": self.clocks.view(now_ns, self.hop_ns // 2) if self.clocks is not None else None,
        }
        out.update(metric_values(self.metrics))
        return out


_TIER = {Role.LEAF: 1, Role.SPINE: 2, Role.SUPER_SPINE: 3}


def flow_json(f: common_pb2.FlowRef) -> dict[str, Any]:
    """A colliding flow for the page: 5-tuple parts, hosts, job, NCCL collective and communicator, bytes."""
    return {"src_ip": f.key.src_ip, "dst_ip": f.key.dst_ip, "udp_src_port": f.key.udp_src_port,
            "src_host": f.src_host, "dst_host": f.dst_host, "job": f.job_id, "collective": f.collective,
            "comm": f.comm_id, "bytes": f.bytes}


_METRICS = {
    "records_counters": ("flowtracer_processor_records_total", {"topic": "flowtracer.counters.v1"}),
    "records_flows": ("flowtracer_processor_records_total", {"topic": "flowtracer.flows.v1"}),
    "dead_letters": ("flowtracer_processor_dead_letters_total", None),
    "late_records": ("flowtracer_processor_late_records", None),
    "pending_acks": ("flowtracer_processor_pending_acks", None),
    "unattributed_flows": ("flowtracer_processor_unattributed_flows", None),
    "windows_flows": ("flowtracer_processor_windows_total", {"stage": "flows"}),
    "windows_links": ("flowtracer_processor_windows_total", {"stage": "links"}),
    "windows_fabric": ("flowtracer_processor_windows_total", {"stage": "fabric"}),
}


def metric_values(registry: Any) -> dict[str, float | None]:
    """The processor's self-metrics the health panel shows (None when absent or no registry)."""
    if registry is None:
        return {}
    out: dict[str, float | None] = {}
    for key, (name, labels) in _METRICS.items():
        v = registry.get_sample_value(name, labels) if labels else registry.get_sample_value(name)
        out[key] = v
    return out


def load_assets(names: Iterable[str] = ASSETS) -> dict[str, bytes]:
    """The bundled asset files; a missing one is a packaging error and says which."""
    root = resources.files("flowtracer.stream.dashboard") / "assets"
    out = {}
    for name in names:
        try:
            out[name] = (root / name).read_bytes()
        except (FileNotFoundError, OSError) as e:
            raise RuntimeError(f"dashboard asset {name!r} is missing from the installed package ({e}); "
                               "reinstall flowtracer (package data stream/dashboard/assets/*)") from None
    return out


def register_dashboard(app: Any, proc: Any, prefix: str = PREFIX) -> DashboardState:
    """Add the dashboard's views to a Faust app and feed it from ``proc.observers``; returns its state.

    Routes: ``{prefix}/`` (the page), ``{prefix}/static/{name}`` (bundled assets only),
    ``{prefix}/api/topology``, ``{prefix}/api/state`` and ``{prefix}/api/flows`` (JSON). Call before the worker starts;
    the views are served when the app's web server is enabled (``web_port`` > 0).
    """
    from faust.web import View

    cfg = proc.cfg
    state = DashboardState(proc.fabric, hop_ns=cfg.hop_ns, metrics=proc.metrics.registry,
                           owner=dict(proc.links.owner), rolling_window_s=cfg.rolling_window_s,
                           worker=getattr(proc, "worker", ""), clocks=getattr(proc, "clocks", None))
    observers = getattr(proc, "observers", None)
    if observers is None:
        raise RuntimeError("this Processor has no 'observers' hook: the dashboard cannot be fed "
                           "(stream/app.py must call each of proc.observers with every published Emitted)")
    observers.append(state.observe)
    state.incidents = _incident_source(cfg)
    assets = load_assets()
    topology_json = state.topology()
    no_cache = {"Cache-Control": "no-store"}

    class Page(View):  # type: ignore[misc]
        async def get(self, request: Any) -> Any:
            return self.bytes(assets["index.html"], content_type=ASSETS["index.html"], headers=no_cache)

    class Bare(View):  # type: ignore[misc]
        async def get(self, request: Any) -> Any:  # the page's relative URLs need the trailing slash
            return self.bytes(b"", status=302, headers={"Location": f"{prefix}/", **no_cache})

    class Static(View):  # type: ignore[misc]
        async def get(self, request: Any, name: str) -> Any:
            body = assets.get(name)
            if body is None:
                return self.text(f"no dashboard asset {name!r}\n", status=404)
            return self.bytes(body, content_type=ASSETS[name], headers=no_cache)

    class Topology(View):  # type: ignore[misc]
        async def get(self, request: Any) -> Any:
            return self.json(topology_json, headers=no_cache)

    cache = StateCache(state)

    class State(View):  # type: ignore[misc]
        async def get(self, request: Any) -> Any:  # the windowed part is encoded once per finalization
            return self.bytes(cache.body(), content_type="application/json", headers=no_cache)

    app.page(f"{prefix}/", name="flowtracer-dashboard")(Page)
    app.page(prefix, name="flowtracer-dashboard-bare")(Bare)
    app.page(prefix + "/static/{name}", name="flowtracer-dashboard-static")(Static)
    app.page(f"{prefix}/api/topology", name="flowtracer-dashboard-topology")(Topology)
    class Flows(View):  # type: ignore[misc]
        async def get(self, request: Any) -> Any:  # one job's or one flow's paths, asked for when chosen
            q = request.query
            return self.json(state.flow_paths.json(q.get("job"), q.get("flow")), headers=no_cache)

    app.page(f"{prefix}/api/state", name="flowtracer-dashboard-state")(State)
    app.page(f"{prefix}/api/flows", name="flowtracer-dashboard-flows")(Flows)
    return state


def _incident_source(cfg: Any) -> Callable[[int], dict[str, Any]] | None:
    """Start the incident feed on the processor's Kafka (its security settings); None without a broker."""
    from flowtracer.plumbing.kafka_security import kafka_python_kwargs
    from flowtracer.stream.dashboard.incident_feed import IncidentFeed

    if not getattr(cfg, "kafka", None):
        return None
    feed = IncidentFeed(cfg.kafka, kafka_python_kwargs(cfg.kafka_security))
    feed.start()  # a daemon thread: it ends with the worker's process

    def source(now_ns: int) -> dict[str, Any]:
        with feed.lock:
            return {"list": feed.board.json(now_ns), "error": feed.board.error,
                    "dropped": feed.board.snapshots.dropped}

    return source
