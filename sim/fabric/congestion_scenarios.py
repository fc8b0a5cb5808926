"""The RoCE congestion scenarios of issue #18 on the demo's 16-host fabric, deterministic with their seed.

Each is a topology and a workload with the congestion model on (docs/congestion.md):

- ``known_collision``: the demo's ring all-reduce, whose two channels from host04 hash onto one
  uplink of leaf01 (and of leaf02). Both come from one 400G NIC, so that uplink carries exactly its
  line rate: a load imbalance, but no oversubscription, so no queue, ECN or pause.
- ``collision``: two line-rate flows from two hosts of leaf01 to two hosts of leaf02 that the ECMP
  hash puts on the same uplink while the sibling idles: 800G offered to 400G.
- ``incast``: six senders (three on the receiver's leaf, one on each other leaf) to host16.
- ``degraded``: the demo's ring all-reduce with leaf03's uplink to spine01 at a quarter of its capacity.
- ``pause_storm``: the demo's ring all-reduce plus two line-rate flows; host05's NIC stops draining
  at ``stall_at`` s, PFC pauses spread from its leaf port upstream, hop by hop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.workload import Workload, preset, validate_workload

FABRIC16 = FabricSpec(hosts=16, nics_per_host=1, leaves=4, spines=2, name="flowtracer-demo-16")
"""The FlowTracer-like fabric of the demo: 16 hosts, 4 leaves, 2 spines, 400G everywhere."""

SCENARIOS = ("known_collision", "collision", "incast", "degraded", "pause_storm")


@dataclass(frozen=True)
class CongestionScenario:
    """A named scenario: what runs, and the ports / NICs its ground truth is about."""

    name: str
    topology: Topology
    workload: Workload
    #: Scenario facts for tests and reports (e.g. the collided and idle uplinks, the stalled NIC).
    facts: dict[str, Any]


def _nic(h: int) -> str:
    return f"host{h:02d}:mlx5_0"


def _workload(base: dict[str, Any], pfc: bool, **extra: Any) -> Workload:
    return validate_workload({**base, **extra, "congestion": {"pfc": pfc}}, "congestion scenario")


def _ring() -> dict[str, Any]:
    return preset("ring-allreduce").model_dump(mode="json", exclude={"congestion"})


def scenario(name: str, *, pfc: bool = True, stall_at: float = 2.0, resume_at: float | None = None
             ) -> CongestionScenario:
    """Build scenario ``name`` (one of ``SCENARIOS``); ``pfc`` False drops instead of pausing; the pause
    storm's NIC stalls at ``stall_at`` s and, if ``resume_at`` is given, drains again from then."""
    topo = generate(FABRIC16)
    if name == "known_collision":
        return CongestionScenario(name, topo, _workload(_ring(), pfc), {"uplinks": ("leaf01:Ethernet5",
                                                                                    "leaf01:Ethernet6")})
    if name == "collision":
        seed, up, idle = _colliding_seed(topo)
        flows = [{"src": _nic(1), "dst": _nic(5)}, {"src": _nic(2), "dst": _nic(6)}]
        return CongestionScenario(name, topo, _workload({"seed": seed}, pfc, flows=flows),
                                  {"collided": up, "idle": idle})
    if name == "incast":
        senders = [13, 14, 15, 4, 8, 12]
        flows = [{"src": _nic(h), "dst": _nic(16)} for h in senders]
        return CongestionScenario(name, topo, _workload({"seed": 1}, pfc, flows=flows),
                                  {"receiver": _nic(16), "port": "leaf04:Ethernet4",
                                   "senders": [_nic(h) for h in senders]})
    if name == "degraded":
        faults = [{"at": 0, "degrade": "leaf03:Ethernet5", "capacity": 0.25}]
        return CongestionScenario(name, topo, _workload(_ring(), pfc, faults=faults), {"port": "leaf03:Ethernet5"})
    if name == "pause_storm":
        flows = [{"src": _nic(10), "dst": _nic(5)}, {"src": _nic(14), "dst": _nic(7)}]
        faults = [{"at": stall_at, "nic_stall": _nic(5)}]
        if resume_at is not None:
            faults.append({"at": resume_at, "nic_resume": _nic(5)})
        return CongestionScenario(name, topo, _workload(_ring(), pfc, flows=flows, faults=faults),
                                  {"nic": _nic(5), "port": "leaf02:Ethernet1", "stall_at": stall_at})
    raise ValueError(f"unknown congestion scenario {name!r}; known: {', '.join(SCENARIOS)}")


def _colliding_seed(topo: Topology) -> tuple[int, str, str]:
    """The first workload seed whose QP numbers hash host01->host05 and host02->host06 onto the same
    leaf01 uplink: (seed, collided uplink, idle sibling), each ``switch:port``."""
    from flowtracer.sim.fabric.engine import Engine  # deferred: the engine imports this package's model

    for seed in range(1, 200):
        wl = validate_workload({"seed": seed, "flows": [{"src": _nic(1), "dst": _nic(5)},
                                                        {"src": _nic(2), "dst": _nic(6)}]}, "collision search")
        e = Engine(topo, wl, start_ns=0)
        ups = {e.link_ids[f.path[1]] for f in e.flows.values() if f.forward and f.path}
        if len(ups) == 1:
            up = next(iter(ups)).split(">")[0]
            idle = "leaf01:Ethernet6" if up == "leaf01:Ethernet5" else "leaf01:Ethernet5"
            return seed, up, idle
    raise RuntimeError("no seed below 200 makes the two flows collide")
