"""Vendor profiles: every shipped one loads and cites a source per path; a bad file says file, line and key;
templates match, fill and wildcard as the collector and the simulator use them; value formats go both ways."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flowtracer.fabric.platform_formats import FORMATS, from_platform, to_platform
from flowtracer.fabric.platform_profiles import (
    CANONICAL,
    PROFILE_DIR,
    ProfileError,
    check_platform,
    load_profile,
    parse_profile,
    parse_template,
    platforms,
)

SHIPPED = ("arista_eos", "cisco_nxos", "nokia_srl", "openconfig", "sonic")


def test_the_five_platforms_ship_and_load() -> None:
    assert platforms() == SHIPPED
    for name in SHIPPED:
        p = load_profile(name)
        assert p.platform == name
        assert p.leaves, name
        for leaf in p.leaves.values():
            assert leaf.source, (name, leaf.key)
        assert "interface.in-octets" in p.leaves and "interface.out-octets" in p.leaves  # link loads need them
        # Every canonical leaf is mapped, or the profile says (for it, its group, or LLDP) what flowtracer does
        # without it: docs/collectors.md's "not available" column comes from here.
        lldp_said = any(k.startswith("lldp.") for k in p.missing)
        for key, c in CANONICAL.items():
            assert key in p.leaves or key in p.missing or c.group in p.missing or \
                (key.startswith("lldp.") and lldp_said), (name, key)


def test_only_openconfig_is_read_as_it_comes() -> None:
    assert load_profile("openconfig").is_openconfig
    assert not any(load_profile(n).is_openconfig for n in SHIPPED if n != "openconfig")
    # The OpenConfig profile maps every canonical leaf where CANONICAL has it.
    assert set(load_profile("openconfig").leaves) == set(CANONICAL)


def test_unknown_platform_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown platform 'junos'; known: arista_eos, cisco_nxos"):
        check_platform("junos")


def _profile(tmp_path: Path, body: str) -> str:
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    with pytest.raises(ProfileError) as e:
        parse_profile(body, str(f))
    return str(e.value)


GOOD_HEAD = "platform: x\nencoding: proto\nleaves:\n"


@pytest.mark.parametrize(("body", "expected"), [
    (GOOD_HEAD + "  interface.in-octetz: {path: '/a[name={interface}]/b', source: https://e.org}\n",
     r"bad.yaml:4: leaves.interface.in-octetz: unknown canonical leaf"),
    (GOOD_HEAD + "  interface.in-octets: {path: '/a[name={interface}]/b'}\n",
     r"bad.yaml:4: leaves.interface.in-octets: needs a path and a source"),
    (GOOD_HEAD + "  interface.in-octets: {path: '/a[name={port}]/b', source: https://e.org}\n",
     r"bad.yaml:4: leaves.interface.in-octets.path: .*unknown variable \{port\}"),
    (GOOD_HEAD + "  interface.in-octets: {path: /a/b, source: https://e.org}\n",
     r"bad.yaml:4: leaves.interface.in-octets.path: has variables \[\]; interface.in-octets needs \['interface'\]"),
    (GOOD_HEAD + "  interface.in-octets: {path: '/a[name={interface}/b', source: https://e.org}\n",
     r"bad.yaml:4: leaves.interface.in-octets.path: .*unbalanced"),
    (GOOD_HEAD + "  interface.oper-status: {path: '/a[name={interface}]/s', format: upper, source: https://e.org}\n",
     r"bad.yaml:4: leaves.interface.oper-status.format: 'upper' is not one of"),
    (GOOD_HEAD + "  interface.in-octets: {path: '/a[name={interface}]/o', format: lower, source: https://e.org}\n",
     r"leaves.interface.in-octets.format: counters are unsigned integers"),
    (GOOD_HEAD + "  interface.in-octets: {path: '/a[name={interface}]/o', source: my notes}\n",
     r"leaves.interface.in-octets.source: 'my notes' is neither a key of sources nor a URL"),
    ("platform: x\nencoding: xml\nleaves: {}\n", r"bad.yaml:2: encoding: 'xml' is not one of: proto, json_ietf, json"),
    ("platform: x\nencoding: proto\nleaves: {}\nextra: 1\n", r"bad.yaml:4: extra: unknown key"),
    (GOOD_HEAD + "  interface.in-octets: {path: '/a[name={interface}]/o', source: https://e.org}\nmissing:\n"
     "  nothing: x\n", r"bad.yaml:6: missing.nothing: neither a canonical leaf nor a subscription group"),
    ("platform: x\n  encoding: [\n", r"bad.yaml:2: YAML syntax error"),
])
def test_a_bad_profile_is_one_line_naming_file_line_and_key(tmp_path: Path, body: str, expected: str) -> None:
    msg = _profile(tmp_path, body)
    assert re.search(expected, msg), msg
    assert "\n" not in msg


def test_a_broken_shipped_profile_fails_the_collector_config_naming_it(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from flowtracer.collectors.gnmi.config import ConfigError, parse_config, resolve_targets
    from flowtracer.fabric import platform_profiles
    bad = tmp_path / "profiles"
    bad.mkdir()
    (bad / "broken.yaml").write_text("platform: broken\nencoding: proto\nleaves:\n  interface.in-octets: {}\n")
    monkeypatch.setattr(platform_profiles, "PROFILE_DIR", bad)
    platform_profiles.load_profile.cache_clear()
    try:
        cfg = parse_config("targets:\n  - {name: s1, address: 10.0.0.1, platform: broken}\n", "c.yaml")
    except ConfigError as e:
        msg = str(e)
    else:
        with pytest.raises(ConfigError) as ei:
            resolve_targets(cfg, None)
        msg = str(ei.value)
    finally:
        platform_profiles.load_profile.cache_clear()
    assert "broken.yaml:4: leaves.interface.in-octets: needs a path and a source" in msg
    assert "\n" not in msg


def test_templates_match_fill_and_wildcard() -> None:
    t = parse_template("/interface[name={interface}]/statistics/in-octets")
    assert t.match([("interface", {"name": "ethernet-1/1"}), ("statistics", {}), ("in-octets", {})]) == \
        {"interface": "ethernet-1/1"}
    assert t.match([("interface", {"name": "e1"}), ("statistics", {}), ("out-octets", {})]) is None
    assert t.match([("interface", {}), ("statistics", {}), ("in-octets", {})]) is None
    assert t.subscription_path() == "/interface[name=*]/statistics/in-octets"
    assert t.fill({"interface": "e1"}) == [("interface", {"name": "e1"}), ("statistics", {}), ("in-octets", {})]
    assert t.is_prefix([("interface", {"name": "e1"}), ("statistics", {})])
    assert not t.is_prefix([("interface", {"name": "e1"}), ("state", {})])

    s = parse_template("sonic-db:/COUNTERS_DB/localhost/COUNTERS/{interface:Ethernet*}/SAI_PORT_STAT_IF_IN_OCTETS")
    assert s.origin == "sonic-db"
    assert s.subscription_path() == "sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_OCTETS"
    elems = [("COUNTERS_DB", {}), ("localhost", {}), ("COUNTERS", {}), ("Ethernet8", {}),
             ("SAI_PORT_STAT_IF_IN_OCTETS", {})]
    assert s.match(elems) == {"interface": "Ethernet8"}
    assert s.fill({"interface": "Ethernet8"}) == elems

    n = parse_template("/network-instance[name={network_instance}]/route-table/next-hop[index={index}]/ip-address")
    assert n.subscription_path({"network_instance": "default"}) == \
        "/network-instance[name=default]/route-table/next-hop[index=*]/ip-address"
    # Key values may hold '/' (Ethernet1/1) and a module prefix names no element.
    k = parse_template("/openconfig-interfaces:interfaces/interface[name={interface}]/state/counters/in-octets")
    assert k.elems[0].name == "interfaces"
    assert k.match([("interfaces", {}), ("interface", {"name": "Ethernet1/1"}), ("state", {}), ("counters", {}),
                    ("in-octets", {})]) == {"interface": "Ethernet1/1"}


def test_group_paths_share_a_container_only_within_a_group() -> None:
    srl = load_profile("nokia_srl")
    assert srl.group_paths("interface-counters") == ["/interface[name=*]/statistics"]
    assert srl.group_paths("oper-status") == ["/interface[name=*]/oper-state"]  # beside last-change: not shared
    assert srl.group_paths("next-hop-counters") == []
    assert load_profile("sonic").group_paths("interface-counters") == \
        ["sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet*"]  # one JSON object per port, as sonic-gnmi sends it
    eos = load_profile("arista_eos").group_paths("interface-counters")
    assert eos == ["eos_native:/Smash/counters/ethIntf/StrataCounters/current/counter/*/statistics",
                   "/interfaces/interface[name=*]/state/counters"]


@pytest.mark.parametrize(("fmt", "canonical", "platform"), [
    ("lower", "UP", "up"),
    ("speed-short", 400_000_000_000, "400G"),
    ("speed-short", 25_000_000_000, "25G"),
    ("speed-short", 1_600_000_000_000, "1600G"),
    ("mbps", 400_000_000_000, "400000"),
    ("date-and-time", 1_767_225_600_123_456_789, "2026-01-01T00:00:00.123456789Z"),
    ("subinterface", "Ethernet5", "Ethernet5.0"),
])
def test_formats_go_both_ways(fmt: str, canonical: object, platform: str) -> None:
    assert fmt in FORMATS
    assert to_platform(fmt, canonical) == platform
    assert from_platform(fmt, platform) == canonical


def test_bad_platform_values_are_errors_not_guesses() -> None:
    for fmt, v in (("speed-short", "fast"), ("mbps", "400G"), ("date-and-time", "yesterday"),
                   ("date-and-time", "2026-13-01T00:00:00Z")):
        with pytest.raises(ValueError):
            from_platform(fmt, v)
    assert from_platform("date-and-time", "2026-01-01T01:00:00.5+01:00") == 1_767_225_600_500_000_000


def test_every_profile_file_is_in_the_package_data() -> None:
    assert sorted(p.name for p in PROFILE_DIR.glob("*.yaml")) == [f"{n}.yaml" for n in SHIPPED]


def test_a_topology_switch_names_its_platform_or_gets_one_clear_error() -> None:
    from flowtracer.fabric.topology import TopologyError, parse_topology
    from flowtracer.fabric.topology_generate import FabricSpec, generate

    text = generate(FabricSpec(hosts=2, leaves=1, spines=1, name="p")).to_yaml()
    leaf = "    address: 127.0.0.1\n- name: spine01"
    ok = parse_topology(text.replace(leaf, "    platform: sonic\n" + leaf, 1), "t.yaml")
    assert [s.gnmi.platform for s in ok.switches if s.gnmi] == ["sonic", "openconfig"]
    with pytest.raises(TopologyError) as e:
        parse_topology(text.replace(leaf, "    platform: junos\n" + leaf, 1), "t.yaml")
    assert re.fullmatch(r"t\.yaml:\d+: switches\[0\]\.gnmi\.platform: unknown platform 'junos'; known: .*", str(e.value))
