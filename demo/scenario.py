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

from flowtracer.schemas.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.workload import preset, validate_workload

DEMO_SPEC = FabricSpec(hosts=16, nics_per_host=1, leaves=4, spines=2, name="flowtracer-demo-16")
"""The FlowTracer-like fabric: 16 hosts, 4 leaves, 2 spines, 400G everywhere."""

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


def write_scenario(out_dir: Path, degrade_at_s: float | None = 30.0, degrade_link: str = DEGRADE_LINK,
                   capacity: float = 0.5) -> Scenario:
    """Write ``fabric16.yaml`` and ``workload.yaml`` into ``out_dir``; ``degrade_at_s`` None = no fault.

    The workload is the ``ring-allreduce`` preset (so the known collision happens) plus one
    ``degrade`` fault, validated before it is written.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    topology = out_dir / "fabric16.yaml"
    topology.write_text(generate(DEMO_SPEC).to_yaml(), encoding="utf-8")
    data = preset("ring-allreduce").model_dump(mode="json")
    if degrade_at_s is not None:
        data["faults"] = [{"at": degrade_at_s, "degrade": degrade_link, "capacity": capacity}]
    validate_workload(data, "demo workload")
    workload = out_dir / "workload.yaml"
    header = ("# flowtracer demo workload: the ring-allreduce preset and one degraded link.\n"
              "# Run it yourself: flowtracer sim --topology fabric16.yaml --workload workload.yaml\n")
    workload.write_text(header + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return Scenario(topology, workload, degrade_link if degrade_at_s is not None else None, degrade_at_s, capacity)
