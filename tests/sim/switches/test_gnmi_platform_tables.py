"""The simulated switch as another platform (pure: Get on one tick): the same rows under the profile's paths,
origin and value formats, nothing it does not map, and SONiC's DB entries as one JSON object each."""

from __future__ import annotations

import json

from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.sim.switches.encode import UpdateEncoder
from flowtracer.sim.switches.get import get
from flowtracer.sim.switches.schema import read_tick
from flowtracer.sim.switches.state import InterfaceState, NextHop, SwitchState
from flowtracer.sim.switches.subscription import GnmiError

T0 = 1_767_225_600_000_000_000


def _switch() -> SwitchState:
    st = SwitchState("leaf1")
    st.interfaces["Ethernet1"] = InterfaceState("Ethernet1", 400 * 10**9)
    st.interfaces["Ethernet1"].counters["in-octets"] = 1234
    st.interfaces["Ethernet1"].last_change_ns = T0 - 5 * 10**9
    st.next_hops = {7: NextHop(7, "10.0.0.1", "Ethernet1")}
    st.timestamp_ns = T0
    return st


def _get(platform: str, path: str, encoding: int = gnmi_pb2.Encoding.JSON_IETF) -> gnmi_pb2.Notification:
    req = gnmi_pb2.GetRequest(path=[parse_path(path)], encoding=encoding)
    return gnmi_pb2.GetResponse.FromString(get(req, read_tick(_switch()), UpdateEncoder(), T0, platform)).notification[0]


def _values(n: gnmi_pb2.Notification) -> dict[str, object]:
    out = {}
    for u in n.update:
        text = "/" + "/".join(e.name + "".join(f"[{k}={v}]" for k, v in e.key.items()) for e in u.path.elem)
        kind = u.val.WhichOneof("value")
        v = getattr(u.val, kind)
        out[text] = json.loads(v) if kind == "json_ietf_val" else v
    return out


def test_sr_linux_native_paths_and_formats() -> None:
    vals = _values(_get("nokia_srl", "/interface[name=Ethernet1]"))
    assert vals["/interface[name=Ethernet1]/statistics/in-octets"] == "1234"
    assert vals["/interface[name=Ethernet1]/oper-state"] == "up"
    assert vals["/interface[name=Ethernet1]/ethernet/port-speed"] == "400G"
    assert vals["/interface[name=Ethernet1]/last-change"] == "2025-12-31T23:59:55.000000000Z"
    nh = _values(_get("nokia_srl", "/network-instance[name=default]/route-table/next-hop[index=*]"))
    assert nh == {"/network-instance[name=default]/route-table/next-hop[index=7]/ip-address": "10.0.0.1",
                  "/network-instance[name=default]/route-table/next-hop[index=7]/subinterface": "Ethernet1.0"}


def test_sonic_entries_are_one_json_object_and_single_fields_text() -> None:
    n = _get("sonic", "sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet*")
    assert n.prefix.origin == "sonic-db"
    (path, obj), = _values(n).items()
    assert path == "/COUNTERS_DB/localhost/COUNTERS/Ethernet1"
    assert obj["SAI_PORT_STAT_IF_IN_OCTETS"] == "1234" and len(obj) == 8
    speed = _values(_get("sonic", "sonic-db:/APPL_DB/localhost/PORT_TABLE/Ethernet1/speed"))
    assert speed == {"/APPL_DB/localhost/PORT_TABLE/Ethernet1/speed": "400000"}


def test_a_platform_serves_only_what_its_profile_maps() -> None:
    for path, platform in (("/interfaces/interface[name=Ethernet1]/state/counters", "nokia_srl"),
                           ("/network-instances/network-instance[name=default]/afts/next-hops", "cisco_nxos")):
        try:
            _get(platform, path)
        except GnmiError as e:
            assert e.code == "NOT_FOUND"
        else:
            raise AssertionError(f"{platform} served {path}")
    n = _get("cisco_nxos", "device:/System/intf-items/phys-items/PhysIf-list[id=Ethernet1]/dbgIfIn-items",
             gnmi_pb2.Encoding.PROTO)
    assert n.prefix.origin == "device"
    assert _values(n)["/System/intf-items/phys-items/PhysIf-list[id=Ethernet1]/dbgIfIn-items/octets"] == 1234
