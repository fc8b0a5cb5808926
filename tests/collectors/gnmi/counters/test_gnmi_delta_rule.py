"""The production delta rule (``column_deltas`` / ``DeltaState``, numpy) and its compiled copy
(``native.encode_grid``) against the per-counter oracle (delta_oracle.DeltaTracker), on random
sequences: values at varint and 2^32 edges, timestamps that repeat, go back and jump past the gap,
last-clears that move (before or after the previous sample), counters absent, objects re-created
under a new ident, 32-bit wraps within and past line rate. Same deltas, statuses, intervals and
drop counts, instant after instant.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from delta_oracle import DeltaTracker
from hypothesis import given, settings
from hypothesis import strategies as st

from flowtracer.collectors.gnmi.counters import native_loader
from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE, OK, DeltaState
from flowtracer.collectors.gnmi.counters.columns import _IF_TAGS, _Grid
from flowtracer.collectors.gnmi.counters.decode import INTERFACE_COUNTERS
from flowtracer.schemas.v1.counters_pb2 import CounterBatch, InterfaceCounters

S = 1_000_000_000
T0 = 1_767_225_600 * S
WIDTH = len(INTERFACE_COUNTERS)
ROWS = 3
_FIELDS = tuple(c.replace("-", "_") for c in INTERFACE_COUNTERS)

values = st.one_of(st.sampled_from((0, 1, 127, 128, 2**32 - 2, 2**32 - 1, 2**32, 2**63, 2**64 - 1)),
                   st.integers(0, 2**32 + 10), st.integers(0, 2**64 - 1))
steps = st.sampled_from((S, S, S, 2 * S, 3 * S, 0, -S // 2, 1))
instant = st.tuples(
    steps,
    st.lists(st.one_of(st.none(), values), min_size=ROWS * WIDTH, max_size=ROWS * WIDTH),  # None: absent
    st.lists(st.sampled_from((0, -3 * S, -S // 2, S // 2)), min_size=ROWS, max_size=ROWS),  # last-clear vs ts
    st.lists(st.sampled_from((0, 0, 0, 1)), min_size=ROWS, max_size=ROWS),  # ident
)
config = st.tuples(st.sampled_from((32, 64)), st.sampled_from((0, S)), st.sampled_from((None, 0.0, 1e-3, 52.5)))


def _oracle(tr: DeltaTracker, ts: int, vals: list[int | None], clears: list[int], idents: list[int],
            rate: float | None) -> list[tuple[list[tuple[int, int, int, int, int]], int]]:
    rates = () if rate is None else (rate,) * WIDTH
    return [tr.update_row(f"e{r}", vals[r * WIDTH:(r + 1) * WIDTH], ts, clears[r], idents[r], rates)
            for r in range(ROWS)]


def _instants(tr: DeltaTracker, seq: list, rate: float | None) -> Iterator[tuple[int, list, list[int], list[int], list]]:
    """Each instant of ``seq`` as (ts, values, last-clears, idents) and the oracle's results for it."""
    ts = T0
    for step, vals, clear_off, idents in seq:
        ts += step
        clears = [ts + c if c else 0 for c in clear_off]
        yield ts, vals, clears, idents, _oracle(tr, ts, vals, clears, idents, rate)


def _results(r: int, present: np.ndarray, kept: np.ndarray, v: np.ndarray, delta: np.ndarray,
             status: np.ndarray, interval: int) -> tuple[list[tuple[int, int, int, int]], int]:
    return [(j, int(v[r, j]), int(delta[r, j]), int(status[r, j])) for j in range(WIDTH) if kept[r, j]], interval


@settings(max_examples=150, deadline=None)
@given(config, st.lists(instant, min_size=1, max_size=12))
def test_numpy_rule_matches_the_oracle(cfg: tuple[int, int, float | None], seq: list) -> None:
    bits, interval_ns, rate = cfg
    oracle = DeltaTracker(bits, interval_ns, 1.5)
    state = DeltaState(WIDTH, bits, interval_ns, 1.5)
    for ts, vals, clears, idents, want in _instants(oracle, seq, rate):
        present = np.array([v is not None for v in vals]).reshape(ROWS, WIDTH)
        v = np.array([x or 0 for x in vals], np.uint64).reshape(ROWS, WIDTH)
        max_rate = None if rate is None else np.full((ROWS, WIDTH), rate)
        r = state.update(state.rows([f"e{k}" for k in range(ROWS)], idents), v, present, ts,
                         np.array(clears, np.int64)[:, None], max_rate)
        got = [_results(k, present, r.kept, v, r.delta, r.status, int(r.interval_ns[k])) for k in range(ROWS)]
        assert got == [([(i, val, d, s) for i, val, d, s, _ in res], iv) for res, iv in want]
        assert (state.duplicates, state.out_of_order) == (oracle.duplicates, oracle.out_of_order)


@settings(max_examples=150, deadline=None)
@given(config, st.lists(instant, min_size=1, max_size=12))
def test_compiled_and_numpy_encodings_match_the_oracle(cfg: tuple[int, int, float | None], seq: list) -> None:
    """``_Grid.encode`` (the columnar path) on each kernel: the CounterBatch entries it writes are the
    oracle's results (absent counters left out, rows with nothing kept left out)."""
    bits, interval_ns, rate = cfg
    kernels = [None] + ([native_loader.native] if native_loader.native is not None else [])
    saved = native_loader.native
    try:
        for kernel in kernels:
            native_loader.native = kernel
            oracle = DeltaTracker(bits, interval_ns, 1.5)
            state = DeltaState(WIDTH, bits, interval_ns, 1.5)
            for ts, vals, clears, idents, want in _instants(oracle, seq, rate):
                names = [f"e{k}" for k in range(ROWS)]
                src = [[r * WIDTH + j if vals[r * WIDTH + j] is not None else -1 for j in range(WIDTH)]
                       for r in range(ROWS)]
                grid = _Grid(names, list(idents), src, [InterfaceCounters(name=n).SerializeToString() for n in names],
                             None, clears, None if rate is None else [(rate,) * WIDTH] * ROWS)
                flat = np.array([x or 0 for x in vals], np.uint64)
                data, kept = grid.encode(state, flat, ts, 0x42, 0x20, _IF_TAGS)
                got = {ic.name: ([(j, getattr(ic, f).value, getattr(ic, f).delta, getattr(ic, f).status)
                                  for j, f in enumerate(_FIELDS) if ic.HasField(f)], ic.interval_ns)
                       for ic in CounterBatch.FromString(data).interfaces}
                assert got == {f"e{k}": ([(i, val, d, s) for i, val, d, s, _ in res], iv)
                               for k, (res, iv) in enumerate(want) if res}, kernel
                assert kept == sum(len(res) for res, _ in want)
                assert (state.duplicates, state.out_of_order) == (oracle.duplicates, oracle.out_of_order)
    finally:
        native_loader.native = saved


def test_a_grid_finds_its_rows_again_after_a_reset_elsewhere(kernels: str) -> None:
    """A grid keeps its rows while the state's epoch stands; a re-created object (new ident) seen by
    the general path, or a new session, moves the epoch: the grid's next instant is a BASELINE."""
    state = DeltaState(WIDTH, 64, S, 1.5)
    grid = _Grid(["e0"], [1], [list(range(WIDTH))], [InterfaceCounters(name="e0").SerializeToString()], None,
                 [0], None)

    def statuses(ts: int, v: int) -> list[int]:
        data, _ = grid.encode(state, np.full(WIDTH, v, np.uint64), ts, 0x42, 0x20, _IF_TAGS)
        return [getattr(CounterBatch.FromString(data).interfaces[0], f).status for f in _FIELDS]

    assert set(statuses(T0, 5)) == {BASELINE}
    assert set(statuses(T0 + S, 7)) == {OK}
    state.update(state.rows(["e0"], [2]), np.full((1, WIDTH), 9, np.uint64), np.ones((1, WIDTH), bool), T0 + 2 * S,
                 np.zeros((1, 1), np.int64))  # the general path: e0 is another object now
    assert set(statuses(T0 + 3 * S, 8)) == {BASELINE}  # and back to ident 1: new again
    assert set(statuses(T0 + 4 * S, 9)) == {OK}
    state.clear()
    assert set(statuses(T0 + 5 * S, 9)) == {BASELINE}
