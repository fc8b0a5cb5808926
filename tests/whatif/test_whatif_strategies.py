"""Every what-if strategy on a case small enough to solve by hand: 4 equal flows from leaf1 to leaf2 over 2 uplinks.

The switches hash with XOR-fold over the UDP source port alone, so a flow's member is its source
port's parity (even: spine1, odd: spine2); with the destination QP added (E-ECMP) it is the parity
of sport xor bit 8 of the QP number. Everything below follows from that by hand.
"""

from __future__ import annotations

import pytest

from flowtracer.fabric.ecmp_hash import EcmpHash, HashAlgorithm, HashField, HeaderFields
from flowtracer.fabric.roce import rocev2_udp_sport
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import parse_topology
from flowtracer.whatif.fabric import ConditionError, ReplayFabric, parse_conditions
from flowtracer.whatif.record import RecordedFlow, Window
from flowtracer.whatif.replay import Traffic, replay
from flowtracer.whatif.routes import demands
from flowtracer.whatif.source_ports import flow_label_for
from flowtracer.whatif.strategies import StrategyError, parse_strategy, route_all

S = 1_000_000_000
B = 25_000_000_000  # bytes per flow per window: 200 Gbit/s for one second
UP1 = "leaf1:Ethernet3>spine1:Ethernet1"
UP2 = "leaf1:Ethernet4>spine2:Ethernet1"
IPS = {"h1": "10.0.0.1", "h2": "10.0.0.2", "h3": "10.0.0.3", "h4": "10.0.0.4"}

TOPOLOGY = """
name: four
defaults:
  port_speed: 400G
  ecmp_hash: {fields: [udp_src_port], algorithm: xor-fold}
switches:
  - {name: leaf1, role: leaf}
  - {name: leaf2, role: leaf}
  - {name: spine1, role: spine}
  - {name: spine2, role: spine}
links:
  - {a: leaf1:Ethernet3, b: spine1:Ethernet1}
  - {a: leaf1:Ethernet4, b: spine2:Ethernet1}
  - {a: leaf2:Ethernet3, b: spine1:Ethernet2}
  - {a: leaf2:Ethernet4, b: spine2:Ethernet2}
hosts:
  - {name: h1, nics: [{rdma_device: mlx5_0, netdev: eth0, ip: 10.0.0.1, leaf: leaf1:Ethernet1}]}
  - {name: h2, nics: [{rdma_device: mlx5_0, netdev: eth0, ip: 10.0.0.2, leaf: leaf1:Ethernet2}]}
  - {name: h3, nics: [{rdma_device: mlx5_0, netdev: eth0, ip: 10.0.0.3, leaf: leaf2:Ethernet1}]}
  - {name: h4, nics: [{rdma_device: mlx5_0, netdev: eth0, ip: 10.0.0.4, leaf: leaf2:Ethernet2}]}
"""


def fabric(hash_yaml: str | None = None) -> Fabric:
    text = TOPOLOGY if hash_yaml is None else TOPOLOGY.replace(
        "{fields: [udp_src_port], algorithm: xor-fold}", hash_yaml)
    return Fabric(parse_topology(text, "four.yaml"))


def flow(src: str, dst: str, sport: int, lqpn: int, rqpn: int, nbytes: int = B, channel: int = -1,
         comm: str = "") -> RecordedFlow:
    return RecordedFlow(f"{src}:mlx5_0/{lqpn}/1", f"{src}:mlx5_0", f"{dst}:mlx5_0", IPS[src], IPS[dst], sport,
                        4791, lqpn, rqpn, nbytes, comm_id=comm, channel=channel)


#: Four flows leaf1 -> leaf2, all with even source ports: ECMP puts every one on spine1.
FOUR = [flow("h1", "h3", 50000, 0x10, 0x100), flow("h1", "h4", 50002, 0x11, 0x200),
        flow("h2", "h3", 50004, 0x20, 0x300), flow("h2", "h4", 50006, 0x21, 0x400)]


def run(strategy: str, flows: list[RecordedFlow] = FOUR, fab: Fabric | None = None, degrade: tuple[str, ...] = (),
        fail: tuple[str, ...] = ()):
    fab = fab or fabric()
    rf = ReplayFabric(fab, parse_conditions(fab, degrade, fail))
    windows = [Window(0, S, tuple(flows))]
    spec = parse_strategy(strategy)
    routes = route_all(spec, demands(windows), rf)
    return replay(Traffic.of(windows), routes, rf, spec.label), routes


def uplinks(result) -> list[float]:
    return [result.group_member_bytes["leaf1:spine1|spine2"].get(UP1, 0.0),
            result.group_member_bytes["leaf1:spine1|spine2"].get(UP2, 0.0)]


def test_ecmp_puts_even_ports_on_one_uplink() -> None:
    r, _ = run("ecmp")
    assert uplinks(r) == [4 * B, 0]
    assert r.fim == pytest.approx(1.0)
    assert r.fim_flows == pytest.approx(1.0)
    assert r.max_util == pytest.approx(4 * B * 8 / 400e9)  # 2.0: twice what the uplink carries in a second
    assert r.max_util_link == UP1


def test_a_seed_only_relabels_members() -> None:
    # XOR-fold xors the seed into the hash: seed 1 flips every parity, so all four move to spine2 together.
    r, _ = run("ecmp:seed=1")
    assert uplinks(r) == [0, 4 * B]
    assert r.fim == pytest.approx(1.0)


def test_e_ecmp_spreads_on_the_destination_qp() -> None:
    # parity(sport) xor bit 8 of the QP: 0x100, 0x200, 0x300, 0x400 -> 1, 0, 1, 0 -> spine2, spine1, spine2, spine1.
    r, routes = run("e-ecmp")
    assert uplinks(r) == [2 * B, 2 * B]
    assert r.fim == pytest.approx(0.0)
    assert routes[FOUR[0].flow_id].subflows[0].paths[0][0][1] == UP2


def test_static_pinning_by_destination_ordinal() -> None:
    # h3 is the first NIC of leaf2 -> member 0 (spine1), h4 the second -> member 1 (spine2).
    r, routes = run("static-dst")
    assert uplinks(r) == [2 * B, 2 * B]
    assert r.fim == 0.0
    assert routes[FOUR[0].flow_id].subflows[0].paths[0][0][1] == UP1
    assert routes[FOUR[1].flow_id].subflows[0].paths[0][0][1] == UP2


def test_static_pinning_tuned_on_traffic_gives_one_route_per_destination() -> None:
    r, routes = run("static-dst:by=traffic")
    assert uplinks(r) == [2 * B, 2 * B]
    to_h3 = {routes[f.flow_id].subflows[0].paths[0][0][1] for f in FOUR if f.dst_nic == "h3:mlx5_0"}
    assert len(to_h3) == 1  # a destination has one static route on the leaf
    assert routes[FOUR[0].flow_id].plan["switch"] == "leaf1"
    assert routes[FOUR[0].flow_id].plan["destination"] == "10.0.0.3"


def test_static_pinning_cannot_split_flows_to_one_host() -> None:
    same = [flow("h1", "h3", 50000 + 2 * i, 0x10 + i, 0x100 + i) for i in range(4)]
    r, _ = run("static-dst", same)
    assert uplinks(r) == [4 * B, 0]
    r, _ = run("static-dst:by=traffic", same)
    assert sorted(uplinks(r)) == [0, 4 * B]


def test_sport_plan_moves_every_other_flow_to_an_odd_port() -> None:
    # Equal bytes: flows in id order alternate spine1, spine2, spine1, spine2; the first port from each flow's
    # own with the right parity: 50000 stays, 50002 -> 50003, 50004 stays, 50006 -> 50007.
    r, routes = run("sport-plan")
    assert uplinks(r) == [2 * B, 2 * B]
    plans = {p["flow_id"]: p for p in r.plans}
    assert [plans[f.flow_id]["new"] for f in FOUR] == [50000, 50003, 50004, 50007]
    assert [plans[f.flow_id]["changed"] for f in FOUR] == [False, True, False, True]
    assert plans[FOUR[1].flow_id]["flow_label"] == 50003 & 0x3FFF
    assert flow_label_for(50003) == 50003 & 0x3FFF
    # The plan really sends each flow where it says: the real hash agrees.
    fab = fabric()
    for f in FOUR:
        p = plans[f.flow_id]
        h = HeaderFields(f.src_ip, f.dst_ip, p["new"], dst_qpn=f.rqpn)
        assert list(fab.hash_path(h, f.src_nic, f.dst_nic)) == p["path"]
        assert routes[f.flow_id].subflows[0].udp_src_port == p["new"]


def test_sport_plan_weighs_bytes_heaviest_first() -> None:
    flows = [flow("h1", "h3", 50000, 1, 0x100, 3 * B), flow("h1", "h4", 50002, 2, 0x200, B),
             flow("h2", "h3", 50004, 3, 0x300, B), flow("h2", "h4", 50006, 4, 0x400, B)]
    r, _ = run("sport-plan", flows)
    assert sorted(uplinks(r)) == [3 * B, 3 * B]


def test_sport_plan_plans_qp_numbers_when_the_hash_reads_them() -> None:
    fab = fabric("{fields: [dst_qpn], algorithm: xor-fold}")
    r, _ = run("sport-plan:field=dst_qpn", fab=fab)
    assert uplinks(r) == [2 * B, 2 * B]
    assert all(p["field"] == "dst_qpn" for p in r.plans)
    for p in r.plans:  # xor-fold of a 3-byte QP number: its parity is bit 8
        assert ((p["new"] >> 8) & 1) == (0 if p["path"][1] == UP1 else 1)


def test_qp_scaling_splits_each_connection_over_n_qps() -> None:
    r, routes = run("qp-scale:n=2")
    expected = [0.0, 0.0]
    for f in FOUR:
        route = routes[f.flow_id]
        assert [s.share for s in route.subflows] == [0.5, 0.5]
        base_l = min(x.lqpn for x in FOUR if x.src_nic == f.src_nic)
        base_r = min(x.rqpn for x in FOUR if x.dst_nic == f.dst_nic)
        for i, sub in enumerate(route.subflows):
            # A NIC numbers connection c's QPs base + 2c, base + 2c + 1.
            lq = base_l + (f.lqpn - base_l) * 2 + i
            rq = base_r + (f.rqpn - base_r) * 2 + i
            assert route.plan["qps"][i] == {"lqpn": lq, "rqpn": rq, "udp_src_port": rocev2_udp_sport(lq, rq)}
            member = EcmpHash((HashField.UDP_SRC_PORT,), HashAlgorithm.XOR_FOLD).member(
                HeaderFields(f.src_ip, f.dst_ip, rocev2_udp_sport(lq, rq)), 2)
            assert sub.paths[0][0][1] == (UP1, UP2)[member]
            expected[member] += B / 2
    assert uplinks(r) == pytest.approx(expected)
    assert sum(uplinks(r)) == pytest.approx(4 * B)


def test_qp_scale_of_one_is_ecmp() -> None:
    a, _ = run("qp-scale:n=1")
    b, _ = run("ecmp")
    assert uplinks(a) == uplinks(b)


def test_spraying_splits_every_flow_evenly() -> None:
    r, routes = run("spray")
    assert uplinks(r) == [2 * B, 2 * B]
    assert r.fim == 0.0
    assert r.fim_flows == 0.0  # every flow counts on both members
    assert sorted(w for _, w in routes[FOUR[0].flow_id].subflows[0].paths) == [0.5, 0.5]


def test_adaptive_spraying_follows_capacity_when_a_link_is_degraded() -> None:
    r, _ = run("spray-adaptive:chunks=3", degrade=("leaf1:Ethernet3=0.5",))
    # 12 chunks of B/3: utilization is equal when spine1's half-capacity uplink gets a third.
    assert uplinks(r) == pytest.approx([4 * B / 3, 8 * B / 3])
    plain, _ = run("spray", degrade=("leaf1:Ethernet3=0.5",))
    assert plain.fim == 0.0 and r.fim > 0.0  # an even split is the wrong split here
    assert r.completion_s < plain.completion_s


def test_least_utilized_places_flows_one_by_one_on_the_emptier_path() -> None:
    r, routes = run("least-utilized")
    assert uplinks(r) == [2 * B, 2 * B]
    # Arrival order = id order: the first takes the first path, the second the other one.
    assert routes[FOUR[0].flow_id].subflows[0].paths[0][0][1] == UP1
    assert routes[FOUR[1].flow_id].subflows[0].paths[0][0][1] == UP2


def test_a_failed_uplink_shrinks_the_group_and_ecmp_rehashes() -> None:
    r, _ = run("ecmp:seed=1", fail=("leaf1:Ethernet4",))
    assert uplinks(r)[0] == 4 * B  # spine2's uplink is gone: everything on spine1
    assert "leaf1:spine1|spine2" in r.group_member_bytes
    assert list(r.group_member_bytes["leaf1:spine1|spine2"]) == [UP1]  # only the live member is counted
    assert r.fim == 0.0  # no group with two live members carried traffic
    for s in ("static-dst", "sport-plan", "spray", "spray-adaptive", "least-utilized", "qp-scale:n=2"):
        assert uplinks(run(s, fail=("leaf1:Ethernet4",))[0])[0] == pytest.approx(4 * B), s


def test_bad_strategy_names_and_parameters_are_one_line_errors() -> None:
    with pytest.raises(StrategyError, match="unknown strategy 'ecmpp'; known: ecmp, e-ecmp"):
        parse_strategy("ecmpp")
    with pytest.raises(StrategyError, match=r"unknown parameter 'n' .*parameters of ecmp: seed, fields"):
        parse_strategy("ecmp:n=4")
    with pytest.raises(StrategyError, match="bad value 'x' for seed"):
        parse_strategy("ecmp:seed=x")
    with pytest.raises(StrategyError, match="n must be at least 1"):
        parse_strategy("qp-scale:n=0")
    assert parse_strategy("ecmp:fields=src_ip,dst_ip,dst_qpn").params["fields"] == (
        HashField.SRC_IP, HashField.DST_IP, HashField.DST_QPN)
    assert parse_strategy("qp-scale:n=8,seed=3").label == "qp-scale:n=8,seed=3"


def test_bad_conditions_name_the_argument() -> None:
    fab = fabric()
    with pytest.raises(ConditionError, match="no cable ends at 'leaf9:Ethernet1'"):
        parse_conditions(fab, fail=["leaf9:Ethernet1"])
    with pytest.raises(ConditionError, match=r"must be in \(0, 1\], got 1\.5"):
        parse_conditions(fab, degrade=["leaf1:Ethernet3=1.5"])
    with pytest.raises(ConditionError, match="give END=FRACTION"):
        parse_conditions(fab, degrade=["leaf1:Ethernet3"])
    c = parse_conditions(fab, degrade=["spine1:Ethernet1=0.25"])  # either end names the cable
    assert c.capacity == {UP1: 0.25, "spine1:Ethernet1>leaf1:Ethernet3": 0.25}
    assert parse_conditions(fab, fail=[UP1]).down == frozenset({UP1})  # a directed link id: one direction
