"""The summary's ``node_groups`` section: a job over node groups of different speeds, and what the slow one costs.

Measured (the pipeline's data only): the job's iteration time and each host's bytes per iteration and tx rate,
from the host agents' FlowBatches (NCCL opCount per communicator and RDMA port tx bytes per window;
``whatif/iterations.py``); the all-nodes-fast iteration time and the FIM without the slow group from the what-if
model on those measurements (``whatif/reproductions/slow_group.py``). Scoring only, labelled ``*_ground_truth``: the
simulator's iteration ends, and a counterfactual simulator run of the same workload without its node groups.
docs/demo.md describes every field.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowtracer.demo.status import Observed
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import Topology
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import Job, Workload
from flowtracer.whatif.record import Recording, windows
from flowtracer.whatif.reproductions.slow_group import NodeGroup, job_report

S = 1_000_000_000
TOLERANCE = 0.03
"""Largest relative |measured - ground truth| iteration time still called consistent (the e2e test's bound):
the opCount is sampled once per window, +-1 op at each end of a span of ~100 ops."""
COUNTERFACTUAL_S = 8.0
"""Simulated seconds of the all-nodes-fast counterfactual run (its first 2 s are left out)."""


def job_hosts(job: Job, topology: Topology) -> list[str]:
    """The hosts a job runs on, in rank order (``hosts``: "all", a count or names; as the engine reads it)."""
    names = [h.name for h in topology.hosts]
    if job.hosts == "all":
        return names
    if isinstance(job.hosts, int):
        return names[:job.hosts]
    return list(job.hosts)


def ops_per_iteration(workload: Workload) -> int:
    """Collectives per training iteration of the workload's first job (NCCL counts each call: its ops' counts)."""
    return sum(op.count for op in workload.jobs[0].ops) if workload.jobs else 1


def groups_of(workload: Workload) -> list[NodeGroup]:
    """The workload's node groups for the model, named by their hosts."""
    return [NodeGroup(",".join(g.hosts), g.hosts, None if g.nic_rate is None else float(g.nic_rate),
                      g.compute_scale) for g in workload.node_groups]


class IterationClock(Engine):
    """An engine that keeps its jobs' iteration ends (ns) instead of writing ground-truth files."""

    def __init__(self, topology: Topology, workload: Workload) -> None:
        self.iteration_ends: dict[str, list[int]] = {}
        super().__init__(topology, workload, start_ns=0)

    def iteration_done(self, job: str, iteration: int, t_ns: int) -> None:
        self.iteration_ends.setdefault(job, []).append(t_ns)


def counterfactual_iteration_s(topology: Topology, workload: Workload, job: str,
                               seconds: float = COUNTERFACTUAL_S) -> float | None:
    """Ground truth of the all-nodes-fast counterfactual: the simulator's mean iteration of ``job`` in the same
    workload without node groups and faults, run offline in virtual time (no pipeline, well under a second)."""
    engine = IterationClock(topology, workload.model_copy(update={"node_groups": (), "faults": ()}))
    engine.advance(round(seconds))
    engine.close()
    ends = [t for t in engine.iteration_ends.get(job, []) if t >= 2 * S]
    return (ends[-1] - ends[0]) / (len(ends) - 1) / 1e9 if len(ends) >= 2 else None


def node_groups_section(obs: Observed, topology: Topology, workload: Workload, gt: GroundTruth | None,
                        warmup_s: float, fim_series: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The section (module docstring), or None when the workload has no node groups or no job."""
    if not workload.node_groups or not workload.jobs:
        return None
    job = workload.jobs[0]
    ends = sorted({s.end_ns for s in obs.host_samples})
    start = gt.start_ns if gt is not None else (ends[0] if ends else 0)
    from_ns = start + round(warmup_s * S)
    if ends:  # a long run keeps only the newest FlowBatches (FLOW_BATCHES_KEPT): the span starts at the oldest
        from_ns = max(from_ns, ends[0])
    to_ns = ends[-1] if ends else from_ns
    if gt is not None and gt.tick_ends:
        to_ns = min(to_ns, gt.tick_ends[-1])
    fabric = Fabric(topology)
    batches = [b for b in obs.flow_batches if from_ns < b.window_end_ns <= to_ns]
    wins = windows(Recording(flow_batches=batches), fabric)[0] if batches else []
    rep = job_report(obs.host_samples, wins, fabric, groups_of(workload), ops_per_iteration(workload), from_ns,
                     to_ns, job_hosts(job, topology))
    iteration = rep["iteration_s"]
    truth = gt.mean_iteration_s(job.name, from_ns, to_ns) if gt is not None else None
    error = round(abs(iteration - truth) / truth, 4) if iteration and truth else None
    inside = [x for x in fim_series if from_ns <= x["window_end_ns"] <= to_ns]
    if any(x["ground_truth"] is not None for x in inside):  # the fully measured windows only, as the FIM section
        inside = [x for x in inside if x["ground_truth"] is not None]
    measured = [x["measured"] for x in inside if x["measured"] is not None]
    fim_truth = [x["ground_truth"] for x in inside if x["ground_truth"] is not None]
    counterfactual = counterfactual_iteration_s(topology, workload, job.name)
    return {
        "job": job.name,
        "measured_by": "host agents' FlowBatches: NCCL opCount per communicator and RDMA port tx bytes per window",
        "span": {"from_s": round((from_ns - start) / S, 3), "to_s": round((to_ns - start) / S, 3)},
        **rep,
        "iteration_s_ground_truth": None if truth is None else round(truth, 4),
        "iteration_error": error, "tolerance": TOLERANCE,
        "consistent": error is not None and error <= TOLERANCE,
        "all_fast_iteration_s_ground_truth": None if counterfactual is None else round(counterfactual, 4),
        "fim": {**rep["fim"],
                "with_slow_group_measured": round(statistics.fmean(measured), 4) if measured else None,
                "with_slow_group_ground_truth": round(statistics.fmean(fim_truth), 4) if fim_truth else None,
                "windows": len(measured)},
    }


def load_inputs(topology: Path, workload: Path) -> tuple[Topology, Workload]:
    """The scenario's topology and workload (the files the demo wrote)."""
    from flowtracer.fabric.topology import load_topology
    from flowtracer.sim.fabric.workload import load_workload

    return load_topology(topology), load_workload(workload)
