"""The demo's incidents: the diagnosis (stream/diagnosis/) run over the windows the output watcher folded in.

:class:`IncidentWatch` takes each window once it is complete, in order, by the rule ``flowtracer diagnose``
uses (stream/diagnosis/assembly.py: its fabric FIM sample arrived, or a grace passed), and keeps every
incident it opened; the snapshots go out through the service's publisher (stream/diagnosis/publisher.py).
:func:`incidents_section` is the summary's list (the terminal view shows the snapshots read back from the
incidents topic, demo/view_state.py), with the
jobs the pipeline names (``jobs``: the agents read each flow's job from its process's cgroup, which the simulated
hosts write) next to the simulator's job names of the affected flows (``jobs_ground_truth``, the check).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flowtracer.demo.status import Observed
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import Topology
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.stream.diagnosis.incidents import Diagnoser, Incident, State
from flowtracer.stream.diagnosis.window import FabricModel

log = logging.getLogger(__name__)
S = 1_000_000_000


@dataclass
class IncidentWatch:
    """Feeds complete windows of an :class:`Observed` to a :class:`Diagnoser`; ``incidents`` by id."""

    topology: Topology
    hop_ns: int = S
    incidents: dict[str, Incident] = field(default_factory=dict)
    done_until_ns: int = 0
    #: called with each diagnosed window's open and just-closed incidents and the window's end (ns)
    on_window: Callable[[list[Incident], int], None] | None = None

    def __post_init__(self) -> None:
        self.diagnoser = Diagnoser(FabricModel(Fabric(self.topology)))

    def advance(self, obs: Observed, final: bool = False, now_ns: int | None = None) -> None:
        """Diagnose every complete window not yet seen (all of them when ``final``); call under the watcher's lock.
        ``now_ns``: the clock ``Observed.add`` stamped records with (monotonic ns, default now)."""
        now_ns = time.monotonic_ns() if now_ns is None else now_ns
        for view, _how in obs.assembler.complete(now_ns, final, behind=obs.behind):
            end = view.end_ns
            view.hop_ns = self.hop_ns
            now = self.diagnoser.window(view)
            for inc in now:
                self.incidents[inc.id] = inc
            if now and self.on_window is not None:
                self.on_window(now, end)
            self.done_until_ns = end

    def open(self) -> list[Incident]:
        return sorted((i for i in self.incidents.values() if i.state is State.OPEN), key=lambda i: i.start_ns)


def incidents_section(watch: IncidentWatch, gt: GroundTruth | None) -> list[dict[str, Any]]:
    """Every incident of the run: kind, suspects with scores and evidence, times (s after the simulator's
    start), affected flows, hosts, jobs and the collectives it slowed (the pipeline's), its consequences (a pause
    storm's paused links and stopped hosts), and the simulator's jobs of those flows."""
    jobs: dict[str, str] = {}
    if gt is not None:
        jobs = {f"{f.src_nic}>{f.dst_nic}": f.job for f in gt.flows.values()}
    start = gt.start_ns if gt is not None else 0

    def rel(ns: int) -> float | None:
        return round((ns - start) / S, 1) if ns and start else None

    out = []
    for inc in sorted(watch.incidents.values(), key=lambda i: i.start_ns):
        out.append({"id": inc.id, "kind": inc.kind, "state": str(inc.state),
                    "suspects": [{"component": c, "score": round(sc, 3), "evidence": list(inc.evidence.get(c, ()))}
                                 for c, sc in inc.ranked()[:5]],
                    "start_ns": inc.start_ns, "detected_ns": inc.detected_ns, "end_ns": inc.end_ns or None,
                    "start_s": rel(inc.start_ns), "detected_s": rel(inc.detected_ns), "end_s": rel(inc.end_ns),
                    "windows": inc.windows, "flows": sorted(inc.flows), "hosts": sorted(inc.hosts),
                    "jobs": sorted(inc.jobs), "collectives": sorted(inc.collectives),
                    "consequences": {"paused_links": sorted(inc.paused_links),
                                     "stopped_hosts": sorted(inc.stopped_hosts)},
                    "jobs_ground_truth": sorted({jobs[f] for f in inc.flows if f in jobs})})
    return out
