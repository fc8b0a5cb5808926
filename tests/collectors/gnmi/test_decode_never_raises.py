"""The gNMI decoder promises never to raise on what a switch sends: malformed values are counted and skipped.
Property-based, seeded with inputs that make ``int()`` raise (a superscript digit, a 5,000-digit number)."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2 as g

from flowtracer.collectors.gnmi.counters.decode import Decoder, decode_notification
from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.fabric.platform_profiles import load_profile

PATHS = ["/interfaces/interface[name=Ethernet1]/state/counters/in-octets",
         "/interfaces/interface[name=Ethernet1]/state/counters",
         "/interfaces/interface[name=Ethernet1]/state/oper-status",
         "/interfaces/interface[name=Ethernet1]/ethernet/state/port-speed",
         "/interfaces/interface[name=Ethernet1]/state/last-change",
         "/network-instances/network-instance[name=default]/afts/next-hops/next-hop[index=7]/state/counters",
         "/network-instances/network-instance[name=default]/afts/next-hops/next-hop[index=²]/state/counters"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30)
    | st.just("²") | st.just("9" * 5000) | st.just("SPEED_²GB"),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20)


def notification(path: str, value: object, ts: int) -> g.Notification:
    n = g.Notification(timestamp=ts)
    u = n.update.add()
    u.path.CopyFrom(parse_path(path))
    u.val.json_ietf_val = json.dumps(value).encode()
    return n


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATHS), json_values, st.integers(min_value=0, max_value=2**63 - 1))
@example(PATHS[0], "²", 1)
@example(PATHS[0], "9" * 5000, 1)
@example(PATHS[1], {"in-octets": "9" * 5000, "out-octets": "²"}, 1)
@example(PATHS[3], "SPEED_" + "9" * 5000 + "GB", 1)
def test_json_ietf_values_never_raise(path: str, value: object, ts: int) -> None:
    s = decode_notification(notification(path, value, ts))
    assert all(isinstance(c[2], int) and 0 <= c[2] < 2**64 for c in s.if_counters)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_raw_bytes_as_a_typed_value_never_raise(raw: bytes) -> None:
    n = g.Notification(timestamp=1)
    u = n.update.add()
    u.path.CopyFrom(parse_path(PATHS[0]))
    u.val.json_ietf_val = raw
    decode_notification(n)


PLATFORM_PATHS = [("nokia_srl", "/interface[name=ethernet-1/1]/statistics"),
                  ("nokia_srl", "/interface[name=ethernet-1/1]/statistics/last-clear"),
                  ("nokia_srl", "/interface[name=ethernet-1/1]/ethernet/port-speed"),
                  ("nokia_srl", "/network-instance[name=default]/route-table/next-hop[index=7]/subinterface"),
                  ("sonic", "sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet8"),
                  ("sonic", "sonic-db:/APPL_DB/localhost/PORT_TABLE/Ethernet8/speed"),
                  ("cisco_nxos", "device:/System/intf-items/phys-items/PhysIf-list[id=eth1/1]/phys-items/lastLinkStChg")]
_DECODERS = {p: Decoder(profile=load_profile(p)) for p in {p for p, _ in PLATFORM_PATHS}}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PLATFORM_PATHS), json_values)
@example(PLATFORM_PATHS[1], "2026-99-01T00:00:00Z")
@example(PLATFORM_PATHS[2], "9" * 5000 + "G")
@example(PLATFORM_PATHS[4], {"SAI_PORT_STAT_IF_IN_OCTETS": "9" * 5000, "x": {"y": [1]}})
def test_platform_values_never_raise(where: tuple[str, str], value: object) -> None:
    """Through a vendor profile too: its formats (dates, speeds in Mb/s or 400G) reject bad text as a counted error."""
    platform, path = where
    s = _DECODERS[platform].decode(notification(path, value, 1))
    assert all(isinstance(c[2], int) and 0 <= c[2] < 2**64 for c in s.if_counters)
