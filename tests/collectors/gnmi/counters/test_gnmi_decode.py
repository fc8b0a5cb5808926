"""SubscribeResponse -> typed samples, without servers: encodings, paths, keys, deletes, errors."""

from __future__ import annotations

import json

import pytest
from pygnmi.spec.v080 import gnmi_pb2 as g

from flowtracer.collectors.gnmi.counters.decode import Decoder, decode_notification
from flowtracer.collectors.gnmi.counters.leaf_values import normalize_timestamp
from flowtracer.collectors.gnmi.counters.paths import format_path, parse_path
from flowtracer.collectors.gnmi.counters.samples import LAST_CLEAR_NS, OPER_STATUS, SPEED_BPS
from flowtracer.schemas.v1.counters_pb2 import OperStatus

TS = 1_767_225_600_000_000_000
NI = "/network-instances/network-instance[name=default]/afts"


def notif(updates: list[tuple[str, object]], prefix: str = "", ts: int = TS, deletes: tuple[str, ...] = (),
          encoding: str = "proto") -> g.Notification:
    n = g.Notification(timestamp=ts)
    if prefix:
        n.prefix.CopyFrom(parse_path(prefix))
    for path, v in updates:
        u = n.update.add()
        u.path.CopyFrom(parse_path(path))
        if encoding == "json_ietf":
            u.val.json_ietf_val = json.dumps(v).encode()
        elif isinstance(v, int):
            u.val.uint_val = v
        else:
            u.val.string_val = str(v)
    for d in deletes:
        n.delete.add().CopyFrom(parse_path(d))
    return n


def test_proto_interface_counters_with_prefix() -> None:
    s = decode_notification(notif([("state/counters/in-octets", 12), ("state/counters/out-errors", 3),
                                   ("state/counters/in-fcs-errors", 9)],
                                  prefix="/interfaces/interface[name=Ethernet1/1]"))
    assert s.timestamp_ns == TS
    assert s.if_counters == [("Ethernet1/1", 0, 12), ("Ethernet1/1", 9, 3)]
    assert s.ignored == 1 and not s.errors


def test_json_ietf_uint64_as_strings_and_identities() -> None:
    big = 2**64 - 1
    s = decode_notification(notif([
        ("/interfaces/interface[name=E1]/state/counters/in-octets", str(big)),
        ("/interfaces/interface[name=E1]/state/oper-status", "DOWN"),
        ("/interfaces/interface[name=E1]/ethernet/state/port-speed", "openconfig-if-ethernet:SPEED_400GB"),
        ("/interfaces/interface[name=E1]/state/counters/last-clear", str(TS - 5)),
    ], encoding="json_ietf"))
    assert s.if_counters == [("E1", 0, big)]
    assert ("E1", OPER_STATUS, OperStatus.OPER_STATUS_DOWN) in s.if_state
    assert ("E1", SPEED_BPS, 400_000_000_000) in s.if_state
    assert ("E1", LAST_CLEAR_NS, TS - 5) in s.if_state


def test_json_container_is_flattened_with_module_prefixes_and_lists() -> None:
    body = {"openconfig-interfaces:interface": [
        {"name": "E1", "state": {"counters": {"in-octets": "10", "out-octets": "20", "carrier-transitions": "1"},
                                 "oper-status": "UP"}},
        {"name": "E2", "state": {"counters": {"in-pkts": "7"}}},
    ]}
    s = decode_notification(notif([("/interfaces", body)], encoding="json_ietf"))
    assert sorted(s.if_counters) == [("E1", 0, 10), ("E1", 1, 20), ("E2", 2, 7)]
    assert ("E1", OPER_STATUS, OperStatus.OPER_STATUS_UP) in s.if_state


def test_next_hops_both_trees_attributes_and_groups() -> None:
    s = decode_notification(notif([
        (f"{NI}/next-hops/next-hop[index=7]/state/counters/octets-forwarded", 1000),
        (f"{NI}/counters/next-hops/next-hop[index=7]/state/packets-forwarded", 3),
        (f"{NI}/next-hops/next-hop[index=7]/state/ip-address", "10.0.0.1"),
        (f"{NI}/next-hops/next-hop[index=7]/interface-ref/state/interface", "Ethernet3"),
        (f"{NI}/next-hop-groups/next-hop-group[id=42]/next-hops/next-hop[index=7]/state/weight", 2),
    ], prefix="openconfig:/"))
    assert s.nh_counters == [("default", 7, 0, 1000, False), ("default", 7, 1, 3, True)]
    assert s.nh_info == [("default", 7, "ip", "10.0.0.1"), ("default", 7, "interface", "Ethernet3")]
    assert s.nhg_members == [("default", "42", 7, 2)]


def test_other_origins_are_ignored() -> None:
    n = notif([("/interfaces/interface[name=E1]/state/counters/in-octets", 1)])
    n.update[0].path.origin = "cli"
    s = decode_notification(n)
    assert not s.if_counters and s.ignored == 1


def test_deletes() -> None:
    s = decode_notification(notif([], deletes=(
        "/interfaces/interface[name=E9]",
        f"{NI}/next-hops/next-hop[index=5]",
        f"{NI}/next-hop-groups/next-hop-group[id=3]",
        f"{NI}/next-hop-groups/next-hop-group[id=3]/next-hops/next-hop[index=5]",
        "/interfaces/interface[name=E9]/state/counters/in-octets",  # a leaf: nothing to do
    )))
    assert s.deletes == [("interface", "E9"), ("next-hop", "default", 5), ("group", "default", "3"),
                         ("member", "default", "3", 5)]


def test_errors_name_the_path_and_do_not_stop_the_rest() -> None:
    s = decode_notification(notif([
        ("/interfaces/interface[name=*]/state/counters/in-octets", 1),       # wildcard in a response
        ("/interfaces/interface[name=E1]/state/counters/in-octets", "lots"),  # not a number
        ("/interfaces/interface[name=E1]/state/counters/out-octets", 5),
        (f"{NI}/next-hops/next-hop[index=x]/state/counters/octets-forwarded", 1),
    ]))
    assert s.if_counters == [("E1", 1, 5)]
    assert len(s.errors) == 3
    assert "interface[name]" in s.errors[0] and "lots" in s.errors[1] and "index" in s.errors[2]


def test_bad_json_is_an_error() -> None:
    n = g.Notification(timestamp=TS)
    u = n.update.add()
    u.path.CopyFrom(parse_path("/interfaces/interface[name=E1]/state/counters/in-octets"))
    u.val.json_ietf_val = b"{not json"
    s = decode_notification(n)
    assert s.errors and "bad JSON" in s.errors[0]


@pytest.mark.parametrize(("raw", "ns"), [(1_767_225_600, TS), (1_767_225_600_000, TS), (1_767_225_600_000_000, TS),
                                         (TS, TS), (0, 0)])
def test_timestamps_in_s_ms_us_are_scaled_to_ns(raw: int, ns: int) -> None:
    assert normalize_timestamp(raw) == ns


def test_decoder_cache_gives_the_same_answers_and_stays_bounded() -> None:
    d = Decoder(max_cache=5)
    for i in range(20):
        s = d.decode(notif([(f"/interfaces/interface[name=E{i}]/state/counters/in-octets", i)]))
        assert s.if_counters == [(f"E{i}", 0, i)]
    assert d._size <= 5


def test_path_round_trip_keeps_origin_and_slashes_in_keys() -> None:
    p = parse_path("openconfig:/interfaces/interface[name=Ethernet1/1]/state")
    assert format_path(p) == "openconfig:/interfaces/interface[name=Ethernet1/1]/state"
    with pytest.raises(ValueError, match="unbalanced"):
        parse_path("/interfaces/interface[name=E1/state")
