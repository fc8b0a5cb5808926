"""The demo's default scenario: FlowTracer's 16-node fabric, NCCL ring all-reduce, a link degraded later.

Fabric: 16 hosts with one 400G NIC each on 4 leaves, 2 spines (the cluster of the FlowTracer paper,
arXiv 2410.17078). Traffic: the simulator's ``ring-allreduce`` preset unchanged, whose QP numbers
hash two rings onto the same uplink of leaf01 and of leaf02 while the sibling uplink idles: a
collision from the start. At ``degrade_at_s`` one cable drops to half its capacity; since a ring
all-reduce runs at the speed of its slowest link, the whole job slows down (the fabric throughput
drops) even though the degraded link is not part of the collision.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from flowtracer.schemas.topology import Role, TopologyError, load_topology
from flowtracer.schemas.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.congestion_scenarios import FABRIC16
from flowtracer.sim.fabric.workload import PRESETS, WorkloadError, load_workload, preset, validate_workload

DEMO_SPEC: FabricSpec = FABRIC16
"""The FlowTracer-like fabric: 16 hosts, 4 leaves, 2 spines, 400G everywhere (shared with the
simulator's congestion scenarios)."""

DEGRADE_LINK = "leaf03:Ethernet5"
"""The cable degraded later in the run (leaf03's uplink to spine01), named by one end."""


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
    #: What the workload is: a preset's name, or the file it came from.
    workload_name: str = "ring-allreduce"


class ScenarioError(ValueError):
    """A --topology or --workload the demo cannot run; ``str()`` is one line naming it."""


def write_scenario(out_dir: Path, degrade_at_s: float | None = 30.0, degrade_link: str = DEGRADE_LINK,
                   capacity: float = 0.5, topology_file: Path | None = None,
                   workload: str = "ring-allreduce", congestion: bool = False) -> Scenario:
    """Write the topology and ``workload.yaml`` into ``out_dir``; ``degrade_at_s`` None = no fault.

    Default: ``fabric16.yaml`` (:data:`DEMO_SPEC`) and the ``ring-allreduce`` preset (so the known
    collision happens). ``topology_file`` replaces the fabric (copied as ``topology.yaml``);
    ``workload`` is a preset name or a workload file. A preset gets the ``degrade`` fault when the
    topology has ``degrade_link``, and with ``congestion`` the simulator's RoCE congestion model (queues,
    ECN, PFC: what tells a degraded link from a slow job, docs/stream.md, Incidents); a workload file runs
    as written (its own faults). Raises
    :class:`ScenarioError` (one line) for a topology or workload that does not load.
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
    try:
        if workload in PRESETS:
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
    if congestion and workload in PRESETS:
        data["congestion"] = {"pfc": True}
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
                    hosts=len(topo.hosts), leaves=leaves, spines=len(topo.switches) - leaves, workload_name=workload)

