"""PRIME's scenarios on the packet-level spraying model (pure): permutation traffic on a healthy fabric, with one
uplink degraded, with one uplink failed, and mixed ordered/unordered traffic; and the comparison with the paper.

PRIME's reported figures (its evaluation against other packet-spraying schemes): about +15% throughput on
permutation traffic and about -27% tail (p99) latency under link degradation. ``compare`` computes the
same two ratios from this model: PRIME against the best and the worst of the other spraying kinds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flowtracer.whatif.spray_paths import KINDS
from flowtracer.whatif.spray_sim import Flow, LeafSpine, LinkFaults, SprayResult, Transport, simulate

#: PRIME's reported improvements over other spraying schemes.
PAPER_THROUGHPUT_GAIN = 0.15
PAPER_TAIL_REDUCTION = 0.27
DEGRADED_FRACTION = 0.5
#: The failed scenario's link fails this many slots into the run; routing withdraws it ``Transport.detect`` later.
FAIL_SLOT = 32


@dataclass(frozen=True)
class Scenario:
    """A named set of flows and link faults on ``fabric``."""

    name: str
    fabric: LeafSpine
    flows: tuple[Flow, ...]
    faults: LinkFaults


def permutation(fabric: LeafSpine, packets: int, seed: int = 0, ordered_share: float = 0.0) -> tuple[Flow, ...]:
    """Every host sends ``packets`` to one other host on another leaf, every host receives one flow
    (a random derangement across leaves); ``ordered_share`` of the flows (every k-th) are ordered."""
    rng = np.random.default_rng(seed)
    n = fabric.hosts
    for _ in range(10_000):
        perm = rng.permutation(n)
        if all(fabric.leaf_of(i) != fabric.leaf_of(int(perm[i])) for i in range(n)):
            break
    else:  # one leaf: no cross-leaf permutation exists
        raise ValueError("permutation traffic needs at least two leaves")
    every = round(1 / ordered_share) if ordered_share > 0 else 0
    return tuple(Flow(i, int(perm[i]), packets, ordered=bool(every) and i % every == 0) for i in range(n))


def scenarios(fabric: LeafSpine | None = None, packets: int = 512, seed: int = 0) -> list[Scenario]:
    """PRIME's scenarios: healthy permutation, leaf0's uplink to spine0 at half rate, that uplink failed
    (at ``FAIL_SLOT``, withdrawn by routing
    ``Transport.detect`` slots later), and permutation with every fourth flow ordered (pinned to one path)."""
    fab = fabric or LeafSpine()
    flows = permutation(fab, packets, seed)
    up = fab.up(0, 0)
    return [
        Scenario("permutation", fab, flows, LinkFaults()),
        Scenario("degraded link", fab, flows, LinkFaults(capacity={up: DEGRADED_FRACTION},
                                                         label=f"{fab.name(up)} at {DEGRADED_FRACTION:g}")),
        Scenario("failed link", fab, flows, LinkFaults(failed={up: FAIL_SLOT},
                                                       label=f"{fab.name(up)} fails at slot {FAIL_SLOT}")),
        Scenario("mixed ordered/unordered", fab, permutation(fab, packets, seed, ordered_share=0.25),
                 LinkFaults(label="healthy, 1/4 of flows ordered")),
    ]


def run_all(items: Sequence[Scenario], kinds: Sequence[str] = KINDS, transport: Transport | None = None,
            seeds: Sequence[int] = (0, 1, 2)) -> dict[str, dict[str, list[SprayResult]]]:
    """``{scenario: {kind: [result per seed]}}``."""
    return {sc.name: {k: [simulate(sc.fabric, sc.flows, k, sc.faults, transport, seed=s) for s in seeds]
                      for k in kinds} for sc in items}


def mean_of(results: Sequence[SprayResult], metric: str) -> float:
    """Mean over seeds of ``throughput``, ``p99`` (FCT, us), ``p50``, ``max_queue`` or ``reorder_fraction``."""
    vals = [r.fct_us(99) if metric == "p99" else r.fct_us(50) if metric == "p50" else float(getattr(r, metric))
            for r in results]
    return float(np.mean(vals))


def compare(runs: dict[str, dict[str, list[SprayResult]]]) -> list[dict[str, object]]:
    """Rows of the paper comparison: scenario, metric, the paper's figure, PRIME vs the best and the worst other."""
    rows = []
    for scenario, metric, paper in (("permutation", "throughput", PAPER_THROUGHPUT_GAIN),
                                    ("degraded link", "p99", -PAPER_TAIL_REDUCTION),
                                    ("failed link", "p99", None)):
        if scenario not in runs or "prime" not in runs[scenario]:
            continue
        prime = mean_of(runs[scenario]["prime"], metric)
        others = {k: mean_of(v, metric) for k, v in runs[scenario].items() if k != "prime"}
        if not others:
            continue
        better = max if metric == "throughput" else min
        best_k = better(others, key=lambda k: others[k])
        worst_k = (min if metric == "throughput" else max)(others, key=lambda k: others[k])
        rows.append({"scenario": scenario, "metric": "throughput" if metric == "throughput" else "FCT p99",
                     "paper": paper, "vs_best": prime / others[best_k] - 1.0, "best": best_k,
                     "vs_worst": prime / others[worst_k] - 1.0, "worst": worst_k})
    return rows


def markdown(runs: dict[str, dict[str, list[SprayResult]]]) -> str:
    """The per-scenario metrics table and the comparison with the paper, as Markdown."""
    out = ["| scenario | kind | throughput (of line rate) | FCT p50 (us) | FCT p99 (us) | max queue (packets) "
           "| reordered packets | FIM (uplinks) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for scenario, by_kind in runs.items():
        for kind, rs in by_kind.items():
            out.append(f"| {scenario} | {kind} | {mean_of(rs, 'throughput'):.3f} | {mean_of(rs, 'p50'):.1f} | "
                       f"{mean_of(rs, 'p99'):.1f} | {mean_of(rs, 'max_queue'):.0f} | "
                       f"{mean_of(rs, 'reorder_fraction'):.1%} | {mean_of(rs, 'fim'):.3f} |")
    out += ["", "| scenario | metric | paper (PRIME vs other spraying) | model: PRIME vs best other | "
            "model: PRIME vs worst other |", "| --- | --- | --- | --- | --- |"]
    for row in compare(runs):
        paper = "-" if row["paper"] is None else f"{row['paper']:+.0%}"
        out.append(f"| {row['scenario']} | {row['metric']} | {paper} | {row['vs_best']:+.1%} ({row['best']}) | "
                   f"{row['vs_worst']:+.1%} ({row['worst']}) |")
    return "\n".join(out)
