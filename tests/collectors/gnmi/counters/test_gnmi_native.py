"""The compiled hot loops (collectors/gnmi/counters/native.pyx) give exactly what their numpy twins give.

The numpy path is pinned to protobuf and to the general path by test_gnmi_counter_wire and the
random-stream tests (which run on both); here random grids with varint edges, every delta rule
(baseline, duplicate, out of order, clear, decrease, 32-bit wrap within and past line rate, gap)
and absent counters go through ``_Grid.encode`` both ways: same bytes, counts and state after
(test_gnmi_delta_rule checks both against the per-counter oracle).
"""

from __future__ import annotations

import copy
import random
from types import ModuleType

import numpy as np
import pytest

from flowtracer.collectors.gnmi.counters import native_loader
from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE, GAP, OK, RESET, WRAPPED, ColumnState, DeltaState
from flowtracer.collectors.gnmi.counters.columns import _IF_TAGS, _NH_TAGS, _Grid
from flowtracer.schemas.v1.counters_pb2 import CounterBatch, InterfaceCounters, NextHopCounters

S = 1_000_000_000
TS = 1_767_225_600 * S
EDGES = (0, 1, 127, 128, 300, 2**14, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1)


def _random_grid(rng: random.Random, interfaces: bool, bits: int) -> tuple[_Grid, np.ndarray, ColumnState]:
    rows, cols = rng.randint(1, 8), (len(_IF_TAGS) if interfaces else len(_NH_TAGS))
    top = 2**32 if bits == 32 and rng.random() < 0.8 else 2**64

    def value() -> int:
        return rng.choice(EDGES) % top if rng.random() < 0.3 else rng.randrange(top)

    values = np.array([value() for _ in range(rows * cols + 3)], np.uint64)
    slots = rng.sample(range(len(values)), rows * cols)
    src = [[slots[r * cols + j] if rng.random() < 0.85 else -1 for j in range(cols)] for r in range(rows)]
    clears = [rng.choice((0, TS - 5 * S, TS - S // 2)) for _ in range(rows)]
    names = [f"Ethernet{r}" for r in range(rows)]
    if interfaces:
        pre = [InterfaceCounters(name=n, oper_status=1, speed_bps=rng.choice((0, 400 * 10**9))).SerializeToString()
               for n in names]
        mid = [InterfaceCounters(last_clear_ns=c, last_change_ns=rng.choice((0, TS - S))).SerializeToString()
               for c in clears]
        rates = [[rng.choice((0.0, 1e-3, 52.5)) for _ in range(cols)] for _ in range(rows)]
        grid = _Grid(names, [None] * rows, src, pre, mid, clears, rng.choice((rates, None)))
    else:
        pre = [NextHopCounters(group="1", index=r, egress_interface=n, next_hop_ip="10.0.0.1", weight=1)
               .SerializeToString() for r, n in enumerate(names)]
        grid = _Grid(names, list(range(rows)), src, pre, None, [0] * rows, None)
    shape = (rows, cols)
    prev_ts = [rng.choice((0, TS, TS + 1, TS - S, TS - 3 * S, TS - rng.randrange(1, 2**40))) for _ in range(rows * cols)]
    state = ColumnState(np.array([value() for _ in range(rows * cols)], np.uint64).reshape(shape),
                        np.array(prev_ts, np.int64).reshape(shape),
                        np.array([rng.choice((*clears, 0)) for _ in range(rows * cols)], np.int64).reshape(shape))
    return grid, values, state


@pytest.mark.parametrize("bits", [64, 32])
@pytest.mark.parametrize("interfaces", [True, False])
def test_grid_encode_matches_numpy(native: ModuleType, monkeypatch: pytest.MonkeyPatch, interfaces: bool,
                                   bits: int) -> None:
    rng = random.Random(bits * 10 + interfaces)
    tags, tag, interval_tag = (_IF_TAGS, 0x42, 0x20) if interfaces else (_NH_TAGS, 0x4A, 0x30)
    statuses: set[int] = set()
    dropped = [0, 0]
    for _ in range(300):
        grid, values, state = _random_grid(rng, interfaces, bits)
        gap = rng.choice((0, S))
        trackers = [DeltaState(grid.src.shape[1], bits, expected_interval_ns=gap, gap_factor=1.5) for _ in range(2)]
        for t in trackers:
            t.put(t.rows(grid.keys, grid.idents), copy.deepcopy(state))
        got = grid.encode(trackers[0], values, TS, tag, interval_tag, tags)
        monkeypatch.setattr(native_loader, "native", None)
        want = grid.encode(trackers[1], values, TS, tag, interval_tag, tags)
        monkeypatch.setattr(native_loader, "native", native)
        assert got == want
        assert (trackers[0].duplicates, trackers[0].out_of_order) == (trackers[1].duplicates, trackers[1].out_of_order)
        after = [t.take(t.rows(grid.keys, grid.idents)) for t in trackers]
        for a, b in zip((after[0].values, after[0].ts, after[0].clear), (after[1].values, after[1].ts, after[1].clear),
                        strict=True):
            assert np.array_equal(a, b)
        dropped[0] += trackers[0].duplicates
        dropped[1] += trackers[0].out_of_order
        batch = CounterBatch.FromString(got[0])
        for row in batch.interfaces if interfaces else batch.next_hops:
            statuses |= {v.status for f, v in row.ListFields() if f.message_type is not None}
    # Every rule was exercised, not only the easy ones.
    assert statuses >= {OK, BASELINE, RESET, GAP} | ({WRAPPED} if bits == 32 else set())
    assert min(dropped) > 0


def test_read_slots_refuses_a_message_of_another_layout(native: ModuleType) -> None:
    expected = np.array([0x0A, 0x80, 0x00, 0x22], np.uint8)  # one 2-byte slot at 1
    pos, ln, idx = (np.array(x, np.int64) for x in ([1], [2], [0]))
    assert native.read_slots(bytes([0x0A, 0x96, 0x01, 0x22]), expected, pos, ln, idx).tolist() == [150]
    for other in ([0x0A, 0x16, 0x01, 0x22], [0x0A, 0x96, 0x81, 0x22], [0x0B, 0x96, 0x01, 0x22],
                  [0x0A, 0x96, 0x01, 0x23], [0x0A, 0x96, 0x01]):
        assert native.read_slots(bytes(other), expected, pos, ln, idx) is None
