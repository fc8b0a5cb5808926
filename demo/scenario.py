"""The demo's default scenario: FlowTracer's 16-node fabric, NCCL ring all-reduce, a harmful collision, a link
degraded later.

Fabric: 16 hosts with one 400G NIC each on 4 leaves, 2 spines (the cluster of the FlowTracer paper,
arXiv 2410.17078), with the simulator's RoCE congestion model on (docs/congestion.md). Traffic (the
``known-collision`` workload, :func:`demo_workload`): the ``ring-allreduce`` preset on host01..host15, whose QP
numbers hash host04's two channels onto one uplink of leaf01 (and host08's onto one of leaf02), plus one steady
flow from host01 to host16 (a checkpoint writer, say) that the ECMP hash puts on the same leaf01 uplink while its
sibling idles: two NICs offer 533G to a 400G link. That uplink builds a queue, marks ECN, its receivers send CNPs:
the collision is harmful. leaf02's collision is host08's single NIC at its line rate: an imbalance that congests
nothing. At ``degrade_at_s`` one cable drops to half its capacity; since a ring all-reduce runs at the speed of its
slowest link, the whole job slows down (the fabric throughput drops) even though the degraded link is not part of
the collision. The congestion model runs on the model data plane only: on the kernel data plane the same traffic
runs without it.

The ``heterogeneous`` workload (:func:`heterogeneous_workload`) runs the ring all-reduce on all 16 hosts where
leaf04's four hosts (:data:`SLOW_GROUP`) have NICs capped at 200G among 400G ones: the ring runs at the slow
group's pace, and the summary shows by how much (demo/node_groups.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flowtracer.fabric.topology import Role, TopologyError, load_topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.congestion_scenarios import FABRIC16
from flowtracer.sim.fabric.workload import PRESETS, WorkloadError, load_workload, preset, validate_workload

DEMO_SPEC: FabricSpec = FABRIC16
"""The FlowTracer-like fabric: 16 hosts, 4 leaves, 2 spines, 400G everywhere (shared with the
simulator's congestion scenarios)."""

DEGRADE_LINK = "leaf03:Ethernet5"
"""The cable degraded later in the run (leaf03's uplink to spine01), named by one end."""

DEMO_WORKLOAD = "known-collision"
"""The demo's own workload (the default ``--workload``): :func:`demo_workload`."""

COLLIDING_FLOW = {"src": "host01:mlx5_0", "dst": "host16:mlx5_0"}
"""The steady flow that collides with host04's ring channels on leaf01's uplink (the hash of its QP numbers,
drawn from the workload's seed 1, puts it there; tests check it against the simulator's ground truth)."""


HETEROGENEOUS_WORKLOAD = "heterogeneous"
"""Ring all-reduce over two node groups, one with slower NICs: :func:`heterogeneous_workload`."""

SLOW_GROUP = {"hosts": ["host13", "host14", "host15", "host16"], "nic_rate": "200G"}
"""The slow node group of the ``heterogeneous`` workload: leaf04's hosts, NICs capped at 200G (PCIe-limited,
say), among 400G ones."""


def heterogeneous_workload(congestion: bool = True) -> dict[str, Any]:
    """The ``heterogeneous`` workload as data: the ``ring-allreduce`` preset on all 16 hosts, :data:`SLOW_GROUP`,
    and the congestion model when ``congestion``."""
    data = preset("ring-allreduce", hosts="all").model_dump(mode="json", exclude={"congestion"})
    data["node_groups"] = [dict(SLOW_GROUP)]
    if congestion:
        data["congestion"] = {}
    return data


def demo_workload(congestion: bool = True) -> dict[str, Any]:
    """The ``known-collision`` workload as data: ring all-reduce on the first 15 hosts, :data:`COLLIDING_FLOW`
    (host16 is outside the job, so nothing but that flow reaches it: the only oversubscribed port is the collided
    uplink), and the congestion model when ``congestion``."""
    data = preset("ring-allreduce", hosts=DEMO_SPEC.hosts - 1).model_dump(mode="json", exclude={"congestion"})
    data["flows"] = [dict(COLLIDING_FLOW)]
    if congestion:
        data["congestion"] = {}
    return data


@dataclass(frozen=True)
class Scenario:
    """Files the demo runs: the topology, the workload, and what the workload schedules."""

    topology: Path
    workload: Path
    degrade_link: str | None
    degrade_at_s: float | None
    capacity: float
    hosts: int = DEMO_SPEC.hosts
    leaves: int = DEMO_SPEC.leaves
    spines: int = DEMO_SPEC.spines
    #: What the workload is: the demo's, a preset's name, or the file it came from.
    workload_name: str = DEMO_WORKLOAD
    #: Whether the simulator models RoCE congestion (the workload has a ``congestion:`` section): the demo then
    #: has the collectors read the switches' congestion counters.
    congestion: bool = False
    #: The workload has node groups (slower NICs or GPUs): the demo then measures the job's iteration time.
    node_groups: bool = False


class ScenarioError(ValueError):
    """A --topology or --workload the demo cannot run; ``str()`` is one line naming it."""


def write_scenario(out_dir: Path, degrade_at_s: float | None = 30.0, degrade_link: str = DEGRADE_LINK,
                   capacity: float = 0.5, topology_file: Path | None = None,
                   workload: str = DEMO_WORKLOAD, congestion: bool = True) -> Scenario:
    """Write the topology and ``workload.yaml`` into ``out_dir``; ``degrade_at_s`` None = no fault.

    Default: ``fabric16.yaml`` (:data:`DEMO_SPEC`) and the ``known-collision`` workload (:func:`demo_workload`,
    congestion modelled when ``congestion``: False for the kernel data plane, which cannot). ``topology_file``
    replaces the fabric (copied as ``topology.yaml``); there the demo's workload, which names host01 and host16
    of the demo fabric, becomes the plain ``ring-allreduce`` preset. ``workload`` is the demo's, a preset name
    or a workload file. The demo's and a preset get the ``degrade`` fault when the topology has
    ``degrade_link``, and with ``congestion`` the simulator's RoCE congestion model (queues, ECN, PFC: what tells
    a degraded link from a slow job, docs/stream.md, Incidents); a workload file runs as written (its own faults).
    Raises :class:`ScenarioError` (one line) for a topology or workload that does not load.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    if topology_file is None:
        topo = generate(DEMO_SPEC)
        topology = out_dir / "fabric16.yaml"
    else:
        try:
            topo = load_topology(topology_file)
        except TopologyError as e:
            raise ScenarioError(f"--topology {topology_file}: {e}") from None
        topology = out_dir / "topology.yaml"
    topology.write_text(topo.to_yaml(), encoding="utf-8")
    if workload == DEMO_WORKLOAD and topology_file is not None:
        workload = "ring-allreduce"
    if workload == HETEROGENEOUS_WORKLOAD and topology_file is not None:
        raise ScenarioError(f"--workload {workload}: runs on the demo's fabric only (it names leaf04's hosts); "
                            "give a workload file with node_groups for another topology")
    try:
        if workload == DEMO_WORKLOAD:
            data = demo_workload(congestion)
        elif workload == HETEROGENEOUS_WORKLOAD:
            data = heterogeneous_workload(congestion)
        elif workload in PRESETS:
            data = preset(workload).model_dump(mode="json")
        else:
            data = load_workload(Path(workload)).model_dump(mode="json")
            degrade_at_s = None
    except WorkloadError as e:
        raise ScenarioError(f"--workload {workload}: {e}") from None
    ports = {end for link in topo.links for end in (link.a, link.b)}
    if degrade_at_s is not None and degrade_link in ports:
        data["faults"] = [{"at": degrade_at_s, "degrade": degrade_link, "capacity": capacity}]
    else:
        degrade_at_s = None
    if congestion and (workload in PRESETS or workload == HETEROGENEOUS_WORKLOAD):
        # as the demo's own workload: a degraded link shows by its queue
        data["congestion"] = {}
    try:
        validate_workload(data, "demo workload")
    except WorkloadError as e:
        raise ScenarioError(f"--workload {workload}: {e}") from None
    out = out_dir / "workload.yaml"
    header = (f"# flowtracer demo workload: {workload}" + (" and one degraded link" if degrade_at_s is not None else "")
              + f".\n# Run it yourself: flowtracer sim --topology {topology.name} --workload workload.yaml\n")
    out.write_text(header + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    leaves = sum(1 for s_ in topo.switches if s_.role is Role.LEAF)
    return Scenario(topology, out, degrade_link if degrade_at_s is not None else None, degrade_at_s, capacity,
                    hosts=len(topo.hosts), leaves=leaves, spines=len(topo.switches) - leaves, workload_name=workload,
                    congestion=data.get("congestion") is not None, node_groups=bool(data.get("node_groups")))

