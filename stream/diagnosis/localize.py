"""SCOUT-style localization: which components explain a window's symptoms (a greedy minimum set cover).

Components (shared risk groups) and the observations that depend on each, from the topology:

| component | id | depends on it |
| --- | --- | --- |
| cable | ``cable:<end>~<end>`` | its two directed links |
| switch | ``switch:<name>`` | the switch itself, every link it sends or receives on |
| hash configuration | ``hash:<switch>`` | the switch's ECMP groups and their member links |
| ECMP group | ``group:<id>`` | the group and its member links |
| host agent | ``agent:<host>`` | the host |
| congestion point | ``port:<link>`` | the directed link (its egress queue) |

An observation is an entity with symptoms (a link, a group, a switch, a host). Each symptom kind
explains a component type with a weight (``WEIGHTS``: how well a fault of that type produces it).

Scoring of a component c over the observations O not yet explained::

    score(c) = sum over o in O depending on c of max over o's symptoms s of WEIGHTS[type c][kind s]
               x (0.5 + 0.5 x hit ratio(c))

hit ratio(c) = observations of c with a symptom / observations that depend on c (SCOUT's hit ratio:
a cable whose both directions are sick beats a switch with one sick link out of twenty). Greedy: take
the best component, mark what it explains, repeat while a component scores at least ``MIN_SCORE``.
Each pick is a :class:`Hypothesis`; its suspects are every component that explains any of the same
observations, ranked by the same score over them, the pick first.

Causes before symptoms: before the cover, PFC pause storms are taken out (pause_storms.py): each is one
``pause_storm`` hypothesis with the pause's origin on top and its paused links, stopped hosts and the links they
left quiet as its symptoms. A host whose traffic stopped is never a hypothesis on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from flowtracer.stream.diagnosis.pause_storms import Storm, storms
from flowtracer.stream.diagnosis.symptoms import Kind, Symptom
from flowtracer.stream.diagnosis.window import FabricModel, cable_of

WEIGHTS: dict[str, dict[Kind, float]] = {
    # a dead direction weighs 0.35: a cut cable kills both (0.7 at hit ratio 1), while a link that only lost
    # its traffic to a failure elsewhere (flows rehashed away) is one direction (0.26, under MIN_SCORE); a flow
    # moves off a path when a cable on it fails (or its switch): the flows that left a cable vote for it
    # a link its switch reports down is the cable's signature (1.0); a rebooting switch takes its neighbours' ports
    # toward it down, so they also vote for the switch (0.5)
    "cable": {Kind.CAPACITY_LOSS: 1.0, Kind.LINK_DOWN: 1.0, Kind.LINK_DEAD: 0.35, Kind.PATH_MOVED: 0.5,
              Kind.UNEXPLAINED: 0.3, Kind.HOTSPOT: 0.2, Kind.FIM_HIGH: 0.2},
    "switch": {Kind.SWITCH_SILENT: 1.0, Kind.LINK_DOWN: 0.5, Kind.PATH_MOVED: 0.3, Kind.LINK_DEAD: 0.2,
               Kind.CAPACITY_LOSS: 0.2, Kind.UNEXPLAINED: 0.2},
    "hash": {Kind.UNEXPLAINED: 1.0, Kind.FIM_HIGH: 0.6, Kind.COLLISION: 0.6},
    "group": {Kind.FIM_HIGH: 1.0, Kind.COLLISION: 1.0, Kind.UNEXPLAINED: 0.6},
    "agent": {Kind.AGENT_MISSING: 1.0},
    "port": {Kind.HOTSPOT: 1.0, Kind.CAPACITY_LOSS: 0.2},
    # a NIC that cannot move its line rate (PCIe-limited, a firmware cap, a slower part) queues its host link
    # like a degraded cable does: the switch's counters cannot tell the two apart, so the NIC is ranked just
    # below the cable, never above it
    "nic": {Kind.CAPACITY_LOSS: 0.9},
}
"""How well a fault of each component type explains each symptom kind (0: not at all, 1: its signature)."""

MIN_SCORE = 0.3
"""A component scoring less explains too little to be reported."""

SIGNATURE: dict[str, frozenset[Kind]] = {
    "cable": frozenset({Kind.CAPACITY_LOSS, Kind.LINK_DOWN, Kind.LINK_DEAD}),
    "switch": frozenset({Kind.SWITCH_SILENT}),
    "hash": frozenset({Kind.UNEXPLAINED}),
    "group": frozenset({Kind.FIM_HIGH, Kind.COLLISION}),
    "agent": frozenset({Kind.AGENT_MISSING}),
    "port": frozenset({Kind.HOTSPOT}),
    "nic": frozenset({Kind.CAPACITY_LOSS}),
}
"""A component is only picked when what it explains includes one of its own symptoms (a switch with dead
links but counters that still report is not a silent switch)."""


class IncidentKind:
    """Incident kinds (strings on the wire)."""

    DEGRADED_LINK = "degraded_link"
    FAILED_LINK = "failed_link"
    HASH_MISCONFIGURATION = "hash_misconfiguration"
    SWITCH_SILENT = "switch_silent_or_rebooted"
    AGENT_MISSING = "agent_missing"
    PERSISTENT_IMBALANCE = "persistent_imbalance"
    CONGESTION_HOTSPOT = "congestion_hotspot"
    PAUSE_STORM = "pause_storm"


@dataclass(frozen=True)
class Suspect:
    """A component that could explain a hypothesis' symptoms, with its score and why."""

    component: str
    score: float
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Hypothesis:
    """One component of the cover: the incident kind it means, its suspects (best first), its symptoms."""

    kind: str
    suspects: tuple[Suspect, ...]
    symptoms: tuple[Symptom, ...]

    @property
    def component(self) -> str:
        return self.suspects[0].component


def _obs_id(s: Symptom) -> str:
    kind = {Kind.FIM_HIGH: "group", Kind.COLLISION: "group", Kind.SWITCH_SILENT: "switch",
            Kind.AGENT_MISSING: "host", Kind.PATH_MOVED: "flow"}.get(s.kind, "link")
    return f"{kind}:{s.subject}"


class RiskModel:
    """Components and their dependent observations for one fabric (built once)."""

    def __init__(self, model: FabricModel) -> None:
        self.model = model
        deps: dict[str, set[str]] = {}
        for link, dl in model.fabric.links.items():
            deps.setdefault(cable_of(link), set()).add(f"link:{link}")
            deps[f"port:{link}"] = {f"link:{link}"}
            if dl.host_link:  # the NIC end of a host cable: "<host>:<rdma_device>"
                host, device = (dl.src_node, dl.src_port) if dl.src_node in model.hosts else (dl.dst_node, dl.dst_port)
                deps.setdefault(f"nic:{host}:{device}", set()).add(f"link:{link}")
        for sw, links in model.switch_links.items():
            deps[f"switch:{sw}"] = {f"switch:{sw}"} | {f"link:{lk}" for lk in links}
        for gid, (sw, members) in model.groups.items():
            deps[f"group:{gid}"] = {f"group:{gid}"} | {f"link:{m}" for m in members}
            deps.setdefault(f"hash:{sw}", set()).update(deps[f"group:{gid}"])
        for h in model.hosts:
            deps[f"agent:{h}"] = {f"host:{h}"}
        self.deps = deps
        self.by_obs: dict[str, list[str]] = {}
        for comp, obs in deps.items():
            for o in obs:
                self.by_obs.setdefault(o, []).append(comp)

    def localize(self, symptoms: Iterable[Symptom]) -> list[Hypothesis]:
        """The pause storms, then the greedy cover of the rest of one window's symptoms (module docstring)."""
        found, rest = storms(self.model, list(symptoms))
        out = [_storm_hypothesis(st) for st in found]
        sick: dict[str, list[Symptom]] = {}
        for s in rest:
            if s.kind is not Kind.TRAFFIC_STOPPED:  # a consequence or a job's own pause, never a fault alone
                sick.setdefault(_obs_id(s), []).append(s)
        if not sick:
            return out
        if not any(s.links for syms in sick.values() for s in syms):
            return out + self._cover(sick)
        saved = self.deps, self.by_obs
        try:
            self._add_flow_deps(sick)
            return out + self._cover(sick)
        finally:
            self.deps, self.by_obs = saved

    def _add_flow_deps(self, sick: dict[str, list[Symptom]]) -> None:
        """A moved flow depends on the cables (and their switches) of the links it left: this window only."""
        deps = {c: set(o) for c, o in self.deps.items()}
        by_obs = {o: list(c) for o, c in self.by_obs.items()}
        for o, syms in sick.items():
            for s in syms:
                for lk in s.links:
                    tx, _, rx = lk.partition(">")
                    comps = [cable_of(lk)] + [f"switch:{n.split(':', 1)[0]}" for n in (tx, rx)]
                    for c in comps:
                        if c in deps and o not in deps[c]:
                            deps[c].add(o)
                            by_obs.setdefault(o, []).append(c)
        self.deps, self.by_obs = deps, by_obs

    def _cover(self, sick: dict[str, list[Symptom]]) -> list[Hypothesis]:
        candidates = sorted({c for o in sick for c in self.by_obs.get(o, ())})
        left = set(sick)
        out = []
        while left and candidates:
            scored = [(self._score(c, left, sick), c) for c in candidates]
            best_score, best = max(scored, key=lambda x: (x[0], _prior(x[1]), x[1]))
            if best_score < MIN_SCORE:
                break
            explained = {o for o in self.deps[best] & left if _weight(best, sick[o]) > 0}
            # the links those flows left are quiet because of this component: their dead links are its too
            explained |= {f"link:{lk}" for o in explained for s in sick[o] for lk in s.links
                          if f"link:{lk}" in left and all(x.kind is Kind.LINK_DEAD for x in sick[f"link:{lk}"])}
            if not any(s.kind in SIGNATURE[_type(best)] for o in explained for s in sick[o]):
                candidates.remove(best)
                continue
            ranked = sorted(((self._score(c, explained, sick), c) for c in candidates
                             if self.deps[c] & explained), key=lambda x: (-x[0], -_prior(x[1]), x[1]))
            suspects = tuple(Suspect(c, round(sc, 4), self._evidence(c, explained, sick)) for sc, c in ranked
                             if sc > 0)
            syms = tuple(s for o in sorted(explained) for s in sick[o])
            out.append(Hypothesis(_kind(best, syms), suspects, syms))
            left -= explained
        return out

    def _score(self, comp: str, obs: set[str], sick: dict[str, list[Symptom]]) -> float:
        deps = self.deps[comp]
        mine = deps & obs
        if not mine:
            return 0.0
        covered = sum(_weight(comp, sick[o]) for o in mine)
        hit = len(deps & sick.keys()) / len(deps)
        return covered * (0.5 + 0.5 * hit)

    def _evidence(self, comp: str, obs: set[str], sick: dict[str, list[Symptom]]) -> tuple[str, ...]:
        return tuple(f"{s.kind} {s.subject}: {s.detail}" for o in sorted(self.deps[comp] & obs)
                     for s in sick[o] if WEIGHTS[_type(comp)].get(s.kind, 0) > 0)


EVIDENCE_LINES = 8
"""Lines of paused links a storm's origin lists (the tree can be the whole fabric); the rest are counted."""


def _storm_hypothesis(st: Storm) -> Hypothesis:
    lines = [f"{s.kind} {s.subject}: {s.detail}" for s in st.paused[:EVIDENCE_LINES]]
    if len(st.paused) > EVIDENCE_LINES:
        lines.append(f"... and {len(st.paused) - EVIDENCE_LINES} more paused links")
    hosts = [s.subject for s in st.consequences if s.kind is Kind.TRAFFIC_STOPPED]
    if hosts:
        lines.append(f"{len(hosts)} hosts stopped sending: {', '.join(sorted(hosts)[:EVIDENCE_LINES])}"
                     + (", ..." if len(hosts) > EVIDENCE_LINES else ""))
    evidence = tuple(lines)
    suspects = tuple(Suspect(c, round(sc, 4), evidence if i == 0 else (f"cable of {st.origin}",))
                     for i, (c, sc) in enumerate(st.suspects))
    return Hypothesis(IncidentKind.PAUSE_STORM, suspects, st.paused + st.consequences)


def _type(comp: str) -> str:
    return comp.split(":", 1)[0]


def _weight(comp: str, syms: list[Symptom]) -> float:
    w = WEIGHTS[_type(comp)]
    return max((w.get(s.kind, 0.0) for s in syms), default=0.0)


def _prior(comp: str) -> int:
    """Tie-break: the smaller component first (a cable before a switch), as SCOUT prefers."""
    return {"port": 5, "cable": 4, "nic": 4, "agent": 4, "group": 3, "hash": 2, "switch": 1}[_type(comp)]


def _kind(comp: str, syms: tuple[Symptom, ...]) -> str:
    t = _type(comp)
    kinds = {s.kind for s in syms}
    if t == "nic":
        return IncidentKind.DEGRADED_LINK
    if t == "cable":
        return IncidentKind.FAILED_LINK if kinds & {Kind.LINK_DOWN, Kind.LINK_DEAD} else IncidentKind.DEGRADED_LINK
    return {"switch": IncidentKind.SWITCH_SILENT, "hash": IncidentKind.HASH_MISCONFIGURATION,
            "group": IncidentKind.PERSISTENT_IMBALANCE, "agent": IncidentKind.AGENT_MISSING,
            "port": IncidentKind.CONGESTION_HOTSPOT}[t]
