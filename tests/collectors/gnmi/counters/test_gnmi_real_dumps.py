"""Golden tests over real gNMI dumps of SONiC, Arista EOS, Junos and Nokia SR OS (tests/fixtures/real/gnmi/,
sources in its SOURCES.md): what each must yield, written from reading the dump.

Every value below is read off the sample file; none is computed by the decoder under test. Where the decoder
reads nothing (a vendor's native tree, a SONiC table no profile maps) the dump must still be *reported*: counted
as ignored, by the shape of its path.
"""

from __future__ import annotations

import pytest
from pygnmi.spec.v080.gnmi_pb2 import Notification, TypedValue
from real_dumps import REAL, SUFFIXES, notifications

from flowtracer.collectors.gnmi.counters.decode import Decoder
from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.collectors.gnmi.counters.samples import LAST_CHANGE_NS, OPER_STATUS, Samples
from flowtracer.fabric.platform_profiles import load_profile, platforms
from flowtracer.schemas.openconfig import INTERFACE_COUNTERS
from flowtracer.schemas.v1.counters_pb2 import OperStatus

IDX = {c: i for i, c in enumerate(INTERFACE_COUNTERS)}


def decode(name: str, platform: str = "openconfig") -> list[Samples]:
    d = Decoder(profile=load_profile(platform))
    return [d.decode(n) for n in notifications(REAL / name)]


def counters(samples: list[Samples]) -> dict[tuple[str, str], int]:
    return {(ifname, INTERFACE_COUNTERS[i]): v for s in samples for ifname, i, v in s.if_counters}


def ignored(samples: list[Samples]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in samples:
        for shape, n in s.ignored_shapes.items():
            out[shape] = out.get(shape, 0) + n
    return out


EIGHT = ("in-octets", "out-octets", "in-unicast-pkts", "out-unicast-pkts", "in-discards", "out-discards", "in-errors",
         "out-errors")


# -- SONiC -------------------------------------------------------------------------------------

def test_sonic_target_addressed_counters_read_through_the_sonic_profile() -> None:
    # gnmi_get -xpath_target COUNTERS_DB -xpath COUNTERS/Ethernet9: 106 SAI_PORT_STAT_* fields, all "0"; the
    # profile maps the 8 SAI_PORT_STAT_IF_{IN,OUT}_{OCTETS,UCAST_PKTS,DISCARDS,ERRORS} of them.
    (s,) = decode("sonic_counters_ethernet9.get.textproto", "sonic")
    assert s.timestamp_ns == 1516668828794942666
    assert counters([s]) == {("Ethernet9", c): 0 for c in EIGHT}
    assert not s.errors
    assert s.ignored == 106 - 8
    shapes = ignored([s])
    assert shapes["sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_*_RX_PKTS"] == 8
    assert shapes["sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_BROADCAST_PKTS"] == 1


def test_sonic_both_addressings_give_the_same_samples() -> None:
    """The same Ethernet9 blob as sonic-gnmi sends it with origin sonic-db (/COUNTERS_DB/localhost/...)."""
    (target_form,) = notifications(REAL / "sonic_counters_ethernet9.get.textproto")
    origin_form = Notification(timestamp=target_form.timestamp)
    origin_form.update.add(path=parse_path("sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet9"),
                           val=target_form.update[0].val)
    d = Decoder(profile=load_profile("sonic"))
    a, b = d.decode(target_form), d.decode(origin_form)
    assert a.if_counters == b.if_counters and len(a.if_counters) == 8
    assert a.ignored == b.ignored


def test_sonic_target_addressed_without_the_sonic_profile_is_reported_not_silent() -> None:
    (s,) = decode("sonic_counters_ethernet9.get.textproto")  # the default (OpenConfig) profile
    assert not s.if_counters and not s.errors
    assert s.ignored_shapes == {"target=COUNTERS_DB /COUNTERS/Ethernet*": 1}


@pytest.mark.parametrize(("name", "shape", "n"), [
    ("sonic_counters_port_name_map.get.textproto", "target=COUNTERS_DB /COUNTERS_PORT_NAME_MAP", 1),
    ("sonic_counters_ethernet68_queues.get.textproto", "target=COUNTERS_DB /COUNTERS/Ethernet*/Queues", 1),
    ("sonic_counters_ethernet9_pfc7_rx.get.textproto",
     "target=COUNTERS_DB /COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_*_RX_PKTS", 1),
])
def test_sonic_tables_no_profile_maps_are_counted_by_shape(name: str, shape: str, n: int) -> None:
    (s,) = decode(name, "sonic")
    assert not s.if_counters and not s.errors
    assert s.ignored_shapes == {shape: n}


def test_sonic_wildcard_answer_is_unpacked_per_port() -> None:
    # COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_7_ON2OFF_RX_PKTS: one {"SAI_PORT_STAT_PFC_7_ON2OFF_RX_PKTS": "0"} per
    # port, 54 ports (Ethernet0-48, 52, 56, 60, 64, 68); PFC fields are not mapped: 54 ignored leaves, one shape.
    (s,) = decode("sonic_counters_ethernet_glob_pfc7.get.textproto", "sonic")
    assert not s.errors and not s.if_counters
    assert s.ignored_shapes == {"sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_*_ON*OFF_RX_PKTS": 54}


def test_sonic_openconfig_answer_with_module_prefixed_elements() -> None:
    # prefix target OC-YANG, /openconfig-interfaces:interfaces/interface[name=Ethernet0]/config: config, not state
    (s,) = decode("sonic_oc_interface_config.get.textproto")
    assert s.timestamp_ns == 1607105561153639237
    assert not s.if_counters and not s.errors
    assert s.ignored_shapes == {"target=OC-YANG /openconfig-interfaces:interfaces/interface[name=*]/config": 1}


# -- Arista EOS --------------------------------------------------------------------------------

def test_arista_gnmic_get_of_interface_state() -> None:
    (s,) = decode("arista_eos_ethernet1_state.gnmic-get.json")
    assert s.timestamp_ns == 1626293429376469348
    assert counters([s]) == {("Ethernet1", "in-octets"): 111398, ("Ethernet1", "out-octets"): 117389,
                             ("Ethernet1", "in-unicast-pkts"): 1460, ("Ethernet1", "out-unicast-pkts"): 1457,
                             ("Ethernet1", "in-discards"): 0, ("Ethernet1", "out-discards"): 0,
                             ("Ethernet1", "in-errors"): 0, ("Ethernet1", "out-errors"): 0}
    assert sorted(s.if_state) == sorted([("Ethernet1", OPER_STATUS, OperStatus.OPER_STATUS_UP),
                                         ("Ethernet1", LAST_CHANGE_NS, 1626292006733589760)])
    # in/out broadcast and multicast, in-fcs-errors; inactive, admin-status, description, ifindex, mtu, name,
    # type, hardware-port
    assert s.ignored == 5 + 8 and not s.errors


def test_arista_pygnmi_get_counters_and_bgp() -> None:
    a, b = decode("arista_eos_counters_bgp.pygnmi-get.json")
    assert counters([a]) == {("Ethernet1", "in-octets"): 48284395, ("Ethernet1", "out-octets"): 51749355,
                             ("Ethernet1", "in-unicast-pkts"): 416884, ("Ethernet1", "out-unicast-pkts"): 416911,
                             ("Ethernet1", "in-discards"): 0, ("Ethernet1", "out-discards"): 0,
                             ("Ethernet1", "in-errors"): 0, ("Ethernet1", "out-errors"): 0}
    assert a.ignored == 5  # broadcast, multicast, fcs-errors
    assert not b.if_counters and b.ignored_shapes == {
        "/network-instances/network-instance[name=*]/protocols/protocol[identifier=*][name=*]/bgp/neighbors"
        "/neighbor[neighbor-address=*]/state": 2}


def test_arista_pygnmi_stream_one_leaf_per_notification() -> None:
    got = decode("arista_eos_subscribe.pygnmi-sub.txt")
    assert len(got) == 31  # 13 counters of Ethernet1, 18 BGP leaves of two neighbors
    assert counters(got) == {("Ethernet1", "in-octets"): 48284395, ("Ethernet1", "out-octets"): 51756949,
                             ("Ethernet1", "in-unicast-pkts"): 416884, ("Ethernet1", "out-unicast-pkts"): 416911,
                             ("Ethernet1", "in-discards"): 0, ("Ethernet1", "out-discards"): 0,
                             ("Ethernet1", "in-errors"): 0, ("Ethernet1", "out-errors"): 0}
    octets = next(s for s in got if s.if_counters and s.if_counters[0][1] == IDX["in-octets"])
    assert octets.timestamp_ns == 1626462768674553338
    assert sum(s.ignored for s in got) == 5 + 18


# -- Junos, Nokia SR OS ------------------------------------------------------------------------

def test_junos_gnmic_event() -> None:
    (s,) = decode("juniper_junos_em0_out_pkts.gnmic-event.json")
    assert s.timestamp_ns == 1698147472368407362
    assert counters([s]) == {("em0", "out-pkts"): 7114902}


@pytest.mark.parametrize("platform", ["openconfig", "nokia_srl"])
def test_sros_native_paths_are_reported_by_shape(platform: str) -> None:
    got = decode("nokia_sros_port_stats.gnmic-sub.json", platform)
    assert not counters(got) and not any(s.errors for s in got)
    assert ignored(got) == {"/state/service/vpls[service-name=*]/oper-state": 2,
                            "/state/port[port-id=*]/statistics/in-octets": 1,
                            "/state/port[port-id=*]/statistics/out-octets": 1}


# -- every dump, every profile -----------------------------------------------------------------

def dumps() -> list[str]:
    return sorted(f.name for f in REAL.iterdir() if f.name != "SOURCES.md")


def test_every_file_in_the_corpus_is_a_dump_this_reader_knows_and_is_cited() -> None:
    sources = (REAL / "SOURCES.md").read_text()
    for name in dumps():
        assert name.endswith(SUFFIXES), name
        assert f"`{name}`" in sources, f"{name} is not cited in SOURCES.md"
    assert len(dumps()) >= 5


@pytest.mark.parametrize("platform", platforms())
@pytest.mark.parametrize("name", dumps())
def test_no_update_is_dropped_without_a_count(name: str, platform: str) -> None:
    """Whatever profile reads a dump, each update becomes a sample, an error or an ignored count by shape."""
    d = Decoder(profile=load_profile(platform))
    for n in notifications(REAL / name):
        for u in n.update:
            one = Notification(timestamp=n.timestamp, prefix=n.prefix, update=[u])
            s = d.decode(one)
            seen = (len(s.if_counters) + len(s.if_state) + len(s.nh_counters) + len(s.nh_info) + len(s.nhg_members)
                    + s.congestion_updates + len(s.errors) + s.ignored)
            assert seen >= 1, (name, platform, u.path)
            assert sum(s.ignored_shapes.values()) == s.ignored


def test_a_damaged_value_is_an_error_not_a_silence() -> None:
    (n,) = notifications(REAL / "sonic_counters_ethernet9.get.textproto")
    n.update[0].val.CopyFrom(TypedValue(json_ietf_val=b'{"SAI_PORT_STAT_IF_IN_OCTETS": "0", .........}'))
    s = Decoder(profile=load_profile("sonic")).decode(n)
    assert not s.if_counters and len(s.errors) == 1 and "bad JSON" in s.errors[0]
