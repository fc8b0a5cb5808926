"""The terminal view's state: what ``flowtracer demo`` and ``flowtracer top`` show, built from an :class:`Observed`.

Pure: :func:`view_state` reads the output topics' folded state (demo/status.py, fed by the demo's output watcher or
by ``top``'s over any deployment) and returns a frozen :class:`ViewState`; :func:`first_seen` folds successive states
into the time each collision and incident first appeared (the view marks the newest). Rendering is
demo/view_render.py; the I/O (a redrawn screen or compact lines) demo/live_view.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flowtracer.demo.status import CollisionSeen, Observed
from flowtracer.schemas.v1 import analytics_pb2

S = 1_000_000_000
HISTORY_WINDOWS = 60
"""Fabric FIM samples kept for the sparkline: the newest minute of 1 s windows."""
CURRENT_HOPS = 3
"""A collision is current when seen within this many windows of the newest one (``Observed.current_collisions``)."""


@dataclass(frozen=True)
class CollisionRow:
    """One current collision: ``key`` is "group|link"; utilizations 0..1."""

    key: str
    group: str
    link: str
    idle_link: str
    flows: int
    utilization: float
    idle_utilization: float
    harmful: bool
    #: "src>dst:udp_sport" of up to three of its flows
    sample_flows: tuple[str, ...]


@dataclass(frozen=True)
class IncidentRow:
    """One open incident, as its newest snapshot on the incidents topic says. Times are window ends, ns."""

    id: str
    kind: str
    start_ns: int
    suspect: str
    #: the top suspect's set-cover score (summed over the incident's windows)
    score: float
    jobs: tuple[str, ...]
    flows: int
    hosts: int


@dataclass(frozen=True)
class Health:
    """The pipeline's health as the outputs show it. ``lag_s``: now minus the newest fabric window's end, s (None
    before the first); ``stages``: (name, alive) of the processes the demo runs (empty for ``top``)."""

    lag_s: float | None
    windows: int
    switches: int
    dead_letters: int
    undecodable: int
    behind: bool
    stages: tuple[tuple[str, bool], ...] = ()
    error: str | None = None

    @property
    def down(self) -> tuple[str, ...]:
        return tuple(name for name, alive in self.stages if not alive)


@dataclass(frozen=True)
class ViewState:
    """One frame of the view. ``clock``: the progress label ("12s/60s" in the demo, the wall clock in ``top``);
    ``now_ns``: wall clock, ns; FIM values 0..1; ``fim_history``: measured fabric FIM, oldest first."""

    title: str
    clock: str
    now_ns: int
    window_end_ns: int
    fim_measured: float | None
    fim_attributed: float | None
    fim_history: tuple[float, ...]
    collisions: tuple[CollisionRow, ...]
    collisions_seen: int
    incidents: tuple[IncidentRow, ...]
    incidents_closed: int
    health: Health
    #: open incidents dropped because their diagnosis stopped updating them (demo/status.py INCIDENT_STALE_S)
    incidents_stale: int = 0
    #: the watched job's iteration time over the last 10 s, ms (heterogeneous demos; None otherwise)
    iteration_ms: float | None = None


def collision_row(c: CollisionSeen) -> CollisionRow:
    flows = tuple(f"{f['src_host'] or f['src_ip']}>{f['dst_host'] or f['dst_ip']}:{f['udp_src_port']}"
                  for f in list(c.flows.values())[:3])
    return CollisionRow(f"{c.group}|{c.link}", c.group, c.link, c.idle_link, len(c.flows), c.max_link_utilization,
                        c.min_idle_utilization, c.harmful_windows > 0, flows)


def incident_row(inc: analytics_pb2.Incident) -> IncidentRow:
    top = inc.suspects[0] if inc.suspects else None
    return IncidentRow(inc.id, inc.kind, inc.start_ns, top.component if top else "", top.score if top else 0.0,
                       tuple(inc.jobs), len(inc.flows), len(inc.hosts))


def view_state(obs: Observed, title: str, clock: str, now_ns: int | None = None,
               stages: Sequence[tuple[str, bool]] = (), error: str | None = None) -> ViewState:
    """The view of ``obs`` now (``now_ns``: wall clock, ns; default now); call under the watcher's lock."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    latest = obs.latest_fabric()
    end, fim = latest if latest is not None else (0, {})
    history = tuple(v["measured"] for _, v in sorted(obs.fabric_fim.items())[-HISTORY_WINDOWS:] if "measured" in v)
    recent = [e for e in obs.switches if e > obs.newest_end_ns - CURRENT_HOPS * S]
    switches = len(set().union(*(obs.switches[e] for e in recent))) if recent else 0
    health = Health(lag_s=(now_ns - obs.newest_end_ns) / S if obs.newest_end_ns else None,
                    windows=len(obs.fabric_fim), switches=switches, dead_letters=obs.dead_letters,
                    undecodable=obs.undecodable, behind=obs.behind, stages=tuple(stages), error=error)
    open_now = sorted(obs.open_incidents.values(), key=lambda i: -i.start_ns)
    it = obs.recent_iteration_s() if obs.watch_flows else None
    return ViewState(title=title, clock=clock, now_ns=now_ns, window_end_ns=end, fim_measured=fim.get("measured"),
                     fim_attributed=fim.get("attributed"), fim_history=history,
                     collisions=tuple(collision_row(c) for c in obs.current_collisions(CURRENT_HOPS)),
                     collisions_seen=len(obs.collisions), incidents=tuple(incident_row(i) for i in open_now),
                     incidents_closed=obs.incidents_closed, incidents_stale=obs.incidents_stale,
                     health=health, iteration_ms=None if it is None else it * 1e3)


def first_seen(seen: Mapping[str, int], state: ViewState) -> dict[str, int]:
    """When each collision (by key) and open incident (by id) of ``state`` first appeared (wall clock ns), carried
    over from ``seen``; what left the view is dropped, so one that comes back is new again."""
    keys = [c.key for c in state.collisions] + [i.id for i in state.incidents]
    return {k: seen.get(k, state.now_ns) for k in keys}
