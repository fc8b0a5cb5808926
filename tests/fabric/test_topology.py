"""The topology loader accepts a good file and rejects each class of mistake with a located one-line message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flowtracer.fabric.routing import Fabric, weighted_members
from flowtracer.fabric.topology import TopologyError, load_topology, parse_topology

GOOD = (Path(__file__).parent / "tiny_topology.yaml").read_text()

# (case, text replaced in GOOD, replacement, expected error after "<source>:")
BAD_CASES = [
    ("unknown switch in a link", "b: spine2:Ethernet2}", "b: spine9:Ethernet2}",
     "13: links[3].b: unknown switch 'spine9'; known: leaf1, leaf2, spine1, spine2"),
    ("port used twice by links", "a: leaf2:Ethernet4", "a: leaf2:Ethernet3",
     "13: links[3].a: port leaf2:Ethernet3 is already used by links[2].a"),
    ("port used by a link and a NIC", "leaf: leaf2:Ethernet1", "leaf: leaf2:Ethernet4",
     "18: hosts[1].nics[0].leaf: port leaf2:Ethernet4 is already used by links[3].a"),
    ("duplicate IP", "ip: 10.0.0.2", "ip: 10.0.0.1",
     "18: hosts[1].nics[0].ip: duplicate IP 10.0.0.1: already the IP of h1/mlx5_0"),
    ("mismatched link speeds (declared port)", "{name: spine2, role: spine,",
     "{name: spine2, role: spine, ports: {Ethernet1: 100G},",
     "11: links[1]: mismatched link speeds: leaf1:Ethernet4 400G, spine2:Ethernet1 100G"),
    ("mismatched link speeds (link vs ports)", "{a: leaf1:Ethernet3, b: spine1:Ethernet1}",
     "{a: leaf1:Ethernet3, b: spine1:Ethernet1, speed: 200G}",
     "10: links[0]: mismatched link speeds: leaf1:Ethernet3 400G, spine1:Ethernet1 400G, link 200G"),
    ("mismatched NIC speed", "ip: 10.0.0.2,", "ip: 10.0.0.2, speed: 100G,",
     "18: hosts[1].nics[0].speed: mismatched link speeds: NIC 100G but leaf2:Ethernet1 is 400G"),
    ("leaf with no uplink", "  - {a: leaf2:Ethernet3, b: spine1:Ethernet2}\n  - {a: leaf2:Ethernet4, b: spine2:Ethernet2}\n",
     "", "6: switches[1]: leaf leaf2 has no uplink to a spine"),
    ("malformed address", "address: 127.0.0.1, port: 50003", "address: 127.0.0.300, port: 50003",
     "7: switches[2].gnmi.address: '127.0.0.300' is not a valid IP address or hostname"),
    ("malformed hostname", "address: 127.0.0.1, port: 50003", "address: 'sw_1..x', port: 50003",
     "7: switches[2].gnmi.address: 'sw_1..x' is not a valid IP address or hostname"),
    ("port out of range", "port: 50004", "port: 70000",
     "8: switches[3].gnmi.port: Input should be less than or equal to 65535"),
    ("malformed NIC IP", "ip: 10.0.0.2", "ip: 10.0.0",
     "18: hosts[1].nics[0].ip: '10.0.0' is not a valid IP address"),
    ("malformed port reference", "b: spine1:Ethernet1}", "b: spine1}",
     "10: links[0].b: 'spine1' is not 'switch:port'"),
    ("unknown role", "role: spine, gnmi: {address: 127.0.0.1, port: 50004}",
     "role: spline, gnmi: {address: 127.0.0.1, port: 50004}",
     "8: switches[3].role: 'spline' is not one of: 'leaf', 'spine' or 'super-spine'"),
    ("unknown field", "name: tiny", "name: tiny\ncolour: blue",
     "2: colour: unknown field 'colour'"),
    ("missing field", "netdev: eth0, ip: 10.0.0.2", "ip: 10.0.0.2",
     "18: hosts[1].nics[0].netdev: missing required field 'netdev'"),
    ("duplicate switch", "{name: spine2, role: spine", "{name: spine1, role: spine",
     "8: switches[3].name: switch 'spine1' is defined twice"),
    ("duplicate gNMI endpoint", "port: 50004", "port: 50003",
     "8: switches[3].gnmi: gNMI endpoint 127.0.0.1:50003 is already used by spine1"),
    ("NIC on a spine", "leaf: leaf2:Ethernet1", "leaf: spine2:Ethernet7",
     "18: hosts[1].nics[0].leaf: spine2 is a spine; host NICs attach to leaves"),
    ("host in links", "b: spine2:Ethernet2}", "b: h2:mlx5_0}",
     "13: links[3].b: unknown switch 'h2' (host NICs attach with hosts[].nics[].leaf); known: leaf1, leaf2, spine1, spine2"),
    ("inline password", "port: 50001}", "port: 50001, credentials: {username: admin, password: hunter2}}",
     "5: switches[0].gnmi.credentials: passwords are not accepted inline; use password_env or password_file"),
    ("bad speed", "port_speed: 400G", "port_speed: fast",
     "3: defaults.port_speed: 'fast' is not a speed (examples: 400G, 100Gbps, 25000000000)"),
    ("bad hash algorithm", "port_speed: 400G", "port_speed: 400G\n  ecmp_hash: {algorithm: md5}",
     "4: defaults.ecmp_hash.algorithm: 'md5' is not one of: 'crc16-ccitt', 'crc32' or 'xor-fold'"),
    ("YAML syntax", "- {name: leaf1,", "- {name: leaf1,,",
     "5:18: YAML syntax error: did not find expected node content"),
    ("not a mapping", GOOD, "- just\n- a list\n",
     " expected a mapping with 'switches', 'links' and 'hosts'"),
]


def test_good_file_loads() -> None:
    topo = parse_topology(GOOD, "tiny.yaml")
    assert [s.name for s in topo.switches] == ["leaf1", "leaf2", "spine1", "spine2"]
    assert topo.hosts[0].nics[0].speed == 400_000_000_000


@pytest.mark.parametrize(("case", "old", "new", "expected"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_file_is_rejected_with_located_message(case: str, old: str, new: str, expected: str) -> None:
    assert old in GOOD, f"test case {case!r} does not apply to the base file"
    with pytest.raises(TopologyError) as err:
        parse_topology(GOOD.replace(old, new, 1), "tiny.yaml")
    assert str(err.value) == "tiny.yaml:" + expected
    assert "\n" not in str(err.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match=r"nope\.yaml: no such file"):
        load_topology(tmp_path / "nope.yaml")


def test_roundtrip_through_yaml() -> None:
    topo = parse_topology(GOOD)
    assert parse_topology(topo.to_yaml()) == topo


def test_cli_check_rejects_with_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("ip: 10.0.0.2", "ip: 10.0.0.1"))
    run = subprocess.run([sys.executable, "-m", "flowtracer", "topology", "check", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr == f"invalid topology: {bad}:18: hosts[1].nics[0].ip: duplicate IP 10.0.0.1: already the IP of h1/mlx5_0\n"


def test_tiny_fabric_paths_and_groups() -> None:
    fabric = Fabric(parse_topology(GOOD))
    paths = fabric.equal_cost_paths("h1:mlx5_0", "h2:mlx5_0")
    assert paths == (
        ("h1:mlx5_0>leaf1:Ethernet1", "leaf1:Ethernet3>spine1:Ethernet1", "spine1:Ethernet2>leaf2:Ethernet3",
         "leaf2:Ethernet1>h2:mlx5_0"),
        ("h1:mlx5_0>leaf1:Ethernet1", "leaf1:Ethernet4>spine2:Ethernet1", "spine2:Ethernet2>leaf2:Ethernet4",
         "leaf2:Ethernet1>h2:mlx5_0"),
    )
    assert sorted(fabric.ecmp_groups) == ["leaf1:spine1|spine2", "leaf2:spine1|spine2"]
    g = fabric.ecmp_groups["leaf1:spine1|spine2"]
    assert [m.id for m in g.members] == ["leaf1:Ethernet3>spine1:Ethernet1", "leaf1:Ethernet4>spine2:Ethernet1"]
    assert g.destinations == ("leaf2",)
    assert fabric.group_of("leaf1", "leaf2") is g
    assert fabric.group_of("spine1", "leaf2") is None


@pytest.mark.parametrize(("weights", "table"), [
    ({}, ["spine1", "spine2"]),  # plain ECMP: the member list
    ({"leaf1:Ethernet4>spine2:Ethernet1": 2}, ["spine1", "spine2", "spine2"]),
    ({"leaf1:Ethernet3>spine1:Ethernet1": 3, "other": 5}, ["spine1", "spine1", "spine1", "spine2"]),
])
def test_weighted_members_replicate_each_member_by_its_weight(weights: dict[str, int], table: list[str]) -> None:
    fabric = Fabric(parse_topology(GOOD))
    members = fabric.next_hops("leaf1", "leaf2")
    assert [m.dst_node for m in weighted_members(members, weights)] == table


def test_a_withdrawn_next_hop_leaves_only_its_own_direction() -> None:
    fabric = Fabric(parse_topology(GOOD))
    withdrawn = frozenset({"leaf1:Ethernet3>spine1:Ethernet1"})  # leaf1's route via spine1, the cable up
    assert [m.dst_node for m in fabric.next_hops("leaf1", "leaf2", withdrawn)] == ["spine2"]
    assert [m.dst_node for m in fabric.next_hops("leaf2", "leaf1", withdrawn)] == ["spine1", "spine2"]


def test_link_down_shrinks_group_and_reroutes() -> None:
    fabric = Fabric(parse_topology(GOOD))
    down = frozenset({"spine1:Ethernet2>leaf2:Ethernet3"})
    # spine1 no longer reaches leaf2 in one hop, so leaf1 stops using it: its group shrinks to spine2.
    assert [m.dst_node for m in fabric.next_hops("leaf1", "leaf2", down)] == ["spine2"]
    from flowtracer.fabric.ecmp_hash import HeaderFields

    for sport in range(49152, 49252):
        path = fabric.hash_path(HeaderFields("10.0.0.1", "10.0.0.2", sport), "h1:mlx5_0", "h2:mlx5_0", down)
        assert path is not None and path[1] == "leaf1:Ethernet4>spine2:Ethernet1"
    # A NIC link down makes its host unreachable rather than silently taking another path.
    assert fabric.hash_path(HeaderFields("10.0.0.1", "10.0.0.2", 50000), "h1:mlx5_0", "h2:mlx5_0",
                            frozenset({"leaf2:Ethernet1>h2:mlx5_0"})) is None
