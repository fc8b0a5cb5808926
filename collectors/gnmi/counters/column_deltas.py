"""``DeltaTracker.update_row`` on whole arrays: the deltas of every counter of one instant at once (pure).

Same rules, same results (see deltas.py): BASELINE for a counter never sampled (previous timestamp
0), a duplicate or older timestamp dropped and counted, RESET when the last-clear moved past the
previous sample or the value went down (64-bit, or 32-bit whose wrap is impossible at line rate),
WRAPPED for a plausible 32-bit wrap, GAP past ``gap_ns``, else OK. Arrays are (rows, counters):
an interface's ten counters or a next hop's two per row; ``present`` marks the sampled ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowtracer.collectors.gnmi.counters.deltas import BASELINE, GAP, RESET, WRAPPED

_U64 = np.uint64
_2_32 = _U64(2**32)


@dataclass(slots=True)
class ColumnState:
    """The previous sample of every counter of a grid: value (uint64), timestamp ns and last-clear
    ns (int64); timestamp 0 = never sampled."""

    values: np.ndarray
    ts: np.ndarray
    clear: np.ndarray


@dataclass(slots=True)
class ColumnDeltas:
    """Results of one instant. ``kept``: counters not dropped; ``interval_ns`` per row: the longest
    interval among its OK / GAP / WRAPPED counters (0 if none)."""

    delta: np.ndarray  # uint64
    status: np.ndarray  # int64, DeltaStatus values
    kept: np.ndarray  # bool
    interval_ns: np.ndarray  # int64 per row
    duplicates: int
    out_of_order: int


def column_deltas(state: ColumnState, values: np.ndarray, present: np.ndarray, ts: int, clear: np.ndarray,
                  *, counter_bits: int, gap_ns: int, max_rate: np.ndarray | None) -> ColumnDeltas:
    """Account one instant's samples (``values`` uint64, taken at ``ts`` ns, last-clear ``clear``
    ns per counter) against ``state``, which is updated in place. ``max_rate``: the largest possible
    increase per ns per counter (0 = unknown), only used to refuse a 32-bit wrap; None = unknown."""
    pv, pt, pc = state.values, state.ts, state.clear
    baseline = present & (pt == 0)
    seen = present & ~baseline
    dup = seen & (pt == ts)
    ooo = seen & (pt > ts)
    live = seen & (pt < ts)
    iv = np.where(live, ts - pt, 0)
    cleared = live & (clear != pc) & (clear > pt)
    down = live & ~cleared & (values < pv)
    delta = np.where(live & ~cleared & ~down, values - pv, _U64(0))
    wrapped = np.zeros(values.shape, bool)
    if counter_bits == 32 and down.any():
        wrap = down & (pv < _2_32)
        wd = values + _2_32 - pv  # only read where wrap
        if max_rate is not None:
            wrap &= (max_rate <= 0) | (wd.astype(np.float64) <= max_rate * iv.astype(np.float64))
        wrapped = wrap
        delta = np.where(wrapped, wd, delta)
    reset = cleared | (down & ~wrapped)
    ok = live & ~cleared & ~down
    status = np.zeros(values.shape, np.int64)
    if gap_ns:
        status[ok & (iv > gap_ns)] = GAP
    status[baseline] = BASELINE
    status[reset] = RESET
    status[wrapped] = WRAPPED
    upd = baseline | live
    pv[upd] = values[upd]
    pt[upd] = ts
    pc[upd] = np.broadcast_to(clear, values.shape)[upd]
    interval = np.where(ok | wrapped, iv, 0).max(axis=1, initial=0) if values.size else np.zeros(len(values), np.int64)
    return ColumnDeltas(delta, status, upd, interval, int(dup.sum()), int(ooo.sum()))
