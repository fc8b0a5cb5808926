"""The engine's traffic: NCCL volumes, hashing collisions, fairness, conservation, host state, NCCL logs.

Everything runs in virtual time on small generated fabrics with ground truth in a temp dir.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest

from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.roce import rocev2_udp_sport
from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import HEADER_BYTES, Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.rdma import PSN_MASK
from flowtracer.sim.fabric.workload import Workload, preset, validate_workload

G = 1_000_000_000
START = 1_700_000_000 * G  # a multiple of every tick used here
MTU = 4096
EFF = MTU / (MTU + HEADER_BYTES)  # payload share of line rate


def fabric(hosts: int = 4, nics: int = 1, leaves: int = 2, spines: int = 2, speed: int = 100 * G,
           host_speed: int | None = None, seed: int = 0) -> Topology:
    return generate(FabricSpec(hosts=hosts, nics_per_host=nics, leaves=leaves, spines=spines,
                               rails=nics if nics > 1 else 1, link_speed_bps=speed,
                               host_speed_bps=host_speed or speed, hash_seed=seed))


def run(topo: Topology, wl: Workload, tmp: Path, ticks: int, tick_s: float = 1.0, **kw: object) -> tuple[Engine,
                                                                                                          GroundTruth]:
    e = Engine(topo, wl, tick_s=tick_s, start_ns=START, ground_truth=tmp / "gt", **kw)  # type: ignore[arg-type]
    e.advance(ticks)
    e.close()
    return e, GroundTruth.load(tmp / "gt")


def wire(payload: int, packets: int | None = None) -> int:
    return payload + (packets if packets is not None else -(-payload // MTU)) * HEADER_BYTES


# -- NCCL volumes ---------------------------------------------------------------------------------


def test_ring_allreduce_moves_2_n_minus_1_over_n_per_rank(tmp_path: Path) -> None:
    size = 64 * 2**20
    wl = preset("ring-allreduce", size=size, channels=2, compute_gap="1.5s")
    _, gt = run(fabric(hosts=4), wl, tmp_path, 2)  # one op at t = 1.5 s
    flows = gt.flows_in(START, START + 2 * G)
    data = [f for f in flows if f.flow.direction == "data"]
    assert len(data) == 4 * 2  # 4 ring edges x 2 channels
    per_nic: dict[str, int] = {}
    for f in data:
        assert f.payload == size * 2 * 3 // 4 // 2  # 2(n-1)/n of the buffer, split over 2 channels
        per_nic[f.flow.src_nic] = per_nic.get(f.flow.src_nic, 0) + f.payload
    assert set(per_nic.values()) == {size * 2 * 3 // 4}
    # Ring edges go to the next rank; CTS flows come back on the same QP pairs, one 64 B write per 512 KiB.
    for f in data:
        assert int(f.flow.dst_host[-2:]) == int(f.flow.src_host[-2:]) % 4 + 1
    cts = [f for f in flows if f.flow.direction == "cts"]
    assert {f.payload for f in cts} == {size * 3 // 4 // (512 * 1024) * 64}
    assert {f.packets for f in cts} == {size * 3 // 4 // (512 * 1024)}


def test_allgather_alltoall_pipeline_and_tree_volumes(tmp_path: Path) -> None:
    size = 48 * 2**20
    ops = [{"collective": "allgather", "size": size}, {"collective": "alltoall", "size": size},
           {"collective": "sendrecv", "size": size}, {"collective": "allreduce", "algorithm": "tree", "size": size}]
    wl = validate_workload({"jobs": [{"channels": 1, "compute_gap": "0.5s", "iterations": 1, "ops": ops}]}, "t")
    _, gt = run(fabric(hosts=4), wl, tmp_path, 1)
    sent: dict[tuple[str, str], int] = {}
    for f in gt.flows_in(START, START + G):
        if f.flow.direction == "data":
            key = (f.flow.src_host, f.flow.dst_host)
            sent[key] = sent.get(key, 0) + f.payload
    n = 4
    ring_next = {(f"host0{i}", f"host0{i % 4 + 1}") for i in range(1, 5)}
    neighbours = {(f"host0{i}", f"host0{i + d}") for i in range(1, 5) for d in (-1, 1) if 1 <= i + d <= 4}
    t0_parent = {1: 2, 2: 0, 3: 2}  # btree(4) over nodes 0..3
    t1_parent = {2: 1, 1: 3, 0: 1}  # its mirror
    tree_edges = {(a, b) for tp in (t0_parent, t1_parent) for a, b in tp.items()}
    tree_edges |= {(b, a) for a, b in tree_edges}
    for (a, b), got in sent.items():
        i, j = int(a[-2:]) - 1, int(b[-2:]) - 1
        expect = size // n  # all-to-all: S/n to every peer
        if (a, b) in ring_next:
            expect += (n - 1) * size // n  # all-gather ring
        if (a, b) in neighbours:
            expect += size  # pipeline send/recv
        if (i, j) in tree_edges:
            expect += size // 2 * sum((i, j) in {(x, y), (y, x)} for tp in (t0_parent, t1_parent)
                                      for x, y in tp.items())
        assert got == expect, (a, b)


# -- hashing collisions ----------------------------------------------------------------------------


def _uplink_choice(topo: Topology, e: Engine, src: str, dst: str, qpn_pair: tuple[int, int]) -> int:
    """Member (0 = spine01, 1 = spine02) leaf01's hash picks, computed from the headers alone."""
    ips = {f"{h.name}:{n.rdma_device}": n.ip for h in topo.hosts for n in h.nics}
    headers = HeaderFields(ips[src], ips[dst], rocev2_udp_sport(*qpn_pair), 4791, 17)
    return topo.ecmp_hash("leaf01").member(headers, 2)


def test_four_flows_two_uplinks_collision_gives_hand_computed_loads(tmp_path: Path) -> None:
    # host01-04 on leaf01 send to host05-08 on leaf02, all links 100G; pick the QP numbers (the
    # workload seed sets each NIC's first QPN, hence the UDP source ports) for which three flows
    # hash onto one uplink and one onto the other. (The hash seed would not do: CRC is affine, so a
    # seed flips every flow's member bit alike.)
    topo = fabric(hosts=8)
    for seed in range(64):
        e = Engine(topo, Workload(seed=seed), tick_s=1.0, start_ns=START, ground_truth=tmp_path / f"gt{seed}")
        pairs = [e.add_steady_flow(f"host0{i}:mlx5_0", f"host0{i + 4}:mlx5_0") for i in range(1, 5)]
        choice = [_uplink_choice(topo, e, p.a.name, p.b.name, (p.a_qpn, p.b_qpn)) for p in pairs]
        if sorted(choice.count(m) for m in (0, 1)) == [1, 3]:
            break
        e.close()
    else:
        pytest.fail("no seed gives a 3-1 split")
    e.advance(1)
    e.close()
    gt = GroundTruth.load(tmp_path / f"gt{seed}")
    crowded = max((0, 1), key=choice.count)
    rate = 100 * G * EFF  # payload bit/s of a 100G link
    by_src = {f.flow.src_nic: f for f in gt.flows_in(START, START + G) if f.flow.direction == "data"}
    uplink = {0: "leaf01:Ethernet5>spine01:Ethernet1", 1: "leaf01:Ethernet6>spine02:Ethernet1"}
    expect_link = {0: 0, 1: 0}
    for p, m in zip(pairs, choice, strict=True):
        f = by_src[p.a.name]
        assert uplink[m] in f.paths[0]  # the engine forwarded where the hash says
        share = rate / 3 if m == crowded else rate
        assert f.payload == pytest.approx(share / 8, abs=2)  # max-min: a third each vs the whole link
        expect_link[m] += wire(f.payload)
    loads = gt.link_bytes(START, START + G)
    for m in (0, 1):
        assert loads[uplink[m]] == expect_link[m]
        assert loads[uplink[m]] == pytest.approx(100 * G / 8, rel=1e-6)  # both uplinks full ...
    # ... but the three colliding flows crawl at a third of line rate.


def _ring(seed: int) -> Workload:
    return preset("ring-allreduce", size=256 * 2**20, channels=2, compute_gap=0, seed=seed)


def _collision_seeds(hosts: int) -> dict[bool, int]:
    """Workload seeds (QP numbers) for which the two ring channels leaving leaf01 collide (True) or not."""
    out: dict[bool, int] = {}
    topo = fabric(hosts=hosts, speed=100 * G, host_speed=200 * G)
    for seed in range(64):
        e = Engine(topo, _ring(seed), start_ns=START)
        e.advance(1)
        on_link: dict[int, int] = {}
        for f in e.flows.values():
            for li in (f.path or ())[1:-1] if f.forward else ():
                on_link[li] = on_link.get(li, 0) + 1
        out.setdefault(max(on_link.values()) > 1, seed)
        if len(out) == 2:
            return out
    raise AssertionError("no seeds found")


def test_a_collision_slows_the_whole_ring(tmp_path: Path) -> None:
    # 200G hosts, two 100G uplinks per leaf: the ring's edge from leaf01 to leaf02 has two channels;
    # on separate uplinks they get 100G each, hashed onto one they get 50G each, and every edge
    # of the ring (coupled) runs at 50G: the all-reduce takes twice as long.
    seeds = _collision_seeds(4)
    moved = {}
    for collide, seed in seeds.items():
        topo = fabric(hosts=4, speed=100 * G, host_speed=200 * G)
        _, gt = run(topo, _ring(seed), tmp_path / str(seed), 1)
        data = [f for f in gt.flows_in(START, START + G) if f.flow.direction == "data"]
        assert len({f.payload for f in data}) <= 2  # every ring flow moves (nearly) the same
        moved[collide] = sum(f.payload for f in data)
    assert moved[True] == pytest.approx(moved[False] / 2, rel=0.01)


# -- fairness with slow nodes -----------------------------------------------------------------------


def test_slow_nic_holds_back_the_whole_ring(tmp_path: Path) -> None:
    wl = validate_workload({
        "jobs": [{"channels": 1, "compute_gap": 0, "ops": [{"collective": "allreduce", "size": "1GiB"}]}],
        "node_groups": [{"hosts": ["host02"], "nic_rate": "25G"}]}, "t")
    _, gt = run(fabric(hosts=4), wl, tmp_path, 1)
    data = [f for f in gt.flows_in(START, START + G) if f.flow.direction == "data"]
    for f in data:  # every edge of the ring runs at the slow NIC's pace
        assert f.payload == pytest.approx(25 * G * EFF / 8, rel=1e-3)


def test_slow_gpus_stretch_compute_gaps(tmp_path: Path) -> None:
    def ops_done(scale: float) -> int:
        wl = validate_workload({
            "jobs": [{"channels": 1, "compute_gap": "100ms", "ops": [{"collective": "allreduce", "size": "1MiB"}]}],
            "node_groups": [{"hosts": ["host03"], "compute_scale": scale}]}, "t")
        e = Engine(fabric(hosts=4), wl, start_ns=START)
        e.advance(1)
        return sum("AllReduce: opCount" in line for line in e.host_states["host01"].nccl_log)

    # Compute first, then the op (~25 us): ops start at 0.1, 0.2001, ... 0.9008 s (the 10th just after 1 s).
    assert ops_done(1.0) == 9
    assert ops_done(2.0) == 4  # the slowest rank sets the pace: 0.2, 0.4, 0.6, 0.8 s


def test_ground_truth_records_each_iteration_end(tmp_path: Path) -> None:
    """iterations.jsonl: one line per finished iteration; its spacing is compute + the ring at the slow NIC."""
    size = 256 * 2**20
    wl = validate_workload({
        "jobs": [{"name": "j", "channels": 1, "compute_gap": "100ms", "iterations": 5,
                  "ops": [{"collective": "allreduce", "size": size}]}],
        "node_groups": [{"hosts": ["host02"], "nic_rate": "50G"}]}, "t")
    _, gt = run(fabric(hosts=4), wl, tmp_path, 2)
    assert [(r["job"], r["iteration"]) for r in gt.iterations] == [("j", i) for i in range(1, 6)]
    comm_s = wire(round(2 * 3 / 4 * size)) * 8 / (50 * G)  # frames of the ring's per-rank bytes at 50G
    assert gt.mean_iteration_s("j", START, START + 2 * G) == pytest.approx(0.1 + comm_s, rel=1e-3)
    assert gt.mean_iteration_s("j", START, START + 100_000_000) is None  # not two ends in the first 0.1 s


# -- conservation and host state --------------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, GroundTruth]:
    """Two rails, a job with ring all-reduce and all-to-all, two background flows; 8 ticks of 0.25 s."""
    wl = validate_workload({
        "seed": 3,
        "jobs": [{"channels": 2, "qps_per_connection": 2, "compute_gap": "20ms",
                  "ops": [{"collective": "allreduce", "size": "128MiB"}, {"collective": "alltoall", "size": "64MiB"}]}],
        "background": [{"flows": 2, "rate": "30G"}]}, "mixed")
    topo = fabric(hosts=4, nics=2, leaves=4, spines=2, speed=100 * G)
    tmp = tmp_path_factory.mktemp("mixed")
    return run(topo, wl, tmp, 8, tick_s=0.25)


def test_both_ends_of_every_cable_agree_every_tick(mixed: tuple[Engine, GroundTruth]) -> None:
    e, gt = mixed
    times = gt.counter_times
    assert len(times) == 9 and times[0] == START
    for ta, tb in itertools.pairwise(times):
        for link in e.topology.links:
            (a, pa), (b, pb) = link.a.split(":"), link.b.split(":")
            ca0, ca1 = gt.counters_at(a, ta).interfaces[pa], gt.counters_at(a, tb).interfaces[pa]
            cb0, cb1 = gt.counters_at(b, ta).interfaces[pb], gt.counters_at(b, tb).interfaces[pb]
            for out_c, in_c in (("out-octets", "in-octets"), ("out-pkts", "in-pkts")):
                assert ca1[out_c] - ca0[out_c] == cb1[in_c] - cb0[in_c]
                assert cb1[out_c] - cb0[out_c] == ca1[in_c] - ca0[in_c]
        # Switches drop nothing: what enters a switch leaves it.
        for sw in e.switch_states:
            c0, c1 = gt.counters_at(sw, ta), gt.counters_at(sw, tb)
            d_in = sum(c1.interfaces[i]["in-octets"] - c0.interfaces[i]["in-octets"] for i in c1.interfaces)
            d_out = sum(c1.interfaces[i]["out-octets"] - c0.interfaces[i]["out-octets"] for i in c1.interfaces)
            assert d_in == d_out


def test_link_bytes_are_the_sum_of_the_flows_crossing_them(mixed: tuple[Engine, GroundTruth]) -> None:
    _, gt = mixed
    for t in gt.ticks:
        from_flows: dict[str, int] = {}
        for _fid, pid, b, _p, _pl in t["flows"]:
            for lid in gt.paths[pid]:
                from_flows[lid] = from_flows.get(lid, 0) + b
        assert from_flows == {lid: b for lid, b, _ in t["links"]}
        assert t["flows"], "traffic in every tick"


def test_host_counters_match_switch_ports_and_are_conserved(mixed: tuple[Engine, GroundTruth]) -> None:
    e, gt = mixed
    end = gt.counter_times[-1]
    tx_total = rx_total = 0
    sent, received = gt.nic_bytes(START, end)
    for h in e.topology.hosts:
        hs = e.host_states[h.name]
        assert hs.timestamp_ns == end
        for nic in h.nics:
            port = hs.ports[(nic.rdma_device, 1)]
            leaf, leaf_port = nic.leaf.split(":")
            c = gt.counters_at(leaf, end).interfaces[leaf_port]
            name = f"{h.name}:{nic.rdma_device}"
            assert port.tx_bytes == c["in-octets"] == sent[name]
            assert port.rx_bytes == c["out-octets"] == received[name]
            assert port.tx_packets == c["in-pkts"]
            qps = [q for (dev, _), q in hs.qps.items() if dev == nic.rdma_device]
            assert sum(q.tx_bytes for q in qps) == port.tx_bytes
            assert sum(q.rx_bytes for q in qps) == port.rx_bytes
            tx_total += port.tx_bytes
            rx_total += port.rx_bytes
    assert tx_total == rx_total > 0


def test_packets_are_ceil_payload_over_mtu_per_flow_per_tick(mixed: tuple[Engine, GroundTruth]) -> None:
    _, gt = mixed
    for t in gt.ticks:
        for fid, _pid, b, p, pl in t["flows"]:
            flow = gt.flows[fid]
            assert p == (math.ceil(pl / MTU) if flow.direction == "data" else pl // 64)
            assert b == pl + p * HEADER_BYTES


def test_qp_pairs_share_sport_and_psns_advance_by_packets(mixed: tuple[Engine, GroundTruth]) -> None:
    e, _ = mixed
    for pair in e.pairs.values():
        qa = e.host_states[pair.a.host].qps[(pair.a.rdma_device, pair.a_qpn)]
        qb = e.host_states[pair.b.host].qps[(pair.b.rdma_device, pair.b_qpn)]
        assert qa.udp_src_port == qb.udp_src_port == rocev2_udp_sport(pair.a_qpn, pair.b_qpn)
        assert (qa.lqpn, qa.rqpn) == (qb.rqpn, qb.lqpn)
        assert qa.sq_psn == (pair.a_psn0 + qa.tx_packets) & PSN_MASK
        assert qb.rq_psn == qa.sq_psn and qa.rq_psn == qb.sq_psn  # each end expects what the other sent
        assert qa.tx_bytes == qb.rx_bytes and qb.tx_bytes == qa.rx_bytes
        assert 0 <= pair.a_qpn < 2**24 and qa.comm in ("python3", "ib_write_bw")


def test_background_flows_never_exceed_their_rate(mixed: tuple[Engine, GroundTruth]) -> None:
    _, gt = mixed
    bg = [f for f in gt.flows_in(START, START + 2 * G) if f.flow.kind == "background" and f.flow.direction == "data"]
    assert len(bg) == 2
    for f in bg:  # 30G asked; the collectives take part of their links
        assert 0 < f.payload <= 30 * G / 8 * 2


def test_background_flow_alone_gets_what_it_asks(tmp_path: Path) -> None:
    _, gt = run(fabric(hosts=4), validate_workload({"background": [{"flows": 3, "rate": "30G"}]}, "t"), tmp_path, 1)
    bg = [f for f in gt.flows_in(START, START + G) if f.flow.direction == "data"]
    assert len(bg) == 3 and all(f.payload == pytest.approx(30 * G / 8, abs=1) for f in bg)
    assert all(f.flow.comm == "ib_write_bw" for f in bg)


def test_nccl_log_names_every_qp_the_sender_created(mixed: tuple[Engine, GroundTruth]) -> None:
    e, _ = mixed
    qpn_line = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] (\S+):(\d+):(\d+) \[(\d+)\] NCCL INFO NET/IB: NCCL Dev (\d+) IbDev \d+ Port 1 qpn (\d+) "
                          r"mtu 5 query_ece=\{.*\} GID 3 \(0/[0-9A-F]+\) fifoRkey=0x[0-9a-f]+ fifoLkey=0x[0-9a-f]+$")
    for pair in e.pairs.values():
        if pair.kind == "background":
            continue
        log = e.host_states[pair.a.host].nccl_log
        hits = [m for line in log if (m := qpn_line.match(line)) and int(m.group(6)) == pair.a_qpn]
        assert len(hits) == 1
        assert int(hits[0].group(2)) == pair.a_pid and hits[0].group(5) == pair.a.rdma_device.removeprefix("mlx5_")
        assert any(f"IbDev {pair.a.rdma_device[-1]} Port 1 qpn {pair.b_qpn} set_ece=" in line for line in log)
    log = e.host_states["host01"].nccl_log
    coll = [line for line in log if " NCCL INFO AllReduce: opCount " in line]
    assert coll and all(re.search(r"count \d+ datatype 9 op 0 root 0 comm 0x[0-9a-f]+ \[nranks=8\] stream 0x", c)
                        for c in coll)
    assert any("ncclCommInitRank" in line and "Init COMPLETE" in line for line in log)
    assert any(re.search(r"Channel \d\d/0 : \d+\[\d\] -> \d+\[\d\] \[send\] via NET/IB/\d/GDRDMA$", x) for x in log)


def test_communicator_recreation_reuses_qp_numbers(tmp_path: Path) -> None:
    wl = validate_workload({"jobs": [{"channels": 1, "compute_gap": "50ms", "recreate_every": "0.3s",
                                      "ops": [{"collective": "allreduce", "size": "8MiB"}]}]}, "t")
    e, gt = run(fabric(hosts=2), wl, tmp_path, 1, qpn_reuse=True)
    data = [f for f in gt.flows.values() if f.direction == "data"]
    destroyed = [f for f in data if f.destroyed_ns is not None]
    assert destroyed, "the communicator was re-created"
    by_qpn: dict[tuple[str, int], list[int]] = {}
    for f in data:
        by_qpn.setdefault((f.src_nic, f.src_qpn), []).append(f.created_ns)
    assert any(len(v) > 1 for v in by_qpn.values())  # same QPN, a new generation
    for (host, _dev), _ in [(k.split(":"), 0) for k, _ in by_qpn]:
        destroy_lines = [x for x in e.host_states[host].nccl_log if "Destroy COMPLETE" in x]
        assert destroy_lines
    live = {(q.rdma_device, q.lqpn): q.created_ns for q in e.host_states["host01"].qps.values()}
    assert len(live) == 2 and all(c > START for c in live.values())  # only the current communicator's QPs


def test_steady_flows_carry_the_job_the_workload_names_and_none_otherwise(tmp_path: Path) -> None:
    # A flow's job is the scheduler's name for it; a flow the workload gives no job (an ib_write_bw from a shell)
    # has none, never an invented one.
    wl = validate_workload({"seed": 1, "flows": [{"src": "host01:mlx5_0", "dst": "host03:mlx5_0", "job": "train-7"},
                                                 {"src": "host02:mlx5_0", "dst": "host04:mlx5_0"}]}, "test")
    _, gt = run(fabric(), wl, tmp_path, 1)
    jobs = {f.src_nic: f.job for f in gt.flows.values() if f.direction == "data"}
    assert jobs == {"host01:mlx5_0": "train-7", "host02:mlx5_0": ""}
