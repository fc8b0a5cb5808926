"""The layout decoder (known layouts, raw bytes) gives exactly what the general decoder gives.

Every message of every sequence goes through both: the general decoder always, the fast one when
it recognises the layout (else it learns from the general result, as the session does). Samples
must be equal field by field, and the CounterBatches assembled from either must be equal too:
resets, clears, wraps, duplicates, out-of-order, reconnects, deletes, JSON, new and reordered paths.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest
from google.protobuf.message import DecodeError as ProtoDecodeError
from pygnmi.spec.v080 import gnmi_pb2 as g
from test_gnmi_decode import notif

from flowtracer.collectors.gnmi.counters.assembly import Batch, BatchAssembler
from flowtracer.collectors.gnmi.counters.column_deltas import WRAPPED
from flowtracer.collectors.gnmi.counters.decode import Decoder
from flowtracer.collectors.gnmi.counters.layout import FastDecoder
from flowtracer.collectors.gnmi.counters.samples import Samples
from flowtracer.schemas.wire import varint

pytestmark = pytest.mark.usefixtures("kernels")  # compiled and numpy hot loops alike

S = 1_000_000_000
T0 = 1_767_225_600 * S
NI = "/network-instances/network-instance[name=default]/afts"
COUNTERS = ("in-octets", "out-octets", "in-pkts", "in-discards", "in-multicast-pkts")  # the last is ignored

Update = tuple[str, object]  # (path, value): int = uint_val, str = string_val (see test_gnmi_decode.notif)


def response(ts: int, updates: Iterable[Update], *, prefix: str = "openconfig:/", deletes: Iterable[str] = (),
             duplicates: int = 0, encoding: str = "proto") -> bytes:
    n = notif(list(updates), prefix, ts, tuple(deletes), encoding)
    for u in n.update:
        u.duplicates = duplicates
    return g.SubscribeResponse(update=n).SerializeToString()


def interfaces(values: dict[str, list[int]], clear: dict[str, int] | None = None) -> list[Update]:
    out: list[Update] = []
    for name, vals in values.items():
        out += [(f"/interfaces/interface[name={name}]/state/counters/{c}", v) for c, v in zip(COUNTERS, vals,
                                                                                           strict=True)]
        if clear is not None:
            out.append((f"/interfaces/interface[name={name}]/state/counters/last-clear", clear.get(name, 0)))
    return out


def next_hops(values: dict[int, tuple[int, int]], newer: bool) -> list[Update]:
    tree = "counters/next-hops/next-hop[index={k}]/state" if newer else "next-hops/next-hop[index={k}]/state/counters"
    return [(f"{NI}/{tree.format(k=k)}/{c}", v) for k, (o, p) in values.items()
            for c, v in (("octets-forwarded", o), ("packets-forwarded", p))]


def nh_state(k: int, ip: str, intf: str, group: str = "1") -> list[Update]:
    return [(f"{NI}/next-hops/next-hop[index={k}]/state/ip-address", ip),
            (f"{NI}/next-hops/next-hop[index={k}]/interface-ref/state/interface", intf),
            (f"{NI}/next-hop-groups/next-hop-group[id={group}]/next-hops/next-hop[index={k}]/state/weight", 1)]


SYNC = g.SubscribeResponse(sync_response=True).SerializeToString()
RECONNECT = b""  # a marker in a stream: the session reconnected


class Both:
    """One general and one fast decode of every message, each fed to its own assembler; a third
    assembler gets the fast decoder's columns as the session gives them (``add_part``: CounterBatch
    bytes built on columns), falling back to the general way for the rest."""

    def __init__(self, counter_bits: int = 64) -> None:
        self.general, self.decoder, self.col_decoder = Decoder(), Decoder(), Decoder()
        self.fast = FastDecoder(self.decoder)
        self.col = FastDecoder(self.col_decoder)
        self.asm = [BatchAssembler("sw1", collector_id="c", counter_bits=counter_bits, if_interval_ns=S,
                                   nh_interval_ns=S) for _ in range(3)]
        self.batches: list[list[Batch]] = [[], [], []]
        self.session = 0
        self.reconnect()

    def reconnect(self) -> None:
        self.session += 1
        for a, out in zip(self.asm, self.batches, strict=True):
            out += a.start_session(self.session)

    def feed(self, raw: bytes) -> Samples | None:
        """Decode ``raw`` both ways; returns the fast Samples (None: general way, layout learnt)."""
        if raw == RECONNECT:
            self.reconnect()
            return None
        resp = g.SubscribeResponse.FromString(raw)
        fast = self.fast.decode(raw)
        self.feed_columns(raw, resp)
        if resp.WhichOneof("response") != "update":
            assert fast is None
            for a, out in zip(self.asm, self.batches, strict=True):
                out += a.sync()
            return None
        want = self.general.decode(resp.update)
        got = fast
        if got is None:
            got = self.decoder.decode(resp.update)
            self.fast.learn(raw, resp.update, got)
        assert got == want
        for a, out, s in zip(self.asm, self.batches, (want, got), strict=False):
            out += a.add(s, 0)
        return fast

    def feed_columns(self, raw: bytes, resp: g.SubscribeResponse) -> None:
        """What the session does with ``raw`` (the third assembler)."""
        asm, out = self.asm[2], self.batches[2]
        m = self.col.match(raw)
        if m is not None:
            out += asm.add_part(m[0], m[1], 0)
        elif resp.WhichOneof("response") == "update":
            s = self.col_decoder.decode(resp.update)
            self.col.learn(raw, resp.update, s)
            out += asm.add(s, 0)

    def run(self, stream: Iterable[bytes]) -> list[bool]:
        hits = [self.feed(raw) is not None for raw in stream]
        for a, out in zip(self.asm, self.batches, strict=True):
            out += a.flush()
        assert self.batches[0] == self.batches[1]
        want, got = ([b.SerializeToString() for b in out] for out in (self.batches[0], self.batches[2]))
        assert got == want  # byte for byte
        stats = [(a.stats, a.if_deltas.duplicates, a.nh_deltas.duplicates, a.if_deltas.out_of_order,
                  a.nh_deltas.out_of_order) for a in self.asm]
        assert stats[2] == stats[0]
        return hits


def test_steady_state_is_read_fast_and_equal() -> None:
    both = Both()
    stream = [response(T0 - S, nh_state(1, "10.0.0.1", "Ethernet1") + nh_state(2, "10.0.0.2", "Ethernet2")), SYNC]
    for k in range(6):
        ts = T0 + k * S
        stream += [response(ts, interfaces({"Ethernet1": [1000 + 7 * k, 2000 + k, 30, 4, 50 + k],
                                            "Ethernet2": [100, 200 + k, 3, 0, 9]}, clear={"Ethernet1": T0 - S})),
                   response(ts, next_hops({1: (500 + k, 5), 2: (600, 6 + k)}, newer=False)),
                   response(ts, next_hops({1: (501 + k, 5), 2: (601, 6 + k)}, newer=True))]
    hits = both.run(stream)
    assert hits[:5] == [False] * 5  # state, sync, then each of the three layouts once
    assert all(hits[5:])
    assert len(both.batches[0]) == 6 and both.batches[0][-1].next_hops[0].octets_forwarded.delta == 1


def test_resets_clears_duplicates_out_of_order_and_reconnects_are_equal() -> None:
    both = Both()
    v = [10**6, 10**6, 10**6, 10**6, 10**6]

    def ifc(ts: int, vals: list[int], clear: int = T0 - S) -> bytes:
        return response(ts, interfaces({"Ethernet1": vals, "Ethernet2": [x + 1 for x in vals]},
                                       clear={"Ethernet1": clear, "Ethernet2": T0 - S}))

    stream = [ifc(T0, v), ifc(T0 + S, [x + 10 for x in v]),
              ifc(T0 + S, [x + 10 for x in v]),  # duplicate instant
              ifc(T0 + S // 2, [x + 5 for x in v]),  # out of order
              ifc(T0 + 2 * S, [x - 999_000 for x in v]),  # went down: RESET (same varint lengths)
              ifc(T0 + 3 * S, [x - 998_000 for x in v], clear=T0 + 2 * S + 1),  # last-clear moved: RESET
              ifc(T0 + 6 * S, [x - 997_000 for x in v], clear=T0 + 2 * S + 1),  # GAP
              RECONNECT, ifc(T0 + 7 * S, [x - 996_000 for x in v], clear=T0 + 2 * S + 1),  # BASELINE
              ifc(T0 + 8 * S, [x - 995_000 for x in v], clear=T0 + 2 * S + 1)]
    hits = both.run(stream)
    assert sum(hits) >= 5
    statuses = {c.status for b in both.batches[0] for i in b.interfaces for c in (i.in_octets, i.out_octets)}
    assert len(statuses) == 4  # OK, BASELINE, RESET, GAP


def test_counter32_wraps_are_equal() -> None:
    both = Both(counter_bits=32)
    stream = [response(T0 + k * S, interfaces({"Ethernet1": [(4_294_967_000 + 100 * k) % 2**32] * 5}))
              for k in range(6)]
    both.run(stream)
    assert any(b.interfaces[0].in_octets.status == WRAPPED for b in both.batches[0])


def test_layout_changes_mid_stream_go_the_general_way_first() -> None:
    both = Both()
    base = {"Ethernet1": [100, 200, 300, 400, 500], "Ethernet2": [1, 2, 3, 4, 5]}
    grown = {"Ethernet1": [100, 200, 300, 400, 500], "Ethernet2": [1, 2, 3, 4, 5], "Ethernet3": [7, 7, 7, 7, 7]}
    swapped = {"Ethernet2": [100, 200, 300, 400, 500], "Ethernet1": [1, 2, 3, 4, 5]}  # same length, other bytes
    stream = [response(T0, interfaces(base)), response(T0 + S, interfaces(base)),
              response(T0 + 2 * S, interfaces(grown)),  # a new interface
              response(T0 + 3 * S, interfaces(swapped)),  # reordered: same length
              response(T0 + 4 * S, interfaces({"Ethernet1": [100, 200, 300, 400, 2**40],  # a longer varint
                                               "Ethernet2": [1, 2, 3, 4, 5]})),
              response(T0 + 5 * S, interfaces(base), duplicates=3),  # another byte in every update
              response(T0 + 6 * S, interfaces(base), prefix=""),  # no prefix
              response(T0 + 7 * S, interfaces(base), deletes=["/interfaces/interface[name=Ethernet9]"]),
              response(T0 + 8 * S, [*interfaces({"Ethernet1": [1] * 5}),
                                    ("/interfaces/interface[name=Ethernet1]/state/oper-status", "UP")]),  # a string
              response(T0 + 9 * S, [("/interfaces/interface[name=Ethernet1]/state/counters", {
                  "in-octets": "5", "openconfig-interfaces:out-octets": "6"})], encoding="json_ietf"),  # container
              response(T0 + 10 * S, interfaces({"Ethernet1": [2**63, 1, 1, 1, 1]})),  # past 9 varint bytes
              response(-5, interfaces(base)),  # a negative timestamp (10 varint bytes)
              response(0, interfaces(base)),  # no timestamp at all
              response(T0 + 11 * S, interfaces(base), prefix="vendor:/")]  # not OpenConfig: ignored
    hits = both.run(stream)
    assert hits[1] and hits[6] is False and not any(hits[2:5])


def test_random_byte_changes_are_either_the_same_notification_or_refused() -> None:
    """Any change the fast path accepts is a change of numbers only: the general parse agrees."""
    rng = random.Random(7)
    raw = response(T0, interfaces({"Ethernet1": [10**9] * 5}, clear={"Ethernet1": T0}) +
                   next_hops({3: (10**6, 10**3)}, newer=True))
    both = Both()
    both.feed(raw)
    accepted = 0
    for _ in range(3000):
        b = bytearray(raw)
        for _ in range(rng.choice((1, 1, 2, 3))):
            b[rng.randrange(len(b))] = rng.randrange(256)
        fast = both.fast.decode(bytes(b))
        if fast is None:
            continue
        accepted += 1
        assert fast == Decoder().decode(g.SubscribeResponse.FromString(bytes(b)).update)
    assert accepted > 20  # some changes hit only value bits


def test_truncated_and_garbage_messages_are_refused_not_learnt() -> None:
    raw = response(T0, interfaces({"Ethernet1": [1, 2, 3, 4, 5]}))
    fd = FastDecoder(Decoder())
    for junk in (raw[:-3], raw + b"\x00", b"\x0a\x05\x08\x01", b""):
        assert fd.decode(junk) is None
        try:
            n = g.SubscribeResponse.FromString(junk).update
        except ProtoDecodeError:
            continue
        fd.learn(junk, n, Decoder().decode(n))
    assert fd.learnt == 0



def test_a_timestamp_sent_after_the_updates_is_read_fast_and_equal() -> None:
    """Protobuf fields may come in any order: a switch that writes the timestamp last still gets the
    fast path, and each value lands in its own slot."""

    def late_ts(ts: int, k: int) -> bytes:
        body = notif(interfaces({"Ethernet1": [1000 + 7 * k, 2000 + 3 * k, 30 + k, 4, 50]}), "openconfig:/", 0, (),
                     "proto").SerializeToString() + b"\x08" + varint(ts)
        return b"\x0a" + varint(len(body)) + body

    both = Both()
    hits = both.run([late_ts(T0 + k * S, k) for k in range(5)])
    assert hits == [False, True, True, True, True]
    assert [b.interfaces[0].in_pkts.delta for b in both.batches[0][1:]] == [1, 1, 1, 1]
