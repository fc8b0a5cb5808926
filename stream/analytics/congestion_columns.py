"""Window sums and validity of counter groups over many rows at once (numpy): the switches' congestion rows.

A switch's CongestionBatch holds one row per egress queue and per PFC priority of every port (about 135,000 rows
per window for 80 switches), so the per-row tally of :class:`~flowtracer.stream.analytics.congestion.Tally` is too
slow there. :class:`Rows` collects the raw cells as columns and :meth:`Rows.totals` applies the same group rule
per group id: a group is valid only when something of it was reported (a row with a present cell) and every
reported row has all its cells present and trusted by the window rule (:mod:`window_delta`: status and interval,
both applied from there); its sums are the trusted deltas over all rows and over the RoCE-priority rows alone.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from flowtracer.stream.analytics.window_delta import TRUSTED_STATUSES, interval_fits

_TRUSTED = np.array(sorted(TRUSTED_STATUSES), dtype=np.int64)


class Rows:
    """Rows of one group of ``counters`` counters, added one at a time, tallied per group id at once."""

    def __init__(self, counters: int) -> None:
        self.counters = counters
        # (group id, RoCE 0/1, interval ns, then per counter: present 0/1, status); the deltas apart (uint64).
        self.meta: list[tuple[int, ...]] = []
        self.deltas: list[tuple[int, ...]] = []

    def add(self, meta: tuple[int, ...], deltas: tuple[int, ...]) -> None:
        """One row: ``meta`` = (group, roce, interval_ns, present_0, status_0, ...), ``deltas`` its cells' deltas."""
        self.meta.append(meta)
        self.deltas.append(deltas)

    def totals(self, groups: int, hop_ns: int) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint64]]:
        """Per group id in ``range(groups)``: (valid, sums); sums[g, 2*i] is counter i over all rows, 2*i+1 over
        the RoCE rows (counts, as the cells), zero where the group is not valid (unknown, never a partial sum)."""
        k = self.counters
        sums = np.zeros((groups, 2 * k), dtype=np.uint64)
        if not self.meta:
            return np.zeros(groups, dtype=bool), sums
        meta = np.array(self.meta, dtype=np.int64).reshape(len(self.meta), 3 + 2 * k)
        deltas = np.array(self.deltas, dtype=np.uint64).reshape(len(self.deltas), k)
        gid, roce, interval = meta[:, 0], meta[:, 1].astype(bool), meta[:, 2]
        present = meta[:, 3::2].astype(bool)
        intervals, where = np.unique(interval, return_inverse=True)
        fits = np.array([interval_fits(int(i), hop_ns) for i in intervals], dtype=bool)[where.reshape(-1)]
        trusted = present & np.isin(meta[:, 4::2], _TRUSTED) & fits[:, None]
        seen = present.any(axis=1)
        bad = seen & ~trusted.all(axis=1)
        valid = (np.bincount(gid[seen], minlength=groups) > 0) & (np.bincount(gid[bad], minlength=groups) == 0)
        for i in range(k):
            rows = trusted[:, i]
            np.add.at(sums[:, 2 * i], gid[rows], deltas[rows, i])
            rows = rows & roce
            np.add.at(sums[:, 2 * i + 1], gid[rows], deltas[rows, i])
        sums[~valid] = 0
        return valid, sums
