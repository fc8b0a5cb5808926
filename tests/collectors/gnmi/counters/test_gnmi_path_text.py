"""gnmic-style path text -> gnmi.Path: module prefixes stay on their element, an origin only where written.

Conventions: openconfig/reference rpc/gnmi/gnmi-path-conventions.md (elements are strings, key values may hold
``/``), gnmi-specification.md 2.7.2 (origin is not a YANG namespace), gnmic's ``origin:/path`` form."""

from __future__ import annotations

import pytest

from flowtracer.collectors.gnmi.counters.paths import format_path, parse_path


def elems(text: str) -> tuple[str, list[tuple[str, dict[str, str]]]]:
    p = parse_path(text)
    return p.origin, [(e.name, dict(e.key)) for e in p.elem]


@pytest.mark.parametrize(("text", "origin", "want"), [
    ("/openconfig-interfaces:interfaces/interface[name=*]/state/counters", "",
     [("openconfig-interfaces:interfaces", {}), ("interface", {"name": "*"}), ("state", {}), ("counters", {})]),
    ("openconfig-interfaces:interfaces/interface", "", [("openconfig-interfaces:interfaces", {}), ("interface", {})]),
    ("/oc-if:interfaces/oc-if:interface[name=Ethernet1/1]", "",
     [("oc-if:interfaces", {}), ("oc-if:interface", {"name": "Ethernet1/1"})]),
    ("openconfig:/interfaces/interface[name=Ethernet1/1]/state", "openconfig",
     [("interfaces", {}), ("interface", {"name": "Ethernet1/1"}), ("state", {})]),
    ("openconfig-interfaces:/interfaces/interface", "openconfig-interfaces", [("interfaces", {}), ("interface", {})]),
    ("sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet0", "sonic-db",
     [("COUNTERS_DB", {}), ("localhost", {}), ("COUNTERS", {}), ("Ethernet0", {})]),
    ("COUNTERS/Ethernet*", "", [("COUNTERS", {}), ("Ethernet*", {})]),
    ("/network-instances/network-instance[name=default]/protocols/protocol[identifier=BGP][name=BGP]", "",
     [("network-instances", {}), ("network-instance", {"name": "default"}), ("protocols", {}),
      ("protocol", {"identifier": "BGP", "name": "BGP"})]),
    ("/a[k=x=y]/b[k=v\\]w]", "", [("a", {"k": "x=y"}), ("b", {"k": "v]w"})]),
])
def test_paths(text: str, origin: str, want: list[tuple[str, dict[str, str]]]) -> None:
    assert elems(text) == (origin, want)


def test_format_round_trips_and_shows_the_target() -> None:
    for text in ("/openconfig-interfaces:interfaces/interface[name=*]/state", "openconfig:/a/b[k=v\\]w]"):
        assert format_path(parse_path(text)) == text
    prefix = parse_path("/COUNTERS")
    prefix.target = "COUNTERS_DB"
    assert format_path(parse_path("Ethernet9"), prefix) == "target=COUNTERS_DB /COUNTERS/Ethernet9"


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty path"), ("/a//b", "empty element"), ("/a[k]", "bad key selector"), ("/a[k=]", "bad key selector"),
    ("/a[k=v", "unbalanced"), ("/a]", "unbalanced"), ("[k=v]/a", "without an element name"),
    ("/a[k=v]b", "'/' is missing"),
])
def test_bad_paths_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_path(text)
