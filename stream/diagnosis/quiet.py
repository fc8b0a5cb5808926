"""The quiet period after a failure: which groups and links its transient covers, and until when.

When a link goes down or dead, or a switch goes silent, flows rehash around it: for a while the resolver's
placements are stale (unexplained bytes) and the rolling FIM remembers the detour, so unexplained bytes, high
FIM and collisions there are not symptoms of their own. That transient belongs to the groups the failure
affects, and it happens once:

* when the failure **starts** (a link is failing now and was not in the previous window; a switch turns silent),
  its links (both directions of the cable; every link of a silent switch) and every ECMP group they are members
  of are quiet for ``windows`` windows from then;
* so are the links the flows that moved in a window left or moved to, and their groups (the traffic the rehash
  shifted: another leaf's group toward the failed cable's spine, a spine's downlink);
* a failure that lasts starts nothing new: its quiet period ends ``windows`` windows after it began, and a
  collision the rehash created is a symptom from then on, like any other. Other groups are never quiet.

Pure; :class:`~flowtracer.stream.diagnosis.symptoms.SymptomDetector` holds one and asks :meth:`holds` of each
symptom.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flowtracer.stream.diagnosis.failure_blame import FAILING
from flowtracer.stream.diagnosis.window import FabricModel, WindowView, cable_of

if TYPE_CHECKING:  # the symptoms module imports this one; a symptom is only read here
    from flowtracer.stream.diagnosis.symptoms import Symptom

HELD = frozenset({"unexplained", "fim_high", "collision"})
"""Symptom kinds the quiet period holds back: on a link (unexplained) or an ECMP group (fim_high, collision)."""


@dataclass
class FailureQuiet:
    """Quiet periods per link and group (module docstring); ``windows``: a period's length in windows."""

    model: FabricModel
    windows: int
    #: links failing in the previous window, and switches silent in it
    failing: frozenset[str] = frozenset()
    silent: frozenset[str] = frozenset()
    #: link id or ECMP group id -> end of the last window of its quiet period, ns
    until: dict[str, int] = field(default_factory=dict)

    def update(self, view: WindowView, symptoms: list[Symptom], moved_links: set[str]) -> None:
        """Start the quiet periods of the failures that began in ``view`` and of the flows that moved in it."""
        failing = frozenset(s.subject for s in symptoms if s.kind in FAILING)
        silent = frozenset(s.subject for s in symptoms if s.kind == "switch_silent")
        links: set[str] = set(moved_links)
        for lk in failing - self.failing:
            cable = cable_of(lk)
            links |= {x for x in (lk, _reverse(lk)) if cable_of(x) == cable and x in self.model.fabric.links}
        for sw in silent - self.silent:
            links |= set(self.model.switch_links.get(sw, ()))
        self.failing, self.silent = failing, silent
        if not links:
            return
        end = view.end_ns + self.windows * view.hop_ns
        covered = links | {g for lk in links for g in self.model.groups_of_link.get(lk, ())}
        for x in covered:
            self.until[x] = max(self.until.get(x, 0), end)
        # forget periods that are over (the map stays as small as the failures of the last few windows)
        self.until = {x: t for x, t in self.until.items() if t >= view.end_ns}

    def holds(self, s: Symptom, end_ns: int) -> bool:
        """Whether symptom ``s`` of the window ending at ``end_ns`` (ns) falls in a quiet period."""
        return s.kind in HELD and self.until.get(s.subject, 0) >= end_ns


def _reverse(link: str) -> str:
    tx, _, rx = link.partition(">")
    return f"{rx}>{tx}"
