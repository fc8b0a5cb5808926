"""The test oracle of the collector's delta rule: ``DeltaTracker``, one counter at a time, in plain Python ints.

Production runs the rule on arrays (``flowtracer.collectors.gnmi.counters.column_deltas``, whose
docstring states the rule) and, where the extension is built, compiled (``native.encode_grid``).
This per-counter form is the rule written the obvious way, kept only so tests can check both
against it on random sequences (as the host agent keeps its reference pipeline). Timestamps are
ns since the epoch; values in the counter's unit (bytes or packets).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE, GAP, OK, RESET, WRAPPED


class _Row:
    """Last sample of each counter of one object (value, timestamp ns, last-clear ns), and what
    the object is (``ident``). Timestamp 0 = never sampled."""

    __slots__ = ("clear", "ident", "ts", "values")

    def __init__(self, n: int, ident: Hashable) -> None:
        self.values = [0] * n
        self.ts = [0] * n
        self.clear = [0] * n
        self.ident = ident


@dataclass(frozen=True, slots=True)
class Delta:
    """One counter's result. ``delta`` in the counter's unit (bytes or packets);
    ``interval_ns`` = this timestamp minus the previous sample's (0 for BASELINE/RESET)."""

    value: int
    delta: int
    status: int
    interval_ns: int


class DeltaTracker:
    """Per-counter state of one session. Keys are any hashable (switch-local counter identity).

    Args:
        counter_bits: 64, or 32 for devices whose counters wrap at 2^32.
        expected_interval_ns: the sample interval; 0 disables GAP detection (ON_CHANGE).
        gap_factor: an interval longer than this many expected intervals is a GAP.
    """

    def __init__(self, counter_bits: int = 64, expected_interval_ns: int = 0, gap_factor: float = 1.5) -> None:
        if counter_bits not in (32, 64):
            raise ValueError(f"counter_bits must be 32 or 64, not {counter_bits}")
        self.counter_bits = counter_bits
        self.expected_interval_ns = expected_interval_ns
        self.gap_factor = gap_factor
        self._gap_ns = int(expected_interval_ns * gap_factor) if expected_interval_ns > 0 else 0
        self._rows: dict[Hashable, _Row] = {}
        #: Samples dropped because their timestamp equalled the counter's last one.
        self.duplicates = 0
        #: Samples dropped because their timestamp was older than the counter's last one.
        self.out_of_order = 0

    def clear(self) -> None:
        """Forget every counter: the next sample of each is a BASELINE (new session)."""
        self._rows.clear()

    def forget(self, key: Hashable) -> None:
        """Forget one object's counters."""
        self._rows.pop(key, None)

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def gap_ns(self) -> int:
        """An interval longer than this (ns) is a GAP; 0 = no GAP detection."""
        return self._gap_ns

    def update(self, key: Hashable, value: int, timestamp_ns: int, last_clear_ns: int = 0,
               ident: Hashable = None, max_rate: float = 0.0) -> Delta | None:
        """Account one sample; None when it is a duplicate or out of order (dropped, counted).

        ``last_clear_ns``: the device's last-clear time for this counter (ns), 0 if unknown. A
        clear counts only when it moved to after the previous sample: a clear reported late
        (after the sample that already showed the drop) does not reset twice.
        ``ident``: what the counter belongs to (e.g. next-hop index); a change means new counter.
        ``max_rate``: the largest possible increase per ns (e.g. line rate / 8e9 for bytes);
        0 = unknown. Only used to refuse an implausible 32-bit wrap.
        """
        res, _ = self.update_row(key, (value,), timestamp_ns, last_clear_ns, ident, (max_rate,))
        if not res:
            return None
        _, v, d, status, interval = res[0]
        return Delta(v, d, status, interval)

    def update_row(self, key: Hashable, values: Sequence[int | None], timestamp_ns: int, last_clear_ns: int = 0,
                   ident: Hashable = None, max_rates: Sequence[float] = ()
                   ) -> tuple[list[tuple[int, int, int, int, int]], int]:
        """Account the counters of one object sampled together (e.g. an interface's ten), in one
        dictionary lookup. ``values[i]`` None = not in this sample. ``max_rates[i]``: see update.

        Returns ([(i, value, delta, status, interval_ns)] for the counters not dropped, the
        longest interval_ns among them).
        """
        row = self._rows.get(key)
        if row is None or row.ident != ident:  # first sight, or a new object under this key
            row = self._rows[key] = _Row(len(values), ident)
        rv, rt, rc = row.values, row.ts, row.clear
        gap, ts, clear = self._gap_ns, timestamp_ns, last_clear_ns
        out: list[tuple[int, int, int, int, int]] = []
        longest = 0
        for i, v in enumerate(values):
            if v is None:
                continue
            pt = rt[i]
            if pt == 0:
                rv[i], rt[i], rc[i] = v, ts, clear
                out.append((i, v, 0, BASELINE, 0))
                continue
            if ts <= pt:
                if ts == pt:
                    self.duplicates += 1
                else:
                    self.out_of_order += 1
                continue
            pv, pc = rv[i], rc[i]
            rv[i], rt[i], rc[i] = v, ts, clear
            iv = ts - pt
            if clear != pc and clear > pt:  # cleared since the previous sample: increase unknown
                out.append((i, v, 0, RESET, 0))
                continue
            if v < pv:
                if self.counter_bits == 32 and pv < 2**32:
                    d = v + 2**32 - pv
                    mr = max_rates[i] if i < len(max_rates) else 0.0
                    if mr <= 0 or d <= mr * iv:
                        out.append((i, v, d, WRAPPED, iv))
                        longest = max(longest, iv)
                        continue
                out.append((i, v, 0, RESET, 0))
                continue
            out.append((i, v, v - pv, GAP if gap and iv > gap else OK, iv))
            if iv > longest:
                longest = iv
        return out, longest


def naive_delta(prev: int, cur: int, unsigned_bits: int = 64) -> int:
    """What gnmic's / Telegraf's consumers compute (``cur - prev``, unsigned arithmetic in the
    store): kept only so tests can show where it is wrong."""
    return (cur - prev) % (2**unsigned_bits)
