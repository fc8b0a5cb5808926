"""What a lasting failure accounts for besides its own links: placements and imbalances it forces.

While a link is down or dead, flows toward the failed cable's far end have fewer equal-cost paths: the ``hash``
resolver, which cannot know a remote failure, places some of them on the paths they no longer take (unexplained
bytes), and a group whose flows toward that end lost members is uneven without any collision (a high FIM).
:func:`blame_failures` names the failing links on those symptoms (``links``), and localization adds them to the
failed cable's observations for as long as the failure lasts. Pure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from flowtracer.stream.diagnosis.window import FabricModel, WindowView

if TYPE_CHECKING:  # the symptoms module imports this one; symptoms are only read and copied here
    from flowtracer.stream.diagnosis.symptoms import Symptom

FAILING = frozenset({"link_down", "link_dead"})
"""Symptom kinds (values of ``symptoms.Kind``) that mark a link as failing."""


def blame_failures(model: FabricModel, view: WindowView, symptoms: list[Symptom]) -> list[Symptom]:
    """Unexplained bytes on a link, or a high FIM of a group without a collision, that a NIC pair of the window
    could cross on one equal-cost path and a failing link (down or dead) on another name that failing link
    (``links``): flows rerouted around the failure, a placement that cannot know of it (a leaf whose group toward
    the failure's far end shrank), or a group whose flows toward that end have fewer members left; the failure
    explains them for as long as it lasts (localize.py adds them to its cable's observations). A collision is
    no such consequence: two heavy flows on one member while a sibling idles is an imbalance of its own."""
    failing = {s.subject for s in symptoms if s.kind in FAILING}
    if not failing or not any(s.kind in ("unexplained", "fim_high") for s in symptoms):
        return symptoms
    pairs = {(p.src_nic, p.dst_nic) for p in view.paths}
    reach = [cand for cand in (model.candidate_links(a, b) for a, b in pairs) if cand & failing]
    collided = {s.subject for s in symptoms if s.kind == "collision"}
    out = []
    for s in symptoms:
        if s.kind == "unexplained":
            mine: tuple[str, ...] = (s.subject,)
        elif s.kind == "fim_high" and s.subject not in collided:
            mine = model.groups.get(s.subject, ("", ()))[1]
        else:
            out.append(s)
            continue
        near = {lk for cand in reach if cand.intersection(mine) for lk in cand & failing}
        out.append(replace(s, links=tuple(sorted(near))) if near else s)
    return out
