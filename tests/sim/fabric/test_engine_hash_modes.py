"""Switch hash modes in the engine: BTH destination QP hashing, spraying and adaptive spreading, mixed fabrics.

Virtual time on small generated fabrics, ground truth in a temp dir. The default mode's truth is pinned by
test_engine_traffic.py and test_ground_truth.py, unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.fabric.ecmp_hash import DEFAULT_FIELDS, EcmpHash, HashField, HashMode
from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import HEADER_BYTES, Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.spray import least_loaded
from flowtracer.sim.fabric.workload import Workload, WorkloadError, preset, validate_workload

G = 1_000_000_000
START = 1_700_000_000 * G
FRAME = 4096 + HEADER_BYTES  # one full packet on the wire (the engine's default MTU)
UPLINKS = ("leaf01:Ethernet5>spine01:Ethernet1", "leaf01:Ethernet6>spine02:Ethernet1")


def with_modes(topo: Topology, modes: dict[str, HashMode]) -> Topology:
    switches = tuple(s.model_copy(update={"hash_mode": modes[s.name]}) if s.name in modes else s
                     for s in topo.switches)
    return topo.model_copy(update={"switches": switches})


def fabric(hosts: int = 8, leaves: int = 2, seed: int = 5) -> Topology:
    return generate(FabricSpec(hosts=hosts, leaves=leaves, spines=2, link_speed_bps=100 * G,
                               host_speed_bps=100 * G, hash_seed=seed))


def test_bth_leaf_places_same_five_tuple_flows_by_destination_qp(tmp_path: Path) -> None:
    topo = with_modes(fabric(), {"leaf01": HashMode.FIVE_TUPLE_BTH_DQP})
    e = Engine(topo, Workload(seed=3), tick_s=1.0, start_ns=START, ground_truth=tmp_path / "gt")
    # Open QP pairs between two NICs until two share a UDP source port (a 14-bit fold of the QP numbers):
    # the same 5-tuple, different destination QPs, and the BTH hash puts them on different uplinks.
    bth = EcmpHash((*DEFAULT_FIELDS, HashField.DST_QPN), seed=5)
    plain = EcmpHash(DEFAULT_FIELDS, seed=5)
    by_sport: dict[int, list[int]] = {}
    found = None
    for _ in range(2000):
        pair = e.add_steady_flow("host01:mlx5_0", "host05:mlx5_0", rate_bps=G)
        f = e.flows[pair.meta["fwd"]]  # type: ignore[index]
        for other in by_sport.setdefault(f.headers.udp_src_port, []):
            g = e.flows[other]
            if bth.member(f.headers, 2) != bth.member(g.headers, 2):
                found = (g.id, f.id)
        by_sport[f.headers.udp_src_port].append(f.id)
        if found:
            break
    assert found is not None
    e.advance(1)
    e.close()
    gt = GroundTruth.load(tmp_path / "gt")
    paths = {fw.flow.id: fw.paths for fw in gt.flows_in(START, START + G)}
    heads = [e.flows[i].headers for i in found]
    assert heads[0].udp_src_port == heads[1].udp_src_port and heads[0].dst_qpn != heads[1].dst_qpn
    assert plain.member(heads[0], 2) == plain.member(heads[1], 2)  # one 5-tuple: one member in 5tuple mode
    for fid, h in zip(found, heads, strict=True):
        assert paths[fid] == ((paths[fid][0][0], UPLINKS[bth.member(h, 2)], *paths[fid][0][2:]),)
    # Every flow, not only the pair: the leaf's choice is the BTH hash's, the rest of the fabric hashes as before.
    for fw in gt.flows_in(START, START + G):
        f = e.flows[fw.flow.id]
        if f.forward:
            assert fw.paths[0][1] == UPLINKS[bth.member(f.headers, 2)]


def _spray_run(tmp: Path, mode: HashMode, rates: list[float], ticks: int) -> tuple[Engine, GroundTruth]:
    e = Engine(with_modes(fabric(), {"leaf01": mode}), Workload(seed=1), tick_s=1.0, start_ns=START,
               ground_truth=tmp / "gt")
    for i, rate in enumerate(rates, start=1):
        e.add_steady_flow(f"host0{i}:mlx5_0", f"host0{i + 4}:mlx5_0", rate_bps=rate)
    e.advance(ticks)
    e.close()
    return e, GroundTruth.load(tmp / "gt")


def test_sprayed_flow_truth_per_member_sums_to_the_flow_and_goes_round_robin(tmp_path: Path) -> None:
    e, gt = _spray_run(tmp_path, HashMode.SPRAY, [37 * G], 3)
    per_member = [0, 0]
    for t in gt.ticks:
        rows = t["flows"]
        data = [r for r in rows if e.flows[r[0]].forward]
        assert len(data) == 2  # one row per uplink the packets took
        for _fid, pid, _b, pk, _pl in data:
            per_member[UPLINKS.index(gt.paths[pid][1])] += pk
        assert abs(per_member[0] - per_member[1]) <= 1  # round robin keeps members within one packet
        assert t["groups"]["leaf01:spine01|spine02"] == [
            next(r[2] for r in data if gt.paths[r[1]][1] == u) for u in UPLINKS]
    # Rows sum to what the host sent, and the uplinks carried exactly the rows' bytes.
    (fw,) = [f for f in gt.flows_in(START, START + 3 * G) if f.flow.direction == "data"]
    per_path = gt.path_bytes(START, START + 3 * G)[fw.flow.id]
    assert sum(per_path.values()) == fw.bytes > 0
    links = gt.link_bytes(START, START + 3 * G)
    assert sorted(links[p[1]] for p in per_path) == sorted(per_path.values())
    assert links[fw.paths[0][0]] == fw.bytes  # the NIC sent it all
    assert abs(per_path[fw.paths[0]] - per_path[fw.paths[1]]) <= FRAME  # one packet, as round robin deals


def test_adaptive_leaf_sends_each_packet_to_the_least_loaded_uplink(tmp_path: Path) -> None:
    rates = [60 * G, 70 * G, 50 * G]  # 180G from leaf01 over two 100G uplinks
    e, gt = _spray_run(tmp_path, HashMode.ADAPTIVE, rates, 1)
    (t,) = gt.ticks
    loads = [0.0, 0.0]
    for fid in sorted({r[0] for r in t["flows"]}):  # the engine deals flows in id order
        rows = [r for r in t["flows"] if r[0] == fid]
        b, pk = sum(r[2] for r in rows), sum(r[3] for r in rows)
        got = [sum(r[3] for r in rows if gt.paths[r[1]][1] == u) for u in UPLINKS]
        if e.flows[fid].forward:
            assert got == least_loaded(pk, b / pk, loads)
        for r in rows:
            loads[UPLINKS.index(gt.paths[r[1]][1])] += r[2]
    assert abs(loads[0] - loads[1]) <= FRAME  # balanced within a packet
    assert t["groups"]["leaf01:spine01|spine02"] == [int(x) for x in loads]
    # The rates saw each flow half on each uplink: all get what they ask (counting each flow whole on every uplink
    # would put 180G on each and cut them to a third of 100G).
    sent = {f.flow.src_nic: f.payload for f in gt.flows_in(START, START + G) if f.flow.direction == "data"}
    for i, rate in enumerate(rates, start=1):
        assert sent[f"host0{i}:mlx5_0"] == pytest.approx(rate / 8, rel=1e-6)


def test_mixed_fabric_runs_and_conserves_bytes(tmp_path: Path) -> None:
    topo = with_modes(fabric(hosts=8, leaves=4), {"leaf02": HashMode.FIVE_TUPLE_BTH_DQP, "leaf03": HashMode.SPRAY,
                                                  "leaf04": HashMode.ADAPTIVE})
    e = Engine(topo, preset("ring-allreduce", size="256MiB", channels=2), tick_s=0.5, start_ns=START,
               ground_truth=tmp_path / "gt")
    e.advance(4)
    e.close()
    gt = GroundTruth.load(tmp_path / "gt")
    end = START + 2 * G
    links = gt.link_bytes(START, end)
    rows: dict[str, int] = {}
    for t in gt.ticks:
        for _fid, pid, b, _pk, _pl in t["flows"]:
            for lid in gt.paths[pid]:
                rows[lid] = rows.get(lid, 0) + b
    assert rows == links and links  # every link carried exactly the rows that cross it
    leaf_of = {h.name: h.nics[0].leaf.split(":")[0] for h in topo.hosts}
    by_leaf: dict[str, set[int]] = {}
    for fw in gt.flows_in(START, end):
        assert sum(gt.path_bytes(START, end)[fw.flow.id].values()) == fw.bytes
        if fw.flow.direction == "data" and leaf_of[fw.flow.src_host] != leaf_of[fw.flow.dst_host]:
            by_leaf.setdefault(leaf_of[fw.flow.src_host], set()).add(len(set(fw.paths)))
    assert by_leaf["leaf01"] == by_leaf["leaf02"] == {1}  # hashed: one path per flow
    assert by_leaf["leaf03"] == by_leaf["leaf04"] == {2}  # spread over both spines


def test_congestion_model_refuses_a_spreading_switch() -> None:
    wl = validate_workload({"congestion": {}}, "t")
    with pytest.raises(WorkloadError, match=r"^congestion: switch leaf01 has hash_mode spray; "):
        Engine(with_modes(fabric(), {"leaf01": HashMode.SPRAY}), wl, start_ns=START)
