"""The demo's known collision, in the simulator alone (no pipeline): its workload really congests one uplink, by
a collision, while the sibling idles (ground truth, a few ticks of the engine)."""

from __future__ import annotations

from pathlib import Path

from flowtracer.demo.scenario import write_scenario
from flowtracer.fabric.topology import load_topology
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import load_workload

S = 1_000_000_000


def test_the_demo_workload_congests_one_uplink_by_a_collision_of_two_nics(tmp_path: Path) -> None:
    sc = write_scenario(tmp_path / "sc", degrade_at_s=None)
    topo = load_topology(sc.topology)
    engine = Engine(topo, load_workload(sc.workload), start_ns=0, ground_truth=tmp_path / "gt")
    engine.advance(4)
    engine.close()
    gt = GroundTruth.load(tmp_path / "gt")
    cw = gt.congestion_in(S, 4 * S)
    # One oversubscribed port, by a collision: a leaf uplink fed by two NICs' flows while its sibling idles.
    [(port, cause)] = cw.causes.items()
    assert cause["cause"] == "collision" and port.startswith("leaf01:")
    on_port = [fw.flow for fw in gt.flows_in(S, 4 * S)
               if fw.flow.direction == "data" and fw.bytes
               and any(lk.startswith(port + ">") for path in fw.paths for lk in path)]
    senders = {f.src_nic for f in on_port}
    assert len(senders) == 2, senders
    assert cw.ports[port]["ecn-marked-pkts"] > 0
    sibling = next(f"leaf01:{p}" for p in ("Ethernet5", "Ethernet6") if f"leaf01:{p}" != port)
    assert cw.ports.get(sibling, {}).get("ecn-marked-pkts", 0) == 0
    # The receivers of the collided data flows send CNPs, nobody else does.
    receivers = {f.dst_nic for f in on_port}
    cnp = {nic for nic, v in cw.nics.items() if v["np_cnp_sent"] > 0}
    assert cnp == receivers and len(receivers) == 2
