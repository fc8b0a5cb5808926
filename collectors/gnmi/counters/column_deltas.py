"""Counter samples -> exact deltas with a status, on arrays: the collector's one delta rule in production (pure).

gnmic and Telegraf leave deltas to the consumer (``rate()``/``derivative``), which either goes
negative or, with unsigned arithmetic, spikes to ~2^64 when a counter resets, and silently
under-counts when a cleared counter has already grown past its old value by the next sample.
This rule never emits a negative delta or a spike; when it cannot know the increase it says so
(``DeltaStatus``) and reports 0:

* BASELINE: first sample of a counter in a session (connect, reconnect, resync: previous
  timestamp 0), or a counter whose identity changed (a next hop re-created under a new index);
* RESET: the counter went down (64-bit), or ``last-clear`` moved to after the previous sample
  (even if the value went up: the increase since the clear is unknown; a clear reported late,
  after the sample that already showed the drop, does not reset twice);
* WRAPPED: a configured 32-bit counter went down without a confirmed clear: delta modulo 2^32,
  unless that delta is impossible at line rate (``max_rate``), then RESET;
* GAP: the delta is exact but spans more than ``gap_ns`` (gap_factor sample intervals);
* OK: the exact increase since the previous sample.

A sample whose timestamp is not newer than the counter's last one (duplicate or out of order)
is dropped and counted; it changes nothing. Timestamps are ns since the epoch; values are the
counters' unit (bytes or packets), uint64 (the decoder refuses anything past 2^64 - 1).

Which rule runs: ``column_deltas`` is the rule, and ``DeltaState`` the one owner of the delta
state of a session, used by both of ``BatchAssembler``'s paths (the general one and the columnar
``InstantPlan``). The compiled ``native.encode_grid`` runs the same rule fused with the wire
encoding where the extension is built; tests check it, and this module, against a per-counter
oracle (tests/collectors/gnmi/delta_oracle.py) on random sequences.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flowtracer.schemas.v1.common_pb2 import DeltaStatus

OK = DeltaStatus.DELTA_STATUS_OK
BASELINE = DeltaStatus.DELTA_STATUS_BASELINE
RESET = DeltaStatus.DELTA_STATUS_RESET
WRAPPED = DeltaStatus.DELTA_STATUS_WRAPPED
GAP = DeltaStatus.DELTA_STATUS_GAP

STATUS_NAMES = {OK: "ok", BASELINE: "baseline", RESET: "reset", WRAPPED: "wrapped", GAP: "gap"}

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
    """Account one instant's samples (``values`` uint64 (rows, counters), taken at ``ts`` ns,
    last-clear ``clear`` ns per counter or per row as (rows, 1)) against ``state``, which is updated
    in place; ``present`` marks the sampled counters. ``max_rate``: the largest possible increase
    per ns per counter (0 = unknown), only used to refuse a 32-bit wrap; None = unknown."""
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


class DeltaState:
    """The delta state of one kind of counter (an interface's ten, a next hop's two) of one switch
    session, one row per object: the only place it is kept. Keys are any hashable (switch-local
    object identity); ``ident`` is what the object is (e.g. next-hop index): a row whose ident
    changes starts again from BASELINE.

    Args:
        width: counters per row.
        counter_bits: 64, or 32 for devices whose counters wrap at 2^32.
        expected_interval_ns: the sample interval; 0 disables GAP detection (ON_CHANGE).
        gap_factor: an interval longer than this many expected intervals is a GAP.
    """

    def __init__(self, width: int, counter_bits: int = 64, expected_interval_ns: int = 0,
                 gap_factor: float = 1.5) -> None:
        if counter_bits not in (32, 64):
            raise ValueError(f"counter_bits must be 32 or 64, not {counter_bits}")
        self.width = width
        self.counter_bits = counter_bits
        #: An interval longer than this (ns) is a GAP; 0 = no GAP detection.
        self.gap_ns = int(expected_interval_ns * gap_factor) if expected_interval_ns > 0 else 0
        #: Samples dropped because their timestamp equalled the counter's last one.
        self.duplicates = 0
        #: Samples dropped because their timestamp was older than the counter's last one.
        self.out_of_order = 0
        #: Bumped whenever a row is reset or all are forgotten: rows found before stay valid until it
        #: changes (a caller may keep the rows of its keys while ``epoch`` is the same).
        self.epoch = 0
        self.clear()

    def clear(self) -> None:
        """Forget every counter: the next sample of each is a BASELINE (new session)."""
        self.epoch += 1
        self._index: dict[Hashable, int] = {}
        self._idents: list[Hashable] = []
        self._state = ColumnState(np.zeros((8, self.width), _U64), np.zeros((8, self.width), np.int64),
                                  np.zeros((8, self.width), np.int64))

    def __len__(self) -> int:
        return len(self._idents)

    def rows(self, keys: Sequence[Hashable], idents: Sequence[Hashable]) -> np.ndarray:
        """The row (intp) of each key; a key first seen, or whose ident differs from its row's,
        gets a never-sampled row."""
        index, known, st = self._index, self._idents, self._state
        out = np.empty(len(keys), np.intp)
        for k, (key, ident) in enumerate(zip(keys, idents, strict=True)):
            r = index.get(key)
            if r is None:
                r = index[key] = len(known)
                known.append(ident)
                if r == len(st.ts):
                    self._grow()
                    st = self._state
            elif known[r] != ident:  # a new object under this key
                known[r] = ident
                self.epoch += 1
                st.values[r], st.ts[r], st.clear[r] = 0, 0, 0
            out[k] = r
        return out

    def _grow(self) -> None:
        st = self._state
        self._state = ColumnState(*(np.concatenate([a, np.zeros_like(a)]) for a in (st.values, st.ts, st.clear)))

    @staticmethod
    def block(rows: np.ndarray) -> np.ndarray | slice:
        """``rows`` as a slice when they are consecutive and ascending (usual: the keys of a grid are
        first seen together, in order), for ``take`` to return views; else ``rows``."""
        n = len(rows)
        if n and int(rows[-1]) - int(rows[0]) == n - 1 and (n == 1 or bool(np.all(np.diff(rows) == 1))):
            return slice(int(rows[0]), int(rows[0]) + n)
        return rows

    def take(self, rows: np.ndarray | slice) -> ColumnState:
        """The state of ``rows`` (C-contiguous) for a kernel that updates it in place: views of the
        state itself for a slice (``put`` then has nothing to do), else a copy."""
        st = self._state
        return ColumnState(st.values[rows], st.ts[rows], st.clear[rows])

    def put(self, rows: np.ndarray | slice, state: ColumnState) -> None:
        """Write back the state of ``rows`` taken by ``take`` (nothing to do for views)."""
        if isinstance(rows, slice):
            return
        st = self._state
        st.values[rows], st.ts[rows], st.clear[rows] = state.values, state.ts, state.clear

    def count_dropped(self, duplicates: int, out_of_order: int) -> None:
        """Add the drops a kernel counted."""
        self.duplicates += duplicates
        self.out_of_order += out_of_order

    def update(self, rows: np.ndarray | slice, values: np.ndarray, present: np.ndarray, ts: int, clear: np.ndarray,
               max_rate: np.ndarray | None = None) -> ColumnDeltas:
        """``column_deltas`` on ``rows`` (from ``rows()``, each at most once, or its ``block``): see
        there for the arguments."""
        st = self.take(rows)
        r = column_deltas(st, values, present, ts, clear, counter_bits=self.counter_bits, gap_ns=self.gap_ns,
                          max_rate=max_rate)
        self.put(rows, st)
        self.count_dropped(r.duplicates, r.out_of_order)
        return r

    def update_sparse(self, keys: Sequence[Hashable], rows: Sequence[Mapping[int, int]], ts: int
                      ) -> list[tuple[dict[int, tuple[int, int, int]], int]]:
        """``update`` for a few rows given as {counter index: value} (the counters sampled), keyed by ``keys``
        (their own idents; no last-clear): per row, {index: (value, delta, DeltaStatus)} of the counters kept
        (not duplicates or out of order) and the row's interval (ns). Values outside uint64 are not sampled."""
        if not keys:
            return []
        vals = np.zeros((len(keys), self.width), _U64)
        present = np.zeros(vals.shape, bool)
        for r, row in enumerate(rows):
            for i, v in row.items():
                if 0 <= v < 2**64:
                    vals[r, i], present[r, i] = v, True
        res = self.update(self.block(self.rows(keys, keys)), vals, present, ts, np.zeros((len(keys), 1), np.int64))
        return [({i: (int(vals[r, i]), int(res.delta[r, i]), int(res.status[r, i]))
                  for i in range(self.width) if present[r, i] and res.kept[r, i]}, int(res.interval_ns[r]))
                for r in range(len(keys))]
