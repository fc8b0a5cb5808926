"""CounterBatches built on columns (``add_part`` -> ``InstantPlan``) are byte for byte the general path's.

Random streams of one switch mix steady samples with everything that breaks the steady state:
resets, 32-bit wraps, duplicates, out-of-order and late messages, gaps, reconnects, cleared
counters, deletes, next hops re-mapped (interface-ref, IP, group membership) with and without the
instant's timestamp, interfaces appearing, and instants split over messages in any order. Every
message goes to a general assembler and to one fed the way the session feeds it (``Both`` in
test_gnmi_layout_decode); their batches (serialized) and counts must be equal.
"""

from __future__ import annotations

import random

import pytest
from test_gnmi_layout_decode import NI, RECONNECT, SYNC, T0, Both, S, interfaces, next_hops, nh_state, response

from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE, OK
from flowtracer.collectors.gnmi.counters.columns import EncodedBatch

pytestmark = pytest.mark.usefixtures("kernels")  # compiled and numpy hot loops alike


def _stream(rng: random.Random, steps: int, bits: int) -> list[bytes]:
    names = ["Ethernet1", "Ethernet2", "Ethernet3"]
    top = 2**32 if bits == 32 else 10**7
    vals = {n: [rng.randrange(top // 2, top) for _ in range(5)] for n in names}
    nhv = {k: [rng.randrange(10**6, 2 * 10**6), rng.randrange(10**3, 2 * 10**3)] for k in (1, 2, 3)}
    clear = {n: T0 - S for n in names}
    out: list[bytes] = [response(T0 - S, nh_state(1, "10.0.0.1", "Ethernet1") + nh_state(2, "10.0.0.2", "Ethernet2")
                                 + nh_state(3, "10.0.0.2", "Ethernet2", group="7")), SYNC]
    ts = T0
    for _ in range(steps):
        r = rng.random()
        if r < 0.03:
            out.append(RECONNECT)
            continue
        if r < 0.08:  # re-map a next hop, at this instant's timestamp or another
            k = rng.choice((1, 2, 3))
            ups = nh_state(k, rng.choice(("10.0.0.1", "10.0.0.2", "10.0.0.9")), rng.choice(names),
                           group=rng.choice(("1", "2", "10")))
            out.append(response(rng.choice((ts, ts + S // 2)), rng.sample(ups, rng.randint(1, 3))))
            continue
        if r < 0.11:
            what = rng.choice((f"{NI}/next-hops/next-hop[index={rng.choice((1, 2, 3))}]",
                               f"{NI}/next-hop-groups/next-hop-group[id=1]",
                               "/interfaces/interface[name=Ethernet2]"))
            out.append(response(ts, [], deletes=[what]))
            continue
        if r < 0.14:  # a clear reported on its own (ON_CHANGE), maybe stamped between samples
            n = rng.choice(names)
            clear[n] = ts + 1
            out.append(response(rng.choice((ts, ts + 1)), [(f"/interfaces/interface[name={n}]/state/counters/"
                                                               "last-clear", clear[n])]))
            continue
        step = rng.choice((S, S, S, S, S, S, 3 * S, 0, -S // 2))  # mostly steady; gaps, duplicates, older
        ts += step
        for n in names:
            for i in range(5):
                d = rng.choice((0, 1, 7, 1000, 1000, 1000))
                if rng.random() < 0.03:
                    vals[n][i] = rng.randrange(0, top // 4)  # reset (or a wrap on 32-bit)
                elif bits == 32:
                    vals[n][i] = (vals[n][i] + d * 10**6) % 2**32
                else:
                    vals[n][i] += d
        for k in nhv:
            nhv[k] = [v + rng.choice((0, 5, 100)) for v in nhv[k]]
        if rng.random() < 0.05:
            nhv[2] = [0, 0]  # zeros: empty-ish Counter messages
        shown = names if rng.random() < 0.9 else names[:2]  # sometimes an interface is missing
        msgs = [response(ts, interfaces({n: vals[n] for n in shown}, clear={n: clear[n] for n in shown})),
                response(ts, next_hops({k: tuple(v) for k, v in nhv.items()}, newer=False)),
                response(ts, next_hops({k: tuple(v) for k, v in nhv.items() if k != 3}, newer=True))]
        if rng.random() < 0.2:
            rng.shuffle(msgs)
        if rng.random() < 0.1:
            msgs.pop(rng.randrange(3))
        if rng.random() < 0.05:
            msgs.append(msgs[0])  # the same message twice in one instant
        out += msgs
        if rng.random() < 0.05:
            out.append(SYNC)
    return out


@pytest.mark.parametrize("bits", [64, 32])
@pytest.mark.parametrize("seed", range(12))
def test_random_streams_build_the_same_bytes(seed: int, bits: int) -> None:
    both = Both(counter_bits=bits)
    both.run(_stream(random.Random(seed * 100 + bits), 120, bits))
    assert sum(isinstance(b, EncodedBatch) for b in both.batches[2]) > 10  # the columnar path ran


def test_encoded_batch_holds_the_message_s_bytes() -> None:
    both = Both()
    ts = [T0 + k * S for k in range(3)]
    both.run([response(t, interfaces({"Ethernet1": [10 + k, 20, 30, 40, 50]})) for k, t in enumerate(ts)])
    general, col = both.batches[0][-1], both.batches[2][-1]
    assert isinstance(col, EncodedBatch)
    assert col == general and col.switch == "sw1" and col.message().interfaces[0].in_octets.delta == 1
    assert col.SerializeToString() == general.SerializeToString()


def test_general_and_columnar_instants_share_one_delta_state() -> None:
    """Both paths update the assembler's one ``DeltaState``: an instant built the general way (a
    next hop re-mapped within it) between columnar ones continues their counters, exact and OK,
    and the columnar instants after it continue from it."""
    both = Both()
    stream = [response(T0 - S, nh_state(1, "10.0.0.1", "Ethernet1")), SYNC]
    for k in range(6):
        stream.append(response(T0 + k * S, interfaces({"Ethernet1": [10 + 2 * k, 20, 30, 40, 50]})))
        if k == 3:
            stream.append(response(T0 + k * S, nh_state(1, "10.0.0.9", "Ethernet1")))
    both.run(stream)
    kinds = [isinstance(b, EncodedBatch) for b in both.batches[2]]
    assert kinds == [False, True, True, False, True, True]
    msgs = [b.message() if isinstance(b, EncodedBatch) else b for b in both.batches[2]]
    assert [(b.interfaces[0].in_octets.delta, b.interfaces[0].in_octets.status) for b in msgs] == \
        [(0, BASELINE)] + [(2, OK)] * 5


def test_layouts_that_each_carry_last_clears_keep_one_plan() -> None:
    """Two notifications per instant, each with its interfaces' last-clear: steady values must not
    re-plan every instant (each layout's re-applied state would otherwise look like a change)."""
    both = Both()
    stream = []
    for k in range(8):
        ts = T0 + k * S
        stream += [response(ts, interfaces({"Ethernet1": [10 + k, 20, 30, 40, 50]}, clear={"Ethernet1": T0 - S})),
                   response(ts, interfaces({"Ethernet2": [10 + k, 20, 30, 40, 50]}, clear={"Ethernet2": T0 - 2 * S}))]
    both.run(stream)
    assert len(both.asm[2]._plans) == 1
    assert sum(isinstance(b, EncodedBatch) for b in both.batches[2]) >= 6
