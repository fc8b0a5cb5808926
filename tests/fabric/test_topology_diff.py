"""``topology diff``: every difference between two topologies named, one line each."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from flowtracer.fabric.topology import Topology, TopologyError, validate_topology
from flowtracer.fabric.topology_diff import diff_topologies, ecmp_routes
from flowtracer.fabric.topology_generate import FabricSpec, generate


def base() -> dict[str, Any]:
    return yaml.safe_load(generate(FabricSpec(hosts=16, leaves=4, spines=2)).to_yaml())


def explicit_groups(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its derived ECMP groups written out (what discovery writes), weights 1."""
    out = copy.deepcopy(data)
    routes = ecmp_routes(validate_topology(data, "a"))
    out["ecmp_groups"] = [{"switch": sw, "destinations": [dst], "members": m}
                          for (sw, dst), m in routes.items() if len(m) > 1]
    return out


def topo(data: dict[str, Any]) -> Topology:
    return validate_topology(data, "test")


def link(data: dict[str, Any], a: str) -> dict[str, Any]:
    return next(x for x in data["links"] if x["a"] == a)


def test_identical_and_equivalent_topologies_have_no_difference() -> None:
    a = base()
    assert diff_topologies(topo(a), topo(a)) == []
    # Groups written out (as discovery does) equal the groups the links imply.
    assert diff_topologies(topo(a), topo(explicit_groups(a))) == []
    moved = copy.deepcopy(a)  # endpoints are not the fabric
    moved["switches"][0]["gnmi"]["port"] = 1
    assert diff_topologies(topo(a), topo(moved)) == []


def test_each_difference_is_named() -> None:
    a = base()
    b = explicit_groups(a)
    # A recabled port: leaf02's first uplink now lands on spine01:Ethernet9 instead of Ethernet2.
    link(b, "leaf02:Ethernet5")["b"] = "spine01:Ethernet9"
    # A changed speed: leaf03's uplink to spine02 runs at 100G.
    up = link(b, "leaf03:Ethernet6")
    up["speed"] = "100G"
    for s in b["switches"]:
        if s["name"] in ("leaf03", "spine02"):
            s["ports"] = {"Ethernet6" if s["name"] == "leaf03" else "Ethernet3": "100G"}
    # A removed next hop and a changed weight, in leaf01's group toward every other leaf.
    for g in b["ecmp_groups"]:
        if g["switch"] == "leaf01":
            del g["members"]["Ethernet6"]
        if g["switch"] == "leaf04":
            g["members"]["Ethernet5"] = 2
    # A host cabled to another leaf port.
    b["hosts"][0]["nics"][0]["leaf"] = "leaf01:Ethernet7"
    assert diff_topologies(topo(a), topo(b)) == [
        "ecmp leaf01 toward leaf02, leaf03, leaf04: next hop Ethernet6 only in A",
        "ecmp leaf04 toward leaf01, leaf02, leaf03: next hop Ethernet5 weight 1 in A, 2 in B",
        "host host01 NIC mlx5_0 port 1: leaf leaf01:Ethernet1 in A, leaf01:Ethernet7 in B",
        "link leaf02:Ethernet5: cabled to spine01:Ethernet2 in A, to spine01:Ethernet9 in B",
        "link leaf03:Ethernet6 - spine02:Ethernet3: speed 400G in A, 100G in B",
    ]
    # Swapped sides swap A and B.
    assert "ecmp leaf01 toward leaf02, leaf03, leaf04: next hop Ethernet6 only in B" in diff_topologies(topo(b),
                                                                                                          topo(a))


def test_switches_hosts_and_whole_groups() -> None:
    a = base()
    b = copy.deepcopy(a)
    b["switches"].append({"name": "spine03", "role": "spine"})
    b["links"] += [{"a": "leaf01:Ethernet9", "b": "spine03:Ethernet1"}, {"a": "leaf02:Ethernet9", "b": "spine03:Ethernet2"}]
    b["hosts"] = b["hosts"][1:]
    b["hosts"][0]["nics"][0]["ip"] = "10.9.9.9"
    lines = diff_topologies(topo(a), topo(b))
    assert "switch spine03: only in B" in lines
    assert "link leaf01:Ethernet9 - spine03:Ethernet1: only in B" in lines
    assert "host host01: only in A" in lines
    assert "host host02 NIC mlx5_0 port 1: ip 10.0.0.2 in A, 10.9.9.9 in B" in lines
    # leaf01 and leaf02 reach each other over spine03 too; spine03 reaches leaf03/04 over either of them.
    assert "ecmp leaf01 toward leaf02: next hop Ethernet9 only in B" in lines
    assert "ecmp spine03 toward leaf03, leaf04: group of Ethernet1, Ethernet2 only in B" in lines
    assert len(lines) == 8


@pytest.mark.parametrize(("group", "message"), [
    ({"switch": "leaf09", "destinations": ["leaf02"], "members": {"Ethernet5": 1}}, "unknown switch 'leaf09'"),
    ({"switch": "leaf01", "destinations": ["leaf02"], "members": {"Ethernet1": 1}},
     "leaf01:Ethernet1 is not the end of a link to another switch"),
    ({"switch": "leaf01", "destinations": ["spine01"], "members": {"Ethernet5": 1}}, "'spine01' is not a leaf"),
    ({"switch": "leaf01", "destinations": ["leaf02"], "members": {"Ethernet5": 0}}, "weights are integers >= 1"),
])
def test_bad_ecmp_groups_are_refused_in_one_line(group: dict[str, Any], message: str) -> None:
    data = base()
    data["ecmp_groups"] = [group]
    with pytest.raises(TopologyError, match="ecmp_groups") as e:
        validate_topology(data, "t.yaml")
    assert message in str(e.value) and "\n" not in str(e.value)
