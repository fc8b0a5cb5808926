"""PRIME's scenarios on the packet-level spraying model (pure): permutation traffic on a healthy fabric, with one
uplink degraded, with one uplink failed, and mixed ordered/unordered traffic; and the paper's figures.

PRIME's reported figures (its evaluation against other packet-spraying schemes): up to +15% throughput on
permutation traffic and up to -27% tail (p99) latency under link degradation (``PAPER_ROWS``, with their
source); ``spray_report.compare`` computes the same ratios from a run of this model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from flowtracer.whatif.reproductions.spray_paths import KINDS
from flowtracer.whatif.reproductions.spray_sim import Flow, LeafSpine, LinkFaults, SprayResult, Transport, simulate

#: Where PRIME's figures come from: the paper's abstract ("up to 15% improvement for permutation traffic and up
#: to 27% improvement in network degradation scenarios", against other packet-spraying schemes, in the authors'
#: packet-level simulator); the 27% is read as the tail (p99) of flow completion time, as issue #21 states it.
PAPER_SOURCE = ("PRIME: Pseudo-Random Integrated Multi-Part Entropy for Adaptive Packet Spraying in AI/ML "
                "Data centers, arXiv 2507.23012 (2025), abstract")
#: PRIME's reported improvements over other spraying schemes ("up to").
PAPER_THROUGHPUT_GAIN = 0.15
PAPER_TAIL_REDUCTION = 0.27
#: The comparison's rows: scenario, the metric compared, the paper's figure (None: the paper gives no headline
#: figure for it). Throughput: higher is better; FCT p99: lower is better.
PAPER_ROWS: tuple[tuple[str, str, float | None], ...] = (
    ("permutation", "throughput", PAPER_THROUGHPUT_GAIN),
    ("degraded link", "fct_p99_us", -PAPER_TAIL_REDUCTION),
    ("failed link", "fct_p99_us", None),
    ("mixed ordered/unordered", "fct_p99_us", None),
)
DEGRADED_FRACTION = 0.5
#: The failed scenario's link fails this many slots into the run; routing withdraws it ``Transport.detect`` later.
FAIL_SLOT = 32


#: Short keys (the CLI's ``--scenario``) of the scenarios, in ``scenarios()`` order.
SCENARIO_KEYS = {"permutation": "permutation", "degraded": "degraded link", "failed": "failed link",
                 "mixed": "mixed ordered/unordered"}


@dataclass(frozen=True)
class Scenario:
    """A named set of flows and link faults on ``fabric``."""

    name: str
    fabric: LeafSpine
    flows: tuple[Flow, ...]
    faults: LinkFaults


#: Results of ``run_all``: scenario name -> spraying kind -> one result per seed.
Runs: TypeAlias = dict[str, dict[str, list[SprayResult]]]


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


def select(keys: Sequence[str]) -> list[str]:
    """Scenario names for short keys (``permutation``, ``degraded``, ``failed``, ``mixed``), in the given order."""
    unknown = [k for k in keys if k not in SCENARIO_KEYS]
    if unknown:
        raise ValueError(f"unknown scenario {unknown[0]!r}; known: {', '.join(SCENARIO_KEYS)}")
    return [SCENARIO_KEYS[k] for k in dict.fromkeys(keys)]


def run_all(fabric: LeafSpine, packets: int, seeds: Sequence[int], names: Sequence[str] | None = None,
            kinds: Sequence[str] = KINDS, transport: Transport | None = None) -> Runs:
    """``{scenario: {kind: [result per seed]}}``; seed s draws both the permutation and the spraying choices,
    so a set of seeds varies the traffic as well as the random path choices."""
    wanted = list(names or SCENARIO_KEYS.values())
    runs: Runs = {name: {k: [] for k in kinds} for name in wanted}
    for s in seeds:
        for sc in scenarios(fabric, packets, seed=s):
            if sc.name in runs:
                for k in kinds:
                    runs[sc.name][k].append(simulate(sc.fabric, sc.flows, k, sc.faults, transport, seed=s))
    return runs
