"""Causes before symptoms: a PFC pause storm as one hypothesis, its origin first, its consequences attached.

A NIC that stops draining (or a switch port whose queue crossed Xoff) pauses its feeders, which fill and pause
theirs: every link of the tree is PFC-paused, runs at 0% with a full queue, and every job whose transfers wait on
it hangs, so its hosts stop sending and the links they used go quiet. Judged link by link those are degraded
cables, dead links and missing agents; they are one fault. The processor follows each paused link's pauses down
to where they started (CongestionCause ``pause_spread``, its ``origin``; docs/stream.md, Congestion causes), and
each ``paused`` symptom carries that origin, so:

* the ``paused`` symptoms are grouped by origin, the largest tree first; each group is one ``pause_storm``
  hypothesis whose top suspect is the origin: ``nic:<host>:<device>`` for a NIC, ``port:<link>`` for a switch port
  (its egress link); the origin's cable follows, at half the score (a bad cable can make a NIC pause too);
* its **consequences** join it instead of becoming incidents of their own: the hosts whose traffic stopped
  (``traffic_stopped``) whose last flows crossed the tree, and every stopped host of the same jobs (a collective
  couples its ranks: one stalled transfer hangs them all); and the links only those hosts' flows used that are
  now dead (``link_dead``) or queue at a crawl (``capacity_loss``).

What the storm does not explain (a collision elsewhere, a real cable failure) goes on to the set cover
(localize.py). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowtracer.stream.diagnosis.symptoms import Kind, Symptom
from flowtracer.stream.diagnosis.window import FabricModel, cable_of

CONSEQUENCES = frozenset({Kind.LINK_DEAD, Kind.CAPACITY_LOSS})
"""Link symptoms a storm explains on the links its hung hosts' flows used (the traffic that stopped)."""
CABLE_SHARE = 0.5
"""The origin's cable's score as a share of the origin's."""


@dataclass(frozen=True)
class Storm:
    """One pause storm in one window: its origin's component, the suspects' scores, and what it explains."""

    origin: str
    component: str
    suspects: tuple[tuple[str, float], ...]
    paused: tuple[Symptom, ...]
    consequences: tuple[Symptom, ...]


def origin_component(model: FabricModel, origin: str) -> str:
    """The risk-model component of a pause origin: ``nic:<host>:<device>`` or ``port:<link>`` (a switch port's
    egress link); the origin as given when the topology does not know it."""
    if origin in model.fabric.nics:
        return f"nic:{origin}"
    link = model.link_from_port.get(origin)
    return f"port:{link}" if link else f"port:{origin}"


def storms(model: FabricModel, symptoms: list[Symptom]) -> tuple[list[Storm], list[Symptom]]:
    """The window's pause storms, largest first, and the symptoms none of them explains (module docstring)."""
    paused: dict[str, list[Symptom]] = {}
    for s in symptoms:
        if s.kind is Kind.PAUSED:
            paused.setdefault(s.origin, []).append(s)
    if not paused:
        return [], symptoms
    stopped = [s for s in symptoms if s.kind is Kind.TRAFFIC_STOPPED]
    taken: set[int] = set()
    out = []
    for origin, syms in sorted(paused.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        tree = {s.subject for s in syms} | {lk for s in syms for lk in s.links}
        direct = [s for s in stopped if id(s) not in taken and tree.intersection(s.links)]
        jobs = {j for s in direct for j in s.jobs}
        hung = [s for s in stopped if id(s) not in taken and (s in direct or jobs.intersection(s.jobs))]
        quiet = {lk for s in hung for lk in s.links}
        lost = [s for s in symptoms if s.kind in CONSEQUENCES and s.subject in quiet and id(s) not in taken]
        component = origin_component(model, origin)
        score = float(len(syms))
        suspects = [(component, score)]
        link = model.link_from_port.get(origin)
        if link is not None:
            suspects.append((cable_of(link), CABLE_SHARE * score))
        consequences = tuple(hung + lost)
        taken |= {id(s) for s in (*syms, *consequences)}
        out.append(Storm(origin, component, tuple(suspects), tuple(syms), consequences))
    return out, [s for s in symptoms if id(s) not in taken]
