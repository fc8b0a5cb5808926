"""Discovery's pure core: gNMI leaves -> switch facts -> a topology file (no servers)."""

from __future__ import annotations

from typing import Any

from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.collectors.gnmi.discovery.build import build_topology
from flowtracer.collectors.gnmi.discovery.facts import Neighbor, SwitchFacts, port_speed_bps, switch_facts
from flowtracer.fabric.host_inventory import HostInventory, InventoryNic
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_diff import ecmp_routes

G = 10**9


def elems(text: str) -> list[tuple[str, dict[str, str]]]:
    return [(e.name, dict(e.key)) for e in parse_path(text).elem]


def test_leaves_become_facts() -> None:
    aft = "/network-instances/network-instance[name=default]/afts"
    f = switch_facts("leaf1", [
        (elems("/interfaces/interface[name=E1]/ethernet/state/port-speed"), "openconfig-if-ethernet:SPEED_100GB"),
        (elems("/interfaces/interface[name=E1]/subinterfaces/subinterface[index=0]/ipv4/addresses/"
               "address[ip=172.16.0.0]/state/prefix-length"), 31),
        (elems("/lldp/interfaces/interface[name=E1]/neighbors/neighbor[id=x]/state/system-name"), "spine1"),
        (elems("/lldp/interfaces/interface[name=E1]/neighbors/neighbor[id=x]/state/port-id"), "E7"),
        (elems(f"{aft}/next-hops/next-hop[index=9]/state/ip-address"), "172.16.0.1"),
        (elems(f"{aft}/next-hops/next-hop[index=9]/interface-ref/state/interface"), "E1"),
        (elems(f"{aft}/next-hop-groups/next-hop-group[id=4]/next-hops/next-hop[index=9]/state/weight"), "3"),
        (elems(f"{aft}/ipv4-unicast/ipv4-entry[prefix=10.0.0.2/32]/state/next-hop-group"), "4"),
        (elems("/interfaces/interface[name=E2]/ethernet/state/port-speed"), "SPEED_UNKNOWN"),
        (elems("/interfaces/interface[name=E3]/subinterfaces/subinterface[index=0]/ipv4/addresses/"
               "address[ip=300.1.1.1]/state/prefix-length"), 31),
        (elems("/interfaces/interface[name=E1]/state/counters/in-octets"), 5),  # not discovery's: ignored
    ])
    assert f.port_speeds == {"E1": 100 * G}
    assert f.addresses == {"E1": "172.16.0.0/31"}
    assert f.neighbors == {"E1": Neighbor(system_name="spine1", port_id="E7")}
    assert (f.next_hop_ip, f.next_hop_port, f.groups, f.routes) == ({9: "172.16.0.1"}, {9: "E1"}, {4: {9: 3}},
                                                                    {"10.0.0.2/32": 4})
    assert f.problems[0] == "leaf1 /interfaces/interface/ethernet/state/port-speed: unknown port speed 'SPEED_UNKNOWN'"
    assert "300.1.1.1/31" in f.problems[1] and len(f.problems) == 2
    assert port_speed_bps("SPEED_2500MB") == 2_500_000_000 and port_speed_bps("400000000000") == 400 * G


def fabric_facts() -> list[SwitchFacts]:
    """Two leaves, two spines, three hosts (h3 with a NIC on each leaf: two rails); leaf1 weights spine1 2:1."""
    def sw(name: str, speed: int = 400 * G, **kw: Any) -> SwitchFacts:
        f = SwitchFacts(name, **kw)
        f.port_speeds = {p: speed for p in f.neighbors}
        return f
    leaf1 = sw("leaf1", neighbors={
        "E1": Neighbor("h1", "ens1", "mlx5_0", management_address="10.0.0.1"),
        "E2": Neighbor("h3", "ens1", "mlx5_0", management_address="10.0.0.3"),
        "E3": Neighbor("spine1", "E1"), "E4": Neighbor("spine2.example.net", "E1"),
        "E9": Neighbor("h9", "ens1", "mlx5_0")},  # no management address: left out with a warning
        addresses={"E3": "172.16.0.0/31", "E4": "172.16.0.2/31"},
        next_hop_ip={1: "172.16.0.1", 2: "172.16.0.3"}, next_hop_port={1: "E3"},  # 2: found by its subnet
        groups={70: {1: 2, 2: 1}}, routes={"10.0.1.0/24": 70, "10.0.0.1/32": 99, "192.0.2.0/24": 70})
    leaf2 = sw("leaf2", neighbors={
        "E1": Neighbor("h2", "ens1", "mlx5_0", management_address="10.0.1.2"),
        "E2": Neighbor("h3", "ens2", "mlx5_1", management_address="10.0.1.3"),
        "E3": Neighbor("spine1", "E2"), "E4": Neighbor("spine2", "E2")},
        addresses={"E3": "172.16.0.4/31", "E4": "172.16.0.6/31"},
        next_hop_port={5: "E3", 6: "E4"}, groups={8: {5: 1, 6: 1}}, routes={"10.0.0.0/24": 8})
    spine1 = sw("spine1", neighbors={"E1": Neighbor("leaf1", "E3"), "E2": Neighbor("leaf2", "E3")},
                addresses={"E1": "172.16.0.1/31", "E2": "172.16.0.5/31"})
    spine2 = sw("spine2.example.net", neighbors={"E1": Neighbor("leaf1", "E4"), "E2": Neighbor("leaf2", "E4")},
                addresses={"E1": "172.16.0.3/31", "E2": "172.16.0.7/31"})
    return [spine2, leaf2, spine1, leaf1]


def test_facts_build_a_valid_topology() -> None:
    eps = {"leaf1": {"address": "192.0.2.1", "port": 6030}}
    found = build_topology(fabric_facts(), eps, name="lab")
    topo = found.topology
    assert [(s.name, s.role.value) for s in topo.switches] == [
        ("leaf1", "leaf"), ("leaf2", "leaf"), ("spine1", "spine"), ("spine2.example.net", "spine")]
    assert topo.switch("leaf1").gnmi.port == 6030 and topo.switch("leaf2").gnmi is None
    # One link per cable, `a` the lower address: the addressing plan's order.
    assert [(link.a, link.b) for link in topo.links] == [
        ("leaf1:E3", "spine1:E1"), ("leaf1:E4", "spine2.example.net:E1"),
        ("leaf2:E3", "spine1:E2"), ("leaf2:E4", "spine2.example.net:E2")]
    hosts = {h.name: h for h in topo.hosts}
    assert sorted(hosts) == ["h1", "h2", "h3"]
    assert [(n.rdma_device, n.netdev, n.ip, n.leaf, n.rail) for n in hosts["h3"].nics] == [
        ("mlx5_0", "ens1", "10.0.0.3", "leaf1:E2", 0), ("mlx5_1", "ens2", "10.0.1.3", "leaf2:E2", 1)]
    assert [g.model_dump() for g in topo.ecmp_groups] == [
        {"switch": "leaf1", "destinations": ("leaf2",), "members": {"E3": 2, "E4": 1}},
        {"switch": "leaf2", "destinations": ("leaf1",), "members": {"E3": 1, "E4": 1}}]
    assert ecmp_routes(topo)[("leaf1", "leaf2")] == {"E3": 2, "E4": 1}
    assert any("h9" in w and "no usable management address" in w for w in found.warnings)
    assert Fabric(topo).path_count("leaf1", "leaf2") == 2


def test_an_odd_speed_is_declared_on_its_port() -> None:
    facts = fabric_facts()
    for f in facts:
        if f.name == "leaf2":
            f.port_speeds["E1"] = 100 * G
    topo = build_topology(facts, {}).topology
    assert topo.defaults.port_speed == 400 * G
    assert topo.switch("leaf2").ports == {"E1": 100 * G}
    assert {h.name: h.nics[0].speed for h in topo.hosts}["h2"] == 100 * G


def test_inventories_name_and_place_nics() -> None:
    """h9's LLDP has no address: its inventory gives it; h4 is heard by no switch but hears leaf2:E5; the other
    inventory NICs are left out, one line each, for a reason each."""
    nic = InventoryNic
    invs = [HostInventory(host="h9", nics=(nic(rdma_device="mlx5_0", netdev="ens1", ip="10.0.0.9"),)),
            HostInventory(host="h4", nics=(
                nic(rdma_device="mlx5_0", netdev="ens1", ip="10.0.1.4", switch_port="leaf2:E5"),
                nic(rdma_device="mlx5_1", port=2, netdev="ens2", ip="10.0.1.5", switch_port="leaf2:E3"),
                nic(rdma_device="mlx5_2", netdev="ens3", ip="10.0.1.6", switch_port="leaf2:E1"),
                nic(rdma_device="mlx5_3", netdev="ens4", ip="10.0.1.7")))]
    found = build_topology(fabric_facts(), {}, inventories=invs)
    hosts = {h.name: h for h in found.topology.hosts}
    assert [(n.rdma_device, n.ip, n.leaf) for n in hosts["h9"].nics] == [("mlx5_0", "10.0.0.9", "leaf1:E9")]
    assert [(n.rdma_device, n.ip, n.leaf) for n in hosts["h4"].nics] == [("mlx5_0", "10.0.1.4", "leaf2:E5")]
    assert [w.split(": ", 1)[1] for w in found.warnings if w.startswith("host h4")] == [
        "hears leaf2:E3, which is not a host port of a target: NIC left out",
        "hears leaf2:E1, where the switch hears h2: NIC left out",
        "no switch heard it over LLDP and it heard none: NIC left out"]
    assert not any("management address" in w for w in found.warnings)


def test_a_switch_without_aft_gets_the_links_groups() -> None:
    facts = fabric_facts()
    for f in facts:
        if f.name == "leaf1":
            f.aft, f.groups, f.routes = False, {}, {}
    found = build_topology(facts, {})
    assert found.derived == ("leaf1",)
    assert [g.model_dump() for g in found.topology.ecmp_groups if g.switch == "leaf1"] == [
        {"switch": "leaf1", "destinations": ("leaf2",), "members": {"E3": 1, "E4": 1}}]
