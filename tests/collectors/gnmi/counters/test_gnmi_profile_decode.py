"""The decoder through a vendor profile (pure): platform paths, JSON objects and value formats come out as the
same typed samples OpenConfig's paths give; paths the profile does not map are ignored, never misread."""

from __future__ import annotations

from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.collectors.gnmi.counters.decode import Decoder
from flowtracer.collectors.gnmi.counters.samples import LAST_CLEAR_NS, OPER_STATUS, SPEED_BPS
from flowtracer.fabric.platform_profiles import load_profile
from flowtracer.schemas.openconfig import INTERFACE_COUNTERS, QUEUE_COUNTERS
from flowtracer.schemas.v1.counters_pb2 import OPER_STATUS_DOWN, OPER_STATUS_UP

TS = 1_767_225_600_000_000_000


def _note(origin: str = "") -> gnmi_pb2.Notification:
    n = gnmi_pb2.Notification(timestamp=TS)
    if origin:
        n.prefix.origin = origin
    return n


def _add(n: gnmi_pb2.Notification, elems: list[tuple[str, dict[str, str]]], **val: object) -> None:
    u = n.update.add()
    for name, keys in elems:
        u.path.elem.add(name=name, key=keys)
    for k, v in val.items():
        setattr(u.val, k, v)


def test_sr_linux_native_paths_and_formats() -> None:
    d = Decoder(profile=load_profile("nokia_srl"))
    itf = ("interface", {"name": "ethernet-1/1"})
    n = _note()
    _add(n, [itf, ("statistics", {}), ("in-octets", {})], uint_val=5)
    _add(n, [itf, ("oper-state", {})], string_val="down")
    _add(n, [itf, ("ethernet", {}), ("port-speed", {})], string_val="100G")
    _add(n, [itf, ("statistics", {})],
         json_ietf_val=b'{"srl_nokia-interfaces:out-octets": "7", "last-clear": "2026-01-01T00:00:00.5Z", '
                       b'"in-fcs-error-packets": "3"}')
    _add(n, [("network-instance", {"name": "default"}), ("route-table", {}), ("next-hop", {"index": "42"}),
             ("subinterface", {})], string_val="ethernet-1/1.0")
    _add(n, [("interfaces", {}), ("interface", {"name": "x"}), ("state", {}), ("counters", {}), ("in-octets", {})],
         uint_val=9)  # OpenConfig's path: not this profile's, so not read twice
    _add(n, [("qos", {}), ("interfaces", {}), ("interface", {"interface-id": "ethernet-1/1"}), ("output", {}),
             ("queues", {}), ("queue", {"queue-name": "3"}), ("queue-statistics", {}), ("aggregate-statistics", {}),
             ("ecn-marked-packets", {})], uint_val=11)
    s = d.decode(n)
    assert s.queue_counters == [("ethernet-1/1", "3", QUEUE_COUNTERS.index("ecn-marked-pkts"), 11)]
    assert s.errors == []
    assert s.if_counters == [("ethernet-1/1", INTERFACE_COUNTERS.index("in-octets"), 5),
                             ("ethernet-1/1", INTERFACE_COUNTERS.index("out-octets"), 7)]
    assert sorted(s.if_state) == sorted([("ethernet-1/1", OPER_STATUS, OPER_STATUS_DOWN),
                                         ("ethernet-1/1", SPEED_BPS, 100_000_000_000),
                                         ("ethernet-1/1", LAST_CLEAR_NS, TS + 500_000_000)])
    assert s.nh_info == [("default", 42, "interface", "ethernet-1/1")]
    assert s.ignored == 2  # in-fcs-error-packets, and the OpenConfig path


def test_sonic_counters_db_json_object_and_appl_db_state() -> None:
    d = Decoder(profile=load_profile("sonic"))
    n = _note("sonic-db")
    _add(n, [("COUNTERS_DB", {}), ("localhost", {}), ("COUNTERS", {}), ("Ethernet8", {})],
         json_ietf_val=b'{"SAI_PORT_STAT_IF_IN_OCTETS": "12", "SAI_PORT_STAT_IF_OUT_UCAST_PKTS": "3", '
                       b'"SAI_PORT_STAT_PFC_7_RX_PKTS": "0"}')
    _add(n, [("APPL_DB", {}), ("localhost", {}), ("PORT_TABLE", {}), ("Ethernet8", {}), ("speed", {})],
         json_ietf_val=b'"400000"')
    _add(n, [("APPL_DB", {}), ("localhost", {}), ("PORT_TABLE", {}), ("Ethernet8", {}), ("oper_status", {})],
         string_val="up")
    _add(n, [("APPL_DB", {}), ("localhost", {}), ("PORT_TABLE", {}), ("Ethernet8", {}), ("speed", {})],
         string_val="fast")
    s = d.decode(n)
    assert s.if_counters == [("Ethernet8", INTERFACE_COUNTERS.index("in-octets"), 12),
                             ("Ethernet8", INTERFACE_COUNTERS.index("out-unicast-pkts"), 3)]
    assert s.if_state == [("Ethernet8", SPEED_BPS, 400_000_000_000), ("Ethernet8", OPER_STATUS, OPER_STATUS_UP)]
    assert len(s.errors) == 1 and "'fast' is not a number of Mb/s" in s.errors[0]
    assert s.ignored == 1  # the PFC field: not mapped
    # Another origin's paths are not SONiC's.
    other = _note("openconfig")
    _add(other, [("COUNTERS_DB", {}), ("localhost", {}), ("COUNTERS", {}), ("Ethernet8", {}),
                 ("SAI_PORT_STAT_IF_IN_OCTETS", {})], uint_val=1)
    assert d.decode(other).if_counters == []


def test_eos_mixes_native_and_openconfig_origins() -> None:
    d = Decoder(profile=load_profile("arista_eos"))
    native = _note("eos_native")
    _add(native, [("Smash", {}), ("counters", {}), ("ethIntf", {}), ("StrataCounters", {}), ("current", {}),
                  ("counter", {}), ("Ethernet1", {}), ("statistics", {}), ("inOctets", {})], uint_val=77)
    oc = _note("openconfig")
    _add(oc, [("interfaces", {}), ("interface", {"name": "Ethernet1"}), ("state", {}), ("counters", {}),
              ("in-unicast-pkts", {})], uint_val=5)
    _add(oc, [("interfaces", {}), ("interface", {"name": "Ethernet1"}), ("state", {}), ("counters", {}),
              ("in-octets", {})], uint_val=99)  # the profile reads octets from Smash only: never two sources
    assert d.decode(native).if_counters == [("Ethernet1", INTERFACE_COUNTERS.index("in-octets"), 77)]
    s = d.decode(oc)
    assert s.if_counters == [("Ethernet1", INTERFACE_COUNTERS.index("in-unicast-pkts"), 5)]
    assert s.ignored == 1


def test_a_path_resolves_once_then_from_the_cache() -> None:
    d = Decoder(profile=load_profile("cisco_nxos"))
    n = _note("device")
    elems = [("System", {}), ("intf-items", {}), ("phys-items", {}), ("PhysIf-list", {"id": "eth1/1"}),
             ("dbgIfIn-items", {}), ("octets", {})]
    _add(n, elems, uint_val=1)
    assert d.decode(n).if_counters == [("eth1/1", 0, 1)]
    calls = []
    d.mapper.translate = lambda *a: calls.append(a)  # type: ignore[union-attr,method-assign]
    assert d.decode(n).if_counters == [("eth1/1", 0, 1)]
    assert calls == []  # the mapping ran when the path was first seen, not per update


def test_platform_deletes_name_the_canonical_entry() -> None:
    d = Decoder(profile=load_profile("nokia_srl"))
    n = _note()
    for elems in ([("interface", {"name": "ethernet-1/1"})],
                  [("network-instance", {"name": "default"}), ("route-table", {}), ("next-hop", {"index": "42"})],
                  [("interface", {"name": "ethernet-1/1"}), ("statistics", {})]):  # not an entry: nothing
        p = n.delete.add()
        for name, keys in elems:
            p.elem.add(name=name, key=keys)
    assert d.decode(n).deletes == [("interface", "ethernet-1/1"), ("next-hop", "default", 42)]
    sonic = Decoder(profile=load_profile("sonic"))
    m = _note("sonic-db")
    p = m.delete.add()
    for name in ("COUNTERS_DB", "localhost", "COUNTERS", "Ethernet8"):
        p.elem.add(name=name)
    assert sonic.decode(m).deletes == [("interface", "Ethernet8")]
