"""The RoCE congestion model against its own ground truth and the fluid traffic it rides on.

Every scenario runs in virtual time on the demo's 16-host fabric (docs/congestion.md): byte
conservation per switch, queues exactly where the offered load exceeds capacity, a clean idle
sibling, pause propagation hop by hop in the pause storm, no drops with PFC, and the published
counters equal to the ground truth.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.sim.fabric.congestion_counters import ROCE_PRIORITY, published
from flowtracer.sim.fabric.congestion_math import (
    ActiveFlows,
    CongestionParams,
    entry_offered,
    onset_transient,
    steady_marking,
)
from flowtracer.sim.fabric.congestion_scenarios import CongestionScenario, scenario
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import WorkloadError, validate_workload

G = 1_000_000_000
START = 1_700_000_000 * G


def run(sc: CongestionScenario, tmp: Path, ticks: int) -> tuple[Engine, GroundTruth]:
    e = Engine(sc.topology, sc.workload, start_ns=START, ground_truth=tmp / "gt")
    e.advance(ticks)
    e.close()
    return e, GroundTruth.load(tmp / "gt")


def congested(gt: GroundTruth) -> set[str]:
    """Ports with any queue, mark, pause or drop over the whole run."""
    w = gt.congestion_in(START, gt.tick_ends[-1])
    return {p for p, v in w.ports.items() if any(v.values())}


def test_conservation_per_switch_every_tick(tmp_path: Path) -> None:
    """bytes in = bytes out + dropped + growth of what the switch holds, for every switch and tick,
    through a pause storm that stalls and drains again, and through an incast with tail drops."""
    cases = (("pause_storm", {"resume_at": 4.0}, "held"), ("incast", {"pfc": False}, "dropped"),
             ("pause_storm", {"pfc": False}, "dropped"))
    for i, (name, kw, what) in enumerate(cases):
        sc = scenario(name, **kw)  # type: ignore[arg-type]
        _, gt = run(sc, tmp_path / str(i), 6)
        fabric = Fabric(sc.topology)
        held_before: dict[str, int] = {}
        moved = dropped = held_max = 0
        for tick, rec in zip(gt.ticks, gt.congestion, strict=True):
            assert tick["end_ns"] == rec["end_ns"]
            inn: dict[str, int] = {}
            out: dict[str, int] = {}
            for lid, b, _p in tick["links"]:
                dl = fabric.links[lid]
                out[dl.src_node] = out.get(dl.src_node, 0) + b
                inn[dl.dst_node] = inn.get(dl.dst_node, 0) + b
            drop: dict[str, int] = {}
            held: dict[str, int] = {}
            for port, vals in rec["ports"].items():
                sw = port.split(":")[0]
                drop[sw] = drop.get(sw, 0) + vals[7]
                held[sw] = held.get(sw, 0) + vals[8]
            for sw in fabric.switch_names:
                growth = held.get(sw, 0) - held_before.get(sw, 0)
                assert inn.get(sw, 0) == out.get(sw, 0) + drop.get(sw, 0) + growth, (name, sw, tick["end_ns"])
                moved += inn.get(sw, 0)
            dropped += sum(drop.values())
            held_max = max(held_max, sum(held.values()))
            held_before = held
        assert moved > 0
        if what == "dropped":
            assert dropped > 0 and held_max == 0  # the identity above was exercised by drops...
        else:
            assert held_max > 0 and sum(held_before.values()) == 0  # ...and by a tree that filled and drained


def test_collision_queues_only_on_the_collided_uplink(tmp_path: Path) -> None:
    sc = scenario("collision")
    _, gt = run(sc, tmp_path, 3)
    up, idle = sc.facts["collided"], sc.facts["idle"]
    # Offered: two 400G flows into one 400G uplink; downstream of it nothing arrives faster than 400G.
    assert congested(gt) == {up}
    w = gt.congestion_in(START, START + 3 * G)
    assert w.ports[up]["ecn-marked-pkts"] > 0 and w.ports[up]["max-queue-len"] > 0
    assert idle not in w.ports
    assert w.causes == {up: {"cause": "collision", "from": ""}}
    assert w.ports[up]["dropped-pkts"] == 0 and w.ports[up]["pfc-rx-pause-frames"] == 0  # 2.5 MB < Xoff
    # Receivers mark and send CNPs; the senders handle exactly those CNPs.
    nics = w.nics
    assert nics["host05:mlx5_0"]["np_ecn_marked_roce_packets"] > 0
    assert nics["host05:mlx5_0"]["np_cnp_sent"] == nics["host01:mlx5_0"]["rp_cnp_handled"] > 0
    assert nics["host06:mlx5_0"]["np_cnp_sent"] == nics["host02:mlx5_0"]["rp_cnp_handled"] > 0


def test_the_demo_collision_does_not_oversubscribe_and_changes_no_traffic(tmp_path: Path) -> None:
    """The demo's known collision puts two channels of one 400G NIC on one 400G uplink: imbalance,
    not oversubscription. The model finds nothing and the traffic is byte for byte the model-off run."""
    on = scenario("known_collision")
    _, gt_on = run(on, tmp_path / "on", 4)
    off = validate_workload(on.workload.model_dump(mode="json", exclude={"congestion"}), "off")
    _, gt_off = run(CongestionScenario("off", on.topology, off, {}), tmp_path / "off", 4)
    assert congested(gt_on) == set()
    assert all(not rec["nics"] for rec in gt_on.congestion)
    up = "leaf01:Ethernet5>spine01:Ethernet1"
    assert gt_on.link_bytes(START, START + 4 * G)[up] > 0  # the collided uplink carries the ring
    assert [(t["links"], t["flows"]) for t in gt_on.ticks] == [(t["links"], t["flows"]) for t in gt_off.ticks]


def test_incast_pauses_upstream_with_pfc_and_drops_without(tmp_path: Path) -> None:
    sc = scenario("incast")
    port, receiver = sc.facts["port"], sc.facts["receiver"]
    _, gt = run(sc, tmp_path / "pfc", 2)
    w = gt.congestion_in(START, START + 2 * G)
    assert w.causes[port] == {"cause": "incast", "from": receiver}
    assert all(v["dropped-pkts"] == 0 for v in w.ports.values())
    assert all(v["out_of_sequence"] == 0 and v["packet_seq_err"] == 0 for v in w.nics.values())
    # The receiver's leaf paused the local senders' NICs and the spines' downlinks: both ends count it.
    for h in ("host13", "host14", "host15"):
        assert w.nics[f"{h}:mlx5_0"]["rx_prio3_pause"] > 0
    assert sum(v["pfc-tx-pause-frames"] for p, v in w.ports.items() if p.startswith("leaf04:")) > 0
    _, gt = run(scenario("incast", pfc=False), tmp_path / "lossy", 2)
    w = gt.congestion_in(START, START + 2 * G)
    assert w.ports[port]["dropped-pkts"] > 0
    assert w.ports[port]["dropped-octets"] == w.ports[port]["dropped-pkts"] * (4096 + 62)
    assert all(v["pfc-tx-pause-frames"] == v["pfc-rx-pause-frames"] == 0 for v in w.ports.values())
    assert w.nics[receiver]["out_of_sequence"] > 0
    assert all(w.nics[s]["packet_seq_err"] > 0 for s in sc.facts["senders"])


def test_degraded_link_is_the_cause(tmp_path: Path) -> None:
    sc = scenario("degraded")
    _, gt = run(sc, tmp_path, 3)
    w = gt.congestion_in(START + G, START + 3 * G)  # the fault lands at the first tick's end
    assert w.causes[sc.facts["port"]]["cause"] == "degraded_link"
    assert {c["cause"] for c in w.causes.values()} == {"degraded_link"}


def test_pause_storm_spreads_upstream_hop_by_hop_and_stalls_the_flows(tmp_path: Path) -> None:
    sc = scenario("pause_storm", stall_at=1.0)
    _, gt = run(sc, tmp_path, 3)
    nic = sc.facts["nic"]
    w = gt.congestion_in(START + G, START + 3 * G)
    fabric = Fabric(sc.topology)
    to_nic = [f for f in gt.flows.values() if f.dst_nic == nic and f.direction == "data"]
    assert to_nic
    for f in to_nic:
        path = next(fw.paths[-1] for fw in gt.flows_in(START, START + G) if fw.flow.id == f.id)
        ports = [f"{fabric.links[lid].src_node}:{fabric.links[lid].src_port}" for lid in path[1:]]
        # Every switch port on the way is paused by the next one downstream; the last by the NIC.
        assert w.causes[ports[-1]] == {"cause": "nic_stall", "from": nic}
        for up, down in itertools.pairwise(ports):
            assert w.causes[up] == {"cause": "pause", "from": down}
            assert w.ports[up]["pfc-rx-pause-duration-us"] == 2_000_000
            assert w.ports[up]["max-queue-len"] == 3_000_000
        assert w.nics[f.src_nic]["rx_prio3_pause"] > 0
    assert w.nics[nic]["tx_prio3_pause"] == w.ports[sc.facts["port"]]["pfc-rx-pause-frames"] > 0
    # Nothing moves through a paused link once the tree stands, so the flows to the NIC stall.
    assert not any(fw.flow.dst_nic == nic for fw in gt.flows_in(START + 2 * G, START + 3 * G))
    # Every paused port's cause chain leads to the NIC, and both ends of every cable agree.
    for c in w.causes.values():
        hops = 0
        while c["cause"] == "pause":
            c, hops = w.causes[c["from"]], hops + 1
            assert hops < 6
        assert c == {"cause": "nic_stall", "from": nic}
    for dl in fabric.links.values():
        tx = f"{dl.dst_node}:{dl.dst_port}"  # the receiving end sends PAUSE
        rx = f"{dl.src_node}:{dl.src_port}"
        sent = w.ports.get(tx, {}).get("pfc-tx-pause-frames", 0) or w.nics.get(tx, {}).get("tx_prio3_pause", 0)
        got = w.ports.get(rx, {}).get("pfc-rx-pause-frames", 0) or w.nics.get(rx, {}).get("rx_prio3_pause", 0)
        if not dl.host_link or dl.src_node in fabric.switch_names:
            assert sent == got, dl.id
    assert all(v["dropped-pkts"] == 0 for v in w.ports.values())


def test_a_stalled_nic_without_pfc_drops_instead_of_pausing(tmp_path: Path) -> None:
    sc = scenario("pause_storm", stall_at=1.0, pfc=False)
    _, gt = run(sc, tmp_path, 3)
    w = gt.congestion_in(START + G, START + 3 * G)
    port = sc.facts["port"]
    assert w.causes[port] == {"cause": "nic_stall", "from": sc.facts["nic"]}
    assert {p for p, c in w.causes.items() if c["cause"] in ("nic_stall", "pause")} == {port}  # nothing spreads
    assert all(v["pfc-tx-pause-frames"] == v["pfc-rx-pause-frames"] == 0 for v in w.ports.values())
    assert all(v["tx_prio3_pause"] == v["rx_prio3_pause"] == 0 for v in w.nics.values())
    assert w.ports[port]["dropped-octets"] == w.ports[port]["dropped-pkts"] * (4096 + 62) >= 3_000_000
    assert not any(fw.flow.dst_nic == sc.facts["nic"] for fw in gt.flows_in(START + 2 * G, START + 3 * G))


def test_published_counters_equal_ground_truth(tmp_path: Path) -> None:
    sc = scenario("incast")
    e, gt = run(sc, tmp_path, 3)
    w = gt.congestion_in(START, START + 3 * G)
    st = e.switch_states["leaf04"]
    iface = st.interfaces["Ethernet4"]
    q = published(st, "Ethernet4")
    assert q is not None
    assert q["ecn-marked-pkts"] == w.ports["leaf04:Ethernet4"]["ecn-marked-pkts"] > 0
    assert q["ecn-marked-octets"] == q["ecn-marked-pkts"] * (4096 + 62)  # the model marks full packets
    assert q["transmit-octets"] == iface.counters["out-octets"] > 0
    assert q["transmit-pkts"] == iface.counters["out-unicast-pkts"]
    assert q["max-queue-len"] == gt.congestion[-1]["ports"]["leaf04:Ethernet4"][0]  # the last tick's watermark
    others = [published(st, "Ethernet4", p) for p in range(8) if p != ROCE_PRIORITY]
    assert len(st.queues) == len(st.pfc) == 8 * len(st.interfaces)
    assert all(o is not None and not any(o.values()) for o in others)
    spine_port = published(st, "Ethernet5")
    assert spine_port is not None
    assert spine_port["pfc-tx-pause-frames"] == w.ports["leaf04:Ethernet5"]["pfc-tx-pause-frames"] > 0
    # Served under SR Linux's leaf: the frames this port sent (tx) are the ones it generated.
    assert st.pfc[("Ethernet5", ROCE_PRIORITY)].counters["pfc-pause-frames-generated"] == spine_port["pfc-tx-pause-frames"]
    port = e.host_states["host16"].ports[("mlx5_0", 1)]
    assert port.congestion is not None
    assert port.congestion["np_cnp_sent"] == w.nics["host16:mlx5_0"]["np_cnp_sent"] > 0


def test_published_totals_are_the_ground_truth_deltas_since_boot(tmp_path: Path) -> None:
    """What a switch publishes at every tick end is the sum of the ground truth's deltas since its last
    boot: exact, through a reboot that restarts its counters at 0 (and, counter32, modulo 2**32)."""
    sc = scenario("incast")
    wl = validate_workload({**sc.workload.model_dump(mode="json"),
                            "faults": [{"at": 2, "reboot": "leaf04", "down_for": 1}]}, "reboot")
    e = Engine(sc.topology, wl, start_ns=START, ground_truth=tmp_path / "gt", counter32=True)
    e.advance(5)
    e.close()
    gt = GroundTruth.load(tmp_path / "gt")
    fields = ("ecn-marked-pkts", "pfc-tx-pause-frames")
    since_boot = {f: 0 for f in fields}
    epoch = 0
    for rec in gt.congestion:
        published = gt.counters_at("leaf04", rec["end_ns"])
        if published.boot_epoch != epoch:  # rebooted at the start of this tick: counters started over
            since_boot, epoch = {f: 0 for f in fields}, published.boot_epoch
        w = gt.congestion_in(rec["start_ns"], rec["end_ns"])
        for f in fields:
            since_boot[f] += w.ports.get("leaf04:Ethernet4" if f.startswith("ecn") else "leaf04:Ethernet1", {}).get(f, 0)
        assert published.congestion["Ethernet4"]["ecn-marked-pkts"] == since_boot["ecn-marked-pkts"] % 2**32
        assert published.congestion["Ethernet1"]["pfc-tx-pause-frames"] == since_boot["pfc-tx-pause-frames"]
    assert epoch == 1 and since_boot["ecn-marked-pkts"] > 0 and since_boot["pfc-tx-pause-frames"] > 0


def test_scenarios_are_deterministic(tmp_path: Path) -> None:
    runs = []
    for i in range(2):
        run(scenario("pause_storm", stall_at=1.0, resume_at=2.0), tmp_path / str(i), 3)
        runs.append((tmp_path / str(i) / "gt" / "congestion.jsonl").read_text())
    assert runs[0] == runs[1] and runs[0].count("\n") == 3


def test_model_off_publishes_nothing(tmp_path: Path) -> None:
    sc = scenario("known_collision")
    off = validate_workload(sc.workload.model_dump(mode="json", exclude={"congestion"}), "off")
    e, gt = run(CongestionScenario("off", sc.topology, off, {}), tmp_path, 1)
    assert gt.congestion == []
    assert all(not s.queues and not s.pfc for s in e.switch_states.values())
    assert all(p.congestion is None for h in e.host_states.values() for p in h.ports.values())


# -- the pure parts ----------------------------------------------------------------------------------


def test_offered_load_is_capped_by_upstream_bottlenecks() -> None:
    # Two flows of 400G over links 0 -> 1 (shared, 400G) -> 2 / 3 (one each, 400G).
    fs = ActiveFlows([1, 2], np.array([2, 2]), np.array([0, 0, 1, 1]), np.array([0, 2, 1, 2]),
                     np.array([0, 1, 0, 1]), np.array([0, 1]), np.array([2, 3]), np.array([400e9, 400e9]))
    eo = entry_offered(fs, np.array([400e9, 400e9, 400e9]), 3)
    # Link 2 gets both flows' traffic only after they crossed their first links (each 400G, uncontended).
    assert list(eo) == [400e9, 400e9, 400e9, 400e9]
    fs = ActiveFlows([1, 2], np.array([2, 2]), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]),
                     np.array([0, 1, 0, 1]), np.array([0, 1]), np.array([2, 3]), np.array([400e9, 400e9]))
    eo = entry_offered(fs, np.array([400e9, 400e9]), 2)
    assert list(eo) == [400e9, 200e9, 400e9, 200e9]  # link 0 offered 800G to 400G: the next hop sees 400G


def test_onset_transient_and_fixed_point() -> None:
    p = CongestionParams()
    peak, cuts = onset_transient(800e9, 400e9, p)
    assert cuts == 1 and peak == pytest.approx(400e9 * p.cnp_interval / 8)
    assert onset_transient(400e9, 400e9, p) == (0.0, 0)
    prob, q = steady_marking(np.array([200e9, 50e9]), 4158, p)
    assert 0 < prob[0] < prob[1] < p.pmax  # more flows sharing a port (slower each): more marking
    assert p.kmin < q[0] < q[1] < p.kmax


def test_bad_congestion_settings_are_one_line_errors() -> None:
    with pytest.raises(WorkloadError, match="xoff must be above kmax"):
        validate_workload({"congestion": {"kmax": "4MB"}}, "w.yaml")
    with pytest.raises(WorkloadError, match="nic_stall"):
        validate_workload({"faults": [{"at": 1}]}, "w.yaml")
    with pytest.raises(WorkloadError, match="unknown NIC 'host99:mlx5_0'"):
        sc = scenario("incast")
        wl = validate_workload({"flows": [{"src": "host99:mlx5_0", "dst": "host01:mlx5_0"}]}, "w.yaml")
        Engine(sc.topology, wl, start_ns=START)
