"""Window sums and validity of counter groups over many rows at once (numpy): the switches' congestion rows.

A switch's CongestionBatch holds one row per egress queue and per PFC priority of every port (about 37,000 rows,
135,000 per-row tallies per window for 80 switches), so the per-row tally of
:class:`~flowtracer.stream.analytics.congestion.Tally` is too slow there. :class:`Rows` collects the raw cells as
columns and :meth:`Rows.totals` applies the same group rule per group id and counter group (a part of the
columns: a queue row carries the ECN and the drop group): a group is valid only when something of it was reported
(a row with a present cell) and every reported row has all the group's cells present and trusted by the window
rule (:mod:`window_delta`: status and interval, both applied from there); its sums are the trusted deltas over all
rows and over the RoCE-priority rows alone. Sums are uint64 like the record's fields: one beyond 2^64 would wrap
here where the per-row version fails to build the record (no real counter gets near it in one window).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from flowtracer.stream.analytics.window_delta import TRUSTED_STATUSES, interval_fits

_TRUSTED = np.array(sorted(TRUSTED_STATUSES), dtype=np.int64)


class Rows:
    """Rows of ``counters`` counter cells, added one at a time, tallied per group id and part at once.

    A row is ``meta`` (group id, RoCE 0/1, interval ns, then per counter: present 0/1, status) and ``deltas``
    (per counter its delta; 0 for an absent cell), extended onto the two flat lists in step.
    """

    def __init__(self, counters: int) -> None:
        self.counters = counters
        # Flat, a row after the other; the deltas apart: uint64 counts, the rest int64 (an interval may be
        # negative garbage).
        self.meta: list[int] = []
        self.deltas: list[int] = []

    def totals(self, groups: int, hop_ns: int,
               parts: Sequence[Sequence[int]]) -> list[tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint64]]]:
        """Per part (a group of counters, by column) and group id in ``range(groups)``: (valid, sums); sums[g, 2*j]
        is the part's counter j over all rows, 2*j+1 over the RoCE rows (counts, as the cells), zero where the
        group is not valid (unknown, never a partial sum)."""
        k = self.counters
        if not self.meta:
            return [(np.zeros(groups, dtype=bool), np.zeros((groups, 2 * len(cols)), dtype=np.uint64))
                    for cols in parts]
        meta = np.array(self.meta, dtype=np.int64).reshape(-1, 3 + 2 * k)
        deltas = np.array(self.deltas, dtype=np.uint64).reshape(-1, k)
        gid, roce, interval = meta[:, 0], meta[:, 1].astype(bool), meta[:, 2]
        intervals, where = np.unique(interval, return_inverse=True)
        fits = np.array([interval_fits(int(i), hop_ns) for i in intervals], dtype=bool)[where.reshape(-1)]
        present = meta[:, 3::2].astype(bool)
        trusted = present & np.isin(meta[:, 4::2], _TRUSTED) & fits[:, None]
        out = []
        for cols in parts:
            c = list(cols)
            seen = present[:, c].any(axis=1)
            bad = seen & ~trusted[:, c].all(axis=1)
            valid = (np.bincount(gid[seen], minlength=groups) > 0) & (np.bincount(gid[bad], minlength=groups) == 0)
            sums = np.zeros((groups, 2 * len(c)), dtype=np.uint64)
            for j, i in enumerate(c):
                rows = trusted[:, i]
                np.add.at(sums[:, 2 * j], gid[rows], deltas[rows, i])
                rows = rows & roce
                np.add.at(sums[:, 2 * j + 1], gid[rows], deltas[rows, i])
            sums[~valid] = 0
            out.append((valid, sums))
        return out
