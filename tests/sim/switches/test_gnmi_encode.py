"""Hand-assembled protobuf wire bytes parse back as the gNMI messages they claim to be (no server)."""

from __future__ import annotations

import json

import pytest
from google.protobuf.internal.encoder import _VarintBytes
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.schemas.wire import varint
from flowtracer.sim.switches.encode import (
    JSON,
    JSON_IETF,
    PROTO,
    SYNC_RESPONSE,
    UpdateEncoder,
    chunk,
    get_response,
    notification,
    path_message,
    prefix_field,
    value_codec,
)
from flowtracer.sim.switches.paths import request_elems, resolve
from flowtracer.sim.switches.schema import INTERFACES, IPV4_ADDRESSES, Tick
from flowtracer.sim.switches.state import INTERFACE_COUNTERS

U64_MAX = 2**64 - 1
TS = 1_767_225_600_123_456_789


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16383, 16384, 2**32, 2**63 - 1, U64_MAX])
def test_varint_matches_protobuf(n: int) -> None:
    assert bytes(varint(n)) == _VarintBytes(n)


def iface_row(name: str, counters: tuple[int, ...], oper: str = "UP", speed: str = "SPEED_400GB") -> tuple[object, ...]:
    return (name, "ethernetCsmacd", True, "UP", oper, 5, *counters, 7, speed)


def tick(**rows: tuple[object, ...]) -> Tick:
    return Tick(TS, 0, {"interface": {(k,): v for k, v in rows.items()}, "next-hop": {}, "next-hop-group": {},
                        "next-hop-group-member": {}})


def selectors(text: str) -> tuple:
    return resolve(request_elems(None, gnmi_path_generator(text))).selectors


def updates(resp: bytes) -> dict[str, gnmi_pb2.TypedValue]:
    n = gnmi_pb2.SubscribeResponse.FromString(resp).update
    out = {}
    for u in n.update:
        out["/".join(e.name + "".join(f"[{k}={v}]" for k, v in e.key.items()) for e in u.path.elem)] = u.val
    return out


COUNTERS = (U64_MAX, 0, 127, 128, 2**32, 1, 2, 3, 4, 5)


@pytest.mark.parametrize("encoding", [PROTO, JSON, JSON_IETF])
def test_full_notification_every_leaf(encoding: int) -> None:
    t = tick(Ethernet1=iface_row("Ethernet1", COUNTERS))
    # /interfaces also holds the subinterface addresses: only the interface table's leaves here.
    sels = tuple(s for s in selectors("/interfaces/interface[name=*]") if s.table is INTERFACES)
    (resp,) = UpdateEncoder().full(t, sels, [[("Ethernet1",)]], encoding, prefix_field("leaf1"))
    msg = gnmi_pb2.SubscribeResponse.FromString(resp)
    assert msg.update.timestamp == TS
    assert msg.update.prefix == gnmi_pb2.Path(origin="openconfig", target="leaf1")
    vals = updates(resp)
    base = "interfaces/interface[name=Ethernet1]/"
    assert len(vals) == len(INTERFACES.leaves)

    def value(leaf: str) -> object:
        v = vals[base + leaf]
        if encoding == PROTO:
            return getattr(v, v.WhichOneof("value"))
        assert v.WhichOneof("value") == ("json_val" if encoding == JSON else "json_ietf_val")
        return json.loads(v.json_val or v.json_ietf_val)

    for name, c in zip(INTERFACE_COUNTERS, COUNTERS, strict=True):
        assert value(f"state/counters/{name}") == (str(c) if encoding == JSON_IETF else c)  # RFC 7951: uint64 quoted
    assert value("state/oper-status") == "UP"
    assert value("state/enabled") is True
    assert value("state/last-change") == ("5" if encoding == JSON_IETF else 5)
    assert value("state/counters/last-clear") == ("7" if encoding == JSON_IETF else 7)
    ietf = encoding == JSON_IETF
    assert value("ethernet/state/port-speed") == ("openconfig-if-ethernet:SPEED_400GB" if ietf else "SPEED_400GB")
    assert value("state/type") == ("iana-if-type:ethernetCsmacd" if ietf else "ethernetCsmacd")


def test_blocks_and_responses_are_shared_within_a_tick() -> None:
    enc = UpdateEncoder()
    sels = selectors("/interfaces/interface/state/counters")
    t1 = tick(E1=iface_row("E1", COUNTERS), E2=iface_row("E2", COUNTERS))
    keys = [[("E1",), ("E2",)]]
    a = enc.full(t1, sels, keys, PROTO, prefix_field())
    assert enc.full(t1, sels, keys, PROTO, prefix_field()) is a
    t2 = Tick(TS + 1, 0, t1.rows)
    b = enc.full(t2, sels, keys, PROTO, prefix_field())
    assert b is not a and gnmi_pb2.SubscribeResponse.FromString(b[0]).update.timestamp == TS + 1
    # An older tick is still encoded correctly, just not cached.
    assert gnmi_pb2.SubscribeResponse.FromString(enc.full(t1, sels, keys, PROTO, prefix_field())[0]).update.timestamp == TS


def test_value_length_changes_keep_heads_right() -> None:
    """Update heads are cached per payload length: a counter growing past a varint byte boundary."""
    enc = UpdateEncoder()
    sels = selectors("/interfaces/interface/state/counters/in-octets")
    for i, v in enumerate([0, 127, 128, 2**40, U64_MAX, 5]):
        t = Tick(TS + i, 0, tick(E1=iface_row("E1", (v, *COUNTERS[1:]))).rows)
        for encoding in (PROTO, JSON_IETF):
            (resp,) = enc.full(t, sels, [[("E1",)]], encoding, prefix_field())
            val = next(iter(updates(resp).values()))
            assert (val.uint_val if encoding == PROTO else json.loads(val.json_ietf_val)) == (
                v if encoding == PROTO else str(v))


def test_delete_and_get_response() -> None:
    enc = UpdateEncoder()
    n = notification(TS, prefix_field(), [enc.delete(INTERFACES, ("E9",))])
    resp = gnmi_pb2.GetResponse.FromString(get_response([n, notification(TS, prefix_field(), [])]))
    assert len(resp.notification) == 2
    assert [e.name for e in resp.notification[0].delete[0].elem] == ["interfaces", "interface"]
    assert resp.notification[0].delete[0].elem[1].key == {"name": "E9"}


def test_chunking() -> None:
    parts = [b"x" * 10] * 25
    runs = chunk(parts, limit=100)
    assert [len(r) for r in runs] == [10, 10, 5]
    assert chunk([b"y" * 500], limit=100) == [[b"y" * 500]]


def test_sync_response() -> None:
    assert gnmi_pb2.SubscribeResponse.FromString(SYNC_RESPONSE).sync_response is True


def test_path_message_matches_protobuf() -> None:
    elems = [("network-instances", {}), ("network-instance", {"name": "default"}), ("x", {"b": "2", "a": "é/1"})]
    got = gnmi_pb2.Path.FromString(path_message(elems, origin="openconfig", target="leaf1"))
    want = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=n, key=k) for n, k in elems], origin="openconfig",
                         target="leaf1")
    assert got == want
    assert gnmi_pb2.Path.FromString(path_message([])) == gnmi_pb2.Path()


def test_unchanged_values_reuse_their_bytes_and_changed_ones_do_not() -> None:
    enc = UpdateEncoder()
    sels = selectors("/interfaces/interface/state/counters")
    out = []
    for i, v in enumerate([5, 5, 300, 300, 5]):
        t = Tick(TS + i, 0, tick(E1=iface_row("E1", (v, *COUNTERS[1:]))).rows)
        (resp,) = enc.full(t, sels, [[("E1",)]], PROTO, prefix_field())
        out.append(updates(resp)["interfaces/interface[name=E1]/state/counters/in-octets"].uint_val)
    assert out == [5, 5, 300, 300, 5]


@pytest.mark.parametrize(("encoding", "payload"), [(JSON, b"31"), (JSON_IETF, b"31"), (PROTO, b"\x1f")])
def test_small_integers_are_bare_json_numbers(encoding: int, payload: bytes) -> None:
    """RFC 7951 quotes only 64-bit integers: a uint8 prefix-length is a number in JSON_IETF too."""
    prefix_length = IPV4_ADDRESSES.leaves[1]
    assert prefix_length.path == ("state", "prefix-length")
    assert value_codec(prefix_length, encoding).payload(31) == payload
