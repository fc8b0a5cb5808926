"""Request path validation and matching against the served OpenConfig leaves (no server)."""

from __future__ import annotations

import pytest
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.sim.switches.paths import PathError, ReqElem, entity_elems, request_elems, resolve
from flowtracer.sim.switches.schema import INTERFACES, NEXT_HOP_GROUP_MEMBERS

NI = "/network-instances/network-instance[name=default]/afts"


def sel(text: str, prefix: str = "") -> list[tuple[str, tuple[str | None, ...], tuple[str, ...]]]:
    """(table, binds, leaf paths) for a path written the way pygnmi parses it."""
    p = gnmi_path_generator(prefix) if prefix else None
    selection = resolve(request_elems(p, gnmi_path_generator(text)))
    return sorted((s.table.name, s.binds, tuple("/".join(leaf.path) for leaf in s.leaves))
                  for s in selection.selectors)


COUNTERS = ("state/counters/in-octets", "state/counters/out-octets", "state/counters/in-pkts",
            "state/counters/out-pkts", "state/counters/in-unicast-pkts", "state/counters/out-unicast-pkts",
            "state/counters/in-discards", "state/counters/out-discards", "state/counters/in-errors",
            "state/counters/out-errors", "state/counters/last-clear")


@pytest.mark.parametrize(("path", "expected"), [
    ("/interfaces/interface[name=*]/state/counters", [("interface", (None,), COUNTERS)]),
    ("/interfaces/interface/state/counters", [("interface", (None,), COUNTERS)]),
    ("/interfaces/interface[name=Ethernet1]/state/oper-status", [("interface", ("Ethernet1",), ("state/oper-status",))]),
    ("openconfig:interfaces/interface[name=Ethernet1]/state/last-change",
     [("interface", ("Ethernet1",), ("state/last-change",))]),
    ("openconfig-interfaces:interfaces/interface[name=E1]/ethernet/state/port-speed",
     [("interface", ("E1",), ("ethernet/state/port-speed",))]),
    ("/interfaces/*/state/counters/in-octets", [("interface", (None,), ("state/counters/in-octets",))]),
    ("/interfaces/.../in-octets", [("interface", (None,), ("state/counters/in-octets",))]),
    (f"{NI}/next-hops/next-hop[index=*]/state/counters",
     [("next-hop", (None,), ("state/counters/octets-forwarded", "state/counters/packets-forwarded"))]),
    (f"{NI}/counters/next-hops/next-hop[index=007]/state",
     [("next-hop-counters", ("7",), ("state/index", "state/octets-forwarded", "state/packets-forwarded"))]),
    (f"{NI}/next-hops/next-hop[index=*]/interface-ref/state/interface",
     [("next-hop", (None,), ("interface-ref/state/interface",))]),
    (f"{NI}/next-hop-groups/next-hop-group[id=*]/next-hops/next-hop[index=*]/state",
     [("next-hop-group-member", (None, None), ("state/index", "state/weight"))]),
    (f"{NI}/next-hop-groups/next-hop-group[id=3]",
     [("next-hop-group", ("3",), ("state/id",)), ("next-hop-group-member", ("3", None), ("state/index", "state/weight"))]),
    ("/network-instances/network-instance[name=*]/afts/next-hop-groups/next-hop-group/state/id",
     [("next-hop-group", (None,), ("state/id",))]),
    ("/qos/interfaces/interface[interface-id=E2]/output/queues/queue[name=*]/state/ecn-marked-pkts",
     [("queue", ("E2", None), ("state/ecn-marked-pkts",))]),
    ("/qos/interfaces/interface[interface-id=*]/pfc/statistics/pfc-priority[index=03]",
     [("pfc-priority", (None, "3"), ("index", "pfc-pause-frames-received", "pfc-pause-frames-generated"))]),
])
def test_resolve(path: str, expected: list[object]) -> None:
    assert sel(path) == expected


def test_root_and_prefix() -> None:
    everything = sel("/")
    assert {t for t, _, _ in everything} == {"interface", "next-hop", "next-hop-counters", "next-hop-group",
                                             "next-hop-group-member", "queue", "pfc-priority", "ipv4-address",
                                             "lldp-neighbor", "ipv4-entry"}
    assert sel("state/oper-status", prefix="/interfaces/interface[name=E2]") == [
        ("interface", ("E2",), ("state/oper-status",))]


@pytest.mark.parametrize("path", [
    "/interfaces/interface[name=E1]/state/counters/in-octets/extra",  # below a leaf
    "/interfaces/interface[ifname=E1]/state",  # not the list's key
    "/interfaces[name=E1]",  # keys on a container
    "/network-instances/network-instance[name=mgmt]/afts",  # only the default instance exists
    f"{NI}/next-hops/next-hop[index=abc]",  # never matches an integer key
    "/system/state/hostname",  # not served
])
def test_unknown_paths_select_nothing(path: str) -> None:
    assert sel(path) == []


def test_wildcard_flag() -> None:
    assert not resolve(request_elems(None, gnmi_path_generator("/interfaces/interface[name=E1]"))).wildcard
    assert resolve(request_elems(None, gnmi_path_generator("/interfaces/interface[name=*]"))).wildcard
    assert resolve(request_elems(None, gnmi_path_generator("/interfaces"))).wildcard


def test_use_models_filters_leaves() -> None:
    elems = request_elems(None, gnmi_path_generator("/interfaces/interface[name=E1]"))
    only_eth = resolve(elems, ["openconfig-if-ethernet"]).selectors
    assert [leaf.path for s in only_eth for leaf in s.leaves] == [("ethernet", "state", "port-speed")]


def _path(*elems: tuple[str, dict[str, str]], origin: str = "", target: str = "") -> gnmi_pb2.Path:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=n, key=k) for n, k in elems], origin=origin, target=target)


@pytest.mark.parametrize(("prefix", "path", "message"), [
    (None, _path(("interfaces", {}), ("", {})), "element 1: '' is not a valid node name"),
    (None, _path(("inter faces", {})), "not a valid node name"),
    (None, _path(("...", {"a": "b"})), "'...' cannot carry keys"),
    (None, _path(("interface", {"": "x"})), "is not a valid key name"),
    (None, _path(("interfaces", {}), origin="cli"), "unsupported origin 'cli'"),
    (_path(origin="openconfig"), _path(("interfaces", {}), origin="rfc7951"), "origin differ"),
    (None, _path(("interfaces", {}), target="leaf1"), "only allowed in the prefix"),
    (None, gnmi_pb2.Path(element=["interfaces"]), "deprecated string 'element'"),
    (None, _path(*[("a", {})] * 40), "more than 32"),
    (None, _path(*[("...", {}), ("*", {})] * 6), "at most 4"),
])
def test_invalid_paths(prefix: gnmi_pb2.Path | None, path: gnmi_pb2.Path, message: str) -> None:
    with pytest.raises(PathError, match=message.replace("(", r"\(").replace("[", r"\[")):
        request_elems(prefix, path)


def test_consecutive_multi_level_wildcards_collapse() -> None:
    elems = request_elems(None, _path(*[("...", {})] * 10, ("in-octets", {})))
    assert elems == (ReqElem("..."), ReqElem("in-octets"))


def test_entity_elems() -> None:
    assert entity_elems(INTERFACES, ("Ethernet1/1",)) == [("interfaces", {}), ("interface", {"name": "Ethernet1/1"})]
    assert entity_elems(NEXT_HOP_GROUP_MEMBERS, ("3", "12"))[1:] == [
        ("network-instance", {"name": "default"}), ("afts", {}), ("next-hop-groups", {}),
        ("next-hop-group", {"id": "3"}), ("next-hops", {}), ("next-hop", {"index": "12"})]
