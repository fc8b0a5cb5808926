"""The ``flowtracer-16`` reproduction's analysis (pure): FlowTracer's ECMP-vs-static comparison and beyond.

Input: one recording of the simulated 16-node fabric running two NCCL ring all-reduce jobs one
after the other (``phases``): ranks in leaf order, then ranks in an order that ignores the leaves.
For each phase and each set of link conditions (healthy, one uplink degraded, that uplink failed):

- every strategy of ``FIXED`` replayed once (ECMP with the configured hash is the baseline);
- ECMP over ``seeds`` hash seeds, and ECMP, E-ECMP and QP scaling over ``draws`` QP numberings (a
  job restart gives every QP new numbers, so new UDP source ports: the run-to-run variation an
  operator sees);
- the FIM reduction of static pinning against every ECMP draw, next to FlowTracer's 30%.

Everything returned is JSON-able through ``Experiment.to_dict`` and rendered by
``flowtracer16_page`` (Markdown) and ``flowtracer.whatif.figures`` (figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flowtracer.fabric.routing import Fabric
from flowtracer.whatif.fabric import Conditions, ReplayFabric, parse_conditions
from flowtracer.whatif.record import Recording, Window
from flowtracer.whatif.replay import Measured, ReplayResult, Traffic, measured, replay
from flowtracer.whatif.routes import FlowDemand, demands
from flowtracer.whatif.strategies import parse_strategy, route_all

NAME = "flowtracer-16"
#: FlowTracer's headline: a static configuration cut the imbalance metric 30% against ECMP.
PAPER_REDUCTION = 0.30
#: The cable the degraded and failed conditions act on: leaf01's uplink to spine01.
CABLE = "leaf01:Ethernet5"
DEGRADED_FRACTION = 0.5
#: Static pinning as FlowTracer's static configuration: oblivious (by destination ordinal) and tuned on the traffic.
STATICS = ("static-dst", "static-dst:by=traffic")
FIXED = ("ecmp", *STATICS, "sport-plan", "qp-scale:n=4", "e-ecmp", "spray", "spray-adaptive", "least-utilized")
#: Below this ECMP FIM there is nothing to reduce: a relative reduction is not defined.
MIN_FIM = 0.01
#: A static configuration counts as better than an ECMP run when it reduces the FIM by more than this
#: (small flows such as clear-to-send streams move the FIM by a few 1e-4 either way).
BETTER = 0.01
DRAWN = ("ecmp", "e-ecmp", "qp-scale:n=4")


@dataclass
class Phase:
    """The windows in which one communicator (one job) ran alone."""

    key: str
    title: str
    comm_id: str
    windows: list[Window]

    @property
    def from_ns(self) -> int:
        return self.windows[0].start_ns

    @property
    def to_ns(self) -> int:
        return self.windows[-1].end_ns


def split_phases(windows: Sequence[Window], names: Sequence[tuple[str, str]], trim: int = 1) -> list[Phase]:
    """One Phase per communicator, in the order they first carried bytes, named from ``names`` ((key, title)).

    A phase holds the windows in which only that communicator's flows moved bytes, less ``trim``
    windows at each end (QP set-up, a partly filled first or last window).
    """
    order: list[str] = []
    for w in windows:
        for f in w.flows:
            if f.comm_id and f.comm_id not in order:
                order.append(f.comm_id)
    phases = []
    for (key, title), comm in zip(names, order, strict=False):
        own = [w for w in windows if {f.comm_id for f in w.flows if f.comm_id} == {comm}]
        own = own[trim:len(own) - trim] if len(own) > 2 * trim else []
        if own:
            phases.append(Phase(key, title, comm, own))
    return phases


def standard_conditions(fabric: Fabric) -> list[Conditions]:
    """Healthy; ``CABLE`` at ``DEGRADED_FRACTION`` of its capacity; ``CABLE`` failed."""
    return [Conditions(), parse_conditions(fabric, degrade=[f"{CABLE}={DEGRADED_FRACTION}"]),
            parse_conditions(fabric, fail=[CABLE])]


def stats(values: Sequence[float] | np.ndarray) -> dict[str, float | int]:
    """min, quartiles, max, mean and count of the finite values."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"n": 0}
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    return {"n": int(x.size), "min": float(x.min()), "q1": float(q1), "median": float(med), "q3": float(q3),
            "max": float(x.max()), "mean": float(x.mean())}


def reduction(before: float, after: float) -> float | None:
    """Relative FIM reduction 1 - after/before; None when there was nothing to reduce (before < MIN_FIM)."""
    return None if before < MIN_FIM else 1.0 - after / before


def _span(values: Sequence[int]) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def traffic_shape(windows: Sequence[Window], fabric: Fabric, heavy_share: float = 0.01) -> dict[str, Any]:
    """How a phase's heavy flows (at least ``heavy_share`` of the biggest flow's bytes) leave the leaves.

    ``offered_per_uplink_capacity``: the most, over leaves, of what the leaf's NICs can send across the
    fabric (each NIC's line rate x its share of bytes going to other leaves) over the leaf's uplink
    capacity: above 1 the uplinks, not the NICs, bound the job.
    """
    total: dict[tuple[str, str], int] = {}
    for w in windows:
        for f in w.flows:
            total[(f.src_nic, f.dst_nic)] = total.get((f.src_nic, f.dst_nic), 0) + f.bytes
    per_flow: dict[str, int] = {}
    for w in windows:
        for f in w.flows:
            per_flow[f.flow_id] = per_flow.get(f.flow_id, 0) + f.bytes
    biggest = max(per_flow.values(), default=0)
    heavy = {fid for fid, b in per_flow.items() if b >= heavy_share * biggest}
    flows: dict[str, set[str]] = {}
    dests: dict[str, set[str]] = {}
    nic_bytes: dict[str, list[int]] = {}
    seen: dict[str, tuple[str, str]] = {}
    for w in windows:
        for f in w.flows:
            if f.flow_id in heavy:
                seen[f.flow_id] = (f.src_nic, f.dst_nic)
    for fid, (src, dst) in seen.items():
        src_leaf, dst_leaf = fabric.nics[src].leaf, fabric.nics[dst].leaf
        cross = src_leaf != dst_leaf
        nb = nic_bytes.setdefault(src, [0, 0])
        nb[0] += per_flow[fid]
        nb[1] += per_flow[fid] if cross else 0
        if cross:
            flows.setdefault(src_leaf, set()).add(fid)
            dests.setdefault(src_leaf, set()).add(dst)
    offered: dict[str, float] = {}
    for nic, (all_b, cross_b) in nic_bytes.items():
        ref = fabric.nics[nic]
        if all_b:
            offered[ref.leaf] = offered.get(ref.leaf, 0.0) + ref.nic.speed * cross_b / all_b
    ratio = 0.0
    for leaf, bps in offered.items():
        up = sum(o.speed_bps for o in fabric.out_links[leaf] if not o.host_link)
        if up:
            ratio = max(ratio, bps / up)
    leaves = sorted(flows)
    return {"flows_per_leaf": _span([len(flows[x]) for x in leaves]) if leaves else "0",
            "destinations_per_leaf": _span([len(dests[x]) for x in leaves]) if leaves else "0",
            "offered_per_uplink_capacity": ratio}


@dataclass
class Cell:
    """One phase under one set of conditions."""

    conditions: str
    fixed: list[ReplayResult]
    seeds_fim: list[float]
    seeds_time: list[float]
    draws: dict[str, dict[str, list[float]]]  # strategy -> {"fim": [...], "completion_s": [...]}
    static_reduction: dict[str, list[float | None]]  # static variant -> reduction against each ECMP draw

    def result(self, strategy: str) -> ReplayResult:
        return next(r for r in self.fixed if r.strategy == strategy)

    def to_dict(self) -> dict[str, Any]:
        base = self.result("ecmp")
        statics = {}
        for name, reds in self.static_reduction.items():
            red = [r for r in reds if r is not None]
            fim = self.result(name).fim
            statics[name] = {
                "fim": fim, "vs_baseline": reduction(base.fim, fim),
                "vs_draws": {**stats(red), "undefined": len(reds) - len(red),
                             "share_better": float(np.mean([r > BETTER for r in red])) if red else None,
                             "share_at_least_paper": float(np.mean([r >= PAPER_REDUCTION for r in red]))
                             if red else None},
                "vs_mean_ecmp": reduction(float(np.mean(self.draws["ecmp"]["fim"])), fim)}
        return {
            "conditions": self.conditions,
            "fixed": [r.summary() for r in self.fixed],
            "seeds": {"fim": stats(self.seeds_fim), "completion_s": stats(self.seeds_time),
                      "distinct_fim": len({round(v, 3) for v in self.seeds_fim})},
            "draws": {s: {k: stats(v) for k, v in d.items()} for s, d in self.draws.items()},
            "statics": statics,
        }


@dataclass
class PhaseResult:
    phase: Phase
    measured: Measured
    baseline_healthy: ReplayResult
    cells: list[Cell] = field(default_factory=list)
    flows: int = 0
    bytes: float = 0.0
    shape: dict[str, Any] = field(default_factory=dict)


@dataclass
class Experiment:
    phases: list[PhaseResult]
    draws: int
    seeds: int
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"experiment": NAME, "paper_reduction": PAPER_REDUCTION, "draws": self.draws, "seeds": self.seeds,
                **self.meta,
                "phases": [{"key": p.phase.key, "title": p.phase.title, "from_ns": p.phase.from_ns,
                            "to_ns": p.phase.to_ns, "windows": len(p.phase.windows), "flows": p.flows,
                            "bytes": p.bytes, "shape": p.shape,
                            "measured": {"fim": p.measured.fim, "max_util": p.measured.max_util,
                                         "group_fim": p.measured.group_fim},
                            "replayed_ecmp_fim": p.baseline_healthy.fim,
                            "replayed_group_fim": p.baseline_healthy.group_fim,
                            "cells": [c.to_dict() for c in p.cells]} for p in self.phases]}


def analyse(recording: Recording, fabric: Fabric, phases: Sequence[Phase], draws: int = 100, seeds: int = 100,
            conditions: Sequence[Conditions] | None = None) -> Experiment:
    """Run every replay of the reproduction (module docstring)."""
    conds = list(conditions) if conditions is not None else standard_conditions(fabric)
    out = []
    for ph in phases:
        traffic = Traffic.of(ph.windows)
        flows = demands(ph.windows)
        rec = recording.select(ph.windows[0].end_ns - 1, ph.to_ns)
        healthy = ReplayFabric(fabric)
        base = replay(traffic, route_all(parse_strategy("ecmp"), flows, healthy), healthy, "ecmp")
        pr = PhaseResult(ph, measured(rec, healthy), base, flows=len(flows), bytes=float(traffic.bytes.sum()),
                         shape=traffic_shape(ph.windows, fabric))
        pr.cells = [_cell(traffic, flows, ReplayFabric(fabric, c), draws, seeds) for c in conds]
        out.append(pr)
    return Experiment(out, draws, seeds)


def _cell(traffic: Traffic, flows: Sequence[FlowDemand], rf: ReplayFabric, draws: int, seeds: int) -> Cell:
    cache: dict[bytes, float] = {}

    def run(label: str) -> ReplayResult:
        spec = parse_strategy(label)
        return replay(traffic, route_all(spec, flows, rf), rf, spec.label, time_cache=cache)

    fixed = [run(s) for s in FIXED]
    seed_runs = [run(f"ecmp:seed={s}") for s in range(seeds)]
    drawn: dict[str, dict[str, list[float]]] = {}
    for s in DRAWN:
        sep = "," if ":" in s else ":"
        runs = [fixed[FIXED.index(s)]] + [run(f"{s}{sep}draw={d}") for d in range(1, draws)]
        drawn[s] = {"fim": [r.fim for r in runs], "completion_s": [r.completion_s for r in runs]}
    reds = {s: [reduction(f, fixed[FIXED.index(s)].fim) for f in drawn["ecmp"]["fim"]] for s in STATICS}
    return Cell(rf.conditions.label, fixed, [r.fim for r in seed_runs], [r.completion_s for r in seed_runs], drawn,
                reds)
