"""Per-ECMP-group state of the ``infer`` resolver: the current assignment of flows to members, how it
follows the evidence, and the confidence of each flow's placement.

The evidence history it extends is in ``history.py``, the change tests (one regime or two) in
``regimes.py``, the numerical solving in ``solver.py``, the pair routing in ``routes.py``; the
resolver that routes a window's flows to their groups is ``resolver.py``. Imports run one way:
resolver -> group -> history, regimes, solver.

Why one class over 400 lines: ``GroupState`` is one state machine (flow columns, the assignment, the
suspicion/cold-check/cut cycle, the confidences and their serialized form) whose fields every step
reads and writes together; cutting it further would spread one invariant (columns, assignment and
confidences stay aligned) over several modules.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from flowtracer.stream.resolvers.contract import Placement
from flowtracer.stream.resolvers.infer.config import InferConfig
from flowtracer.stream.resolvers.infer.history import EvidenceHistory, array_from_json, array_to_json
from flowtracer.stream.resolvers.infer.regimes import regime_change, row_contradicts, sigma2, stale_prefix, two_regimes
from flowtracer.stream.resolvers.infer.routes import PairRoutes
from flowtracer.stream.resolvers.infer.solver import (
    Fit,
    cold_solve,
    evaluate,
    insert_flows,
    interchangeable_classes,
    local_search,
    member_posterior,
    move_costs,
)

FlowKey = tuple[str, str, int, int, int]  # src_ip, dst_ip, udp_src_port, udp_dst_port, rqpn


STATE_VERSION = 1



class GroupState(EvidenceHistory):
    """History, assignment and confidences of the flows entering one ECMP group.

    Columns are flows (a column is reused once its flow has been gone for a whole history); rows
    are evidence windows in a ring of ``history_windows``. ``row_seq`` numbers the rows; -1 marks
    an empty or forgotten row.
    """

    def __init__(self, gid: str, members: tuple[str, ...], cfg: InferConfig) -> None:
        super().__init__(len(members), cfg)
        self.gid = gid
        self.members = members
        m = len(members)
        self.calls = 0  # resolve calls that carried flows of this group
        self.last_window_ns = -1
        self.suspect = 0  # consecutive contradicting windows
        self.suspect_seq = -1  # row number of the first of them
        self.reinfers = 0
        self.last_change_ns = -1
        self.last_cold_seq = -(10**9)
        self.cold_interval = 1
        self.settled = False
        self.reclaimed = False  # columns were freed since the last update
        self.last_refresh_seq = -(10**9)
        self.doubt = np.ones(m)  # per member: recent share of windows it mispredicted (see _track_doubt)
        # per column
        self.col_flow: list[str | None] = []
        self.col_key: list[FlowKey | None] = []
        self.col_of: dict[str, int] = {}
        self.free: list[int] = []
        self.in_use = np.zeros(0, dtype=bool)
        self.assign = np.zeros(0, dtype=np.int64)  # member index, -1 = not yet placed
        self.sticky = np.zeros(0)  # confidence reached once, kept until a change
        self.support = np.zeros(0)  # relaxation/cold-solve support factor, 0..1
        self.label = np.zeros(0, dtype=np.int64)  # interchangeable class (a representative column)
        self.seen_call = np.zeros(0, dtype=np.int64)
        self.remembered: OrderedDict[str, tuple[FlowKey, int]] = OrderedDict()
        # outputs of the last update, per column
        self.best = np.zeros(0, dtype=np.int64)
        self.conf = np.zeros(0)
        self.split: dict[int, tuple[float, ...]] = {}  # member weights of interchangeable flows
        # caches, not state: the pair and the placement built for each column
        self.col_pair: list[PairRoutes | None] = []
        self.placed: list[Placement | None] = []
        self._shown = np.zeros(0)  # conf (rounded) and best the cached placements were built with
        self._shown_best = np.zeros(0, dtype=np.int64)

    @property
    def m(self) -> int:
        return len(self.members)

    # -- columns ---------------------------------------------------------------------------------

    def _grow(self) -> None:
        old = self.x.shape[1]
        add = max(16, old)
        self.x = np.hstack([self.x, np.zeros((self.x.shape[0], add))])
        self.col_flow += [None] * add
        self.col_key += [None] * add
        self.in_use = np.concatenate([self.in_use, np.zeros(add, dtype=bool)])
        self.assign = np.concatenate([self.assign, np.full(add, -1, dtype=np.int64)])
        self.sticky = np.concatenate([self.sticky, np.zeros(add)])
        self.support = np.concatenate([self.support, np.ones(add)])
        self.label = np.concatenate([self.label, np.arange(old, old + add, dtype=np.int64)])
        self.seen_call = np.concatenate([self.seen_call, np.zeros(add, dtype=np.int64)])
        self.best = np.concatenate([self.best, np.full(add, -1, dtype=np.int64)])
        self.conf = np.concatenate([self.conf, np.zeros(add)])
        self.col_pair += [None] * add
        self.placed += [None] * add
        self._shown = np.concatenate([self._shown, np.zeros(add)])
        self._shown_best = np.concatenate([self._shown_best, np.full(add, -1, dtype=np.int64)])
        self.free.extend(range(old + add - 1, old - 1, -1))

    def column(self, flow_id: str, key: FlowKey) -> int:
        """The column of a flow; a new one if unseen or if its 5-tuple changed (it may hash elsewhere)."""
        col = self.col_of.get(flow_id)
        if col is not None:
            if self.col_key[col] == key:
                return col
            # Retire the old column: its bytes stay explained by the old member until they age out.
            self.col_flow[col] = None
            del self.col_of[flow_id]
        if not self.free:
            self._grow()
        col = self.free.pop()
        self.col_flow[col] = flow_id
        self.col_key[col] = key
        self.col_of[flow_id] = col
        self.in_use[col] = True
        self.x[:, col] = 0.0
        self.sticky[col] = 0.0
        self.support[col] = 1.0
        self.label[col] = col
        self.best[col] = -1
        self.conf[col] = 0.0
        self.split.pop(col, None)
        self.placed[col] = None
        old = self.remembered.pop(flow_id, None)
        # A flow that comes back with the same 5-tuple most likely hashes where it did: start there.
        self.assign[col] = old[1] if old is not None and old[0] == key and old[1] < self.m else -1
        return col

    def _reclaim(self) -> bool:
        """Free the columns of flows absent for a whole history and with no bytes left in it."""
        evidence = (self.x[self.row_seq >= 0] > 0).any(axis=0)
        gone = self.in_use & ~evidence & (self.calls - self.seen_call > self.cfg.history_windows)
        for col in np.flatnonzero(gone).tolist():
            fid, key = self.col_flow[col], self.col_key[col]
            if fid is not None:
                if self.assign[col] >= 0 and key is not None:
                    self.remembered[fid] = (key, int(self.assign[col]))
                    while len(self.remembered) > self.cfg.remember_flows:
                        self.remembered.popitem(last=False)
                del self.col_of[fid]
            self.col_flow[col] = None
            self.col_key[col] = None
            self.in_use[col] = False
            self.assign[col] = -1
            self.best[col] = -1
            self.x[:, col] = 0.0
            self.split.pop(col, None)
            self.placed[col] = None
            self.col_pair[col] = None
            self.free.append(col)
        return bool(gone.any())

    # -- evidence --------------------------------------------------------------------------------

    def update(self, window_end_ns: int, reclaimed: bool, budget: list[int]) -> None:
        """Fit the assignment to the history after a new row; detect contradictions; set outputs.

        ``reclaimed``: columns were freed since the last update (flow classes must be recomputed).
        ``budget``: routine cold checks (of groups past learning) this call may still make; one is
        taken from it per check, so groups that settled together do not all check in one window.
        """
        cfg = self.cfg
        rows, cols, x, y, mask = self.data()
        a = self.assign[cols].copy()
        new = np.flatnonzero(a < 0)
        if new.size:
            a = insert_flows(x, y, mask, a, new)
            # Many new bytes (a job started): look at the group from scratch again soon.
            if float(x[-1, new].sum()) >= 0.05 * float(x[-1].sum()):
                self.cold_interval = 1
        fit = evaluate(x, y, mask, a)
        predicted = fit.r[-1].copy()  # the newest window as the assignment predicted it, unseen
        # Judge the newest window against the assignment made before it arrived: fitting it first
        # would let a compromise between old and new regime hide the change.
        bad = row_contradicts(self.cfg, fit, y, mask, len(rows) - 1)
        # Swaps cost a flows x flows product: only when the newest window does not fit.
        fit, _ = local_search(x, y, mask, fit, cfg.move_margin * sigma2(self.cfg, y, mask, fit), swaps=bad)
        self._track_doubt(predicted, fit, y, mask)
        vanished = self._member_vanished(rows)
        if bad or vanished:
            if self.suspect == 0:
                self.suspect_seq = int(self.row_seq[rows[-1]])
            # A counter that disappears (interface down?) is checked at once, not after confirmation.
            self.suspect = max(self.suspect + 1, cfg.confirm_windows if vanished else 0)
        else:
            self.suspect = 0
        changed = False
        if self.suspect >= cfg.confirm_windows:
            fit, changed = self._contradicted(window_end_ns, rows, cols, x, y, mask, fit)
        elif self.suspect == 0 and (stale := stale_prefix(self.cfg, x, y, mask, fit)):
            # The assignment has already followed a change; the windows before it now contradict it.
            fit, changed = self._cut(window_end_ns, int(self.row_seq[rows[stale]]), cols, fit), True
        elif self._cold_due() and len(rows) >= cfg.min_rows and (self.cold_interval <= 2 or budget[0] > 0):
            # (With fewer windows than min_rows a solve from scratch proves nothing yet.)
            budget[0] -= self.cold_interval > 2
            fit = self._cold_check(x, y, mask, fit, cols)
            if k := regime_change(self.cfg, x, y, mask, fit):
                fit, changed = self._cut(window_end_ns, int(self.row_seq[rows[k]]), cols, fit), True
        if changed:
            rows, cols, x, y, mask = self.data()
        moved = fit.a != self.assign[cols]
        self.sticky[cols[moved]] = 0.0
        self.assign[cols] = fit.a
        refresh = changed or reclaimed or bool(new.size) or bool(moved.any())
        self._outputs(x, y, mask, fit, cols, rows, refresh)

    def _cold_due(self) -> bool:
        """Time for a cold check; groups that settled together spread theirs over the interval."""
        spread = zlib.crc32(self.gid.encode()) % max(1, self.cold_interval // 2)
        return self.seq - self.last_cold_seq >= self.cold_interval + spread

    def _contradicted(self, window_end_ns: int, rows: np.ndarray, cols: np.ndarray, x: np.ndarray,
                      y: np.ndarray, mask: np.ndarray, fit: Fit) -> tuple[Fit, bool]:
        """The newest windows keep contradicting the assignment: learning error, or a fabric change?

        Re-solve from scratch; then, with the first contradicting window as the change point, keep
        two regimes if they explain the history clearly better than one (see ``_two_regimes``):
        forget the windows before the change and re-solve the group on the rest. Returns the fit
        and whether the history was cut.
        """
        cfg = self.cfg
        self.suspect = 0
        self.cold_interval = 1
        if len(rows) < cfg.min_rows:
            return fit, False  # still learning: nothing to forget, too little to solve from scratch
        first = int(np.searchsorted(self.row_seq[rows], self.suspect_seq))
        cold, z = cold_solve(x, y, mask, cfg)
        self.last_cold_seq = self.seq
        single = cold if cold.sse < fit.sse else fit
        if first > 0:
            change, single = two_regimes(self.cfg, x, y, mask, first, single)
            if change:
                return self._cut(window_end_ns, self.suspect_seq, cols, single), True
        self._set_support(cols, single, cold, z, y, mask)
        return single, False

    def _cut(self, window_end_ns: int, from_seq: int, cols: np.ndarray, fit: Fit) -> Fit:
        """Forget the windows before row ``from_seq`` and re-solve the group on the rest."""
        cfg = self.cfg
        # Keep the members the flows had, for those whose bytes are all in the forgotten windows.
        self.assign[cols] = fit.a
        self.row_seq[(self.row_seq >= 0) & (self.row_seq < from_seq)] = -1
        self.reinfers += 1
        self.last_change_ns = window_end_ns
        self.suspect = 0
        self.sticky[:] = 0.0
        self.doubt[:] = 1.0
        self.cold_interval = 1
        self.last_cold_seq = self.seq
        _, cols, x, y, mask = self.data()
        warm_a = self.assign[cols].copy()
        if (warm_a < 0).any():
            warm_a = insert_flows(x, y, mask, warm_a, np.flatnonzero(warm_a < 0))
        # Warm first: a shrunk group (resilient hashing) moves only the flows of the lost member.
        warm, _ = local_search(x, y, mask, warm_a, 1e-15, swaps=True)
        cold, z = cold_solve(x, y, mask, cfg)
        best = cold if cold.sse < warm.sse - cfg.move_margin * sigma2(self.cfg, y, mask, warm) else warm
        self._set_support(cols, best, cold, z, y, mask)
        return best

    def _cold_check(self, x: np.ndarray, y: np.ndarray, mask: np.ndarray, fit: Fit, cols: np.ndarray) -> Fit:
        """Solve from scratch; adopt it if it fits clearly better, else back off the next check."""
        cfg = self.cfg
        self.last_cold_seq = self.seq
        cold, z = cold_solve(x, y, mask, cfg)
        if cold.sse < fit.sse - cfg.move_margin * sigma2(self.cfg, y, mask, fit):
            self.cold_interval = 2
            fit = cold
        else:
            self.cold_interval = min(2 * self.cold_interval, cfg.cold_interval_max)
        self._set_support(cols, fit, cold, z, y, mask)
        return fit

    def _set_support(self, cols: np.ndarray, fit: Fit, cold: Fit, z: np.ndarray, y: np.ndarray,
                     mask: np.ndarray) -> None:
        """Support of each flow's member from the cold solve.

        The convex relaxation spreads a flow over every member the evidence cannot rule out, so its
        weight on the chosen member (full support from 0.5 up) measures identifiability beyond one
        flow at a time; where an independent solve of equal fit puts the flow elsewhere, halve it
        and forget that the flow was pinned.
        """
        idx = np.arange(cols.size)
        sup = np.minimum(1.0, 2.0 * z[idx, fit.a])
        if cold is not fit and cold.sse <= fit.sse + self.cfg.move_margin * sigma2(self.cfg, y, mask, fit):
            elsewhere = cold.a != fit.a
            sup = np.where(elsewhere, 0.5 * sup, sup)
            self.sticky[cols[elsewhere]] = 0.0  # what pinned the flow is in doubt now
        self.support[cols] = sup

    def _track_doubt(self, predicted: np.ndarray, fit: Fit, y: np.ndarray, mask: np.ndarray) -> None:
        """Out-of-sample check per member: did the assignment predict the newest window's counter?

        A member mispredicts when its residual before the window was fitted exceeds
        ``mispredict_factor`` x its usual in-sample residual (median over the history), or the
        noise floor. A miss halves the trust in the member's flows (``doubt`` = 1 - trust); each
        window predicted well forgives ``doubt_decay`` of the doubt. Doubt starts at 1: an
        assignment earns trust by predicting windows it has not seen, which an overfitted one
        cannot do.
        """
        cfg = self.cfg
        seen = mask[-1] > 0
        usual = np.median(fit.r[:-1] ** 2, axis=0) if fit.r.shape[0] > 3 else np.zeros(self.m)
        m_obs = max(float(mask[-1].sum()), 1.0)
        floor = (cfg.noise_floor * float((y[-1] * mask[-1]).sum()) / m_obs) ** 2
        miss = predicted**2 > cfg.mispredict_factor * np.maximum(usual, floor)
        doubt = np.where(miss, 1.0 - 0.5 * (1.0 - self.doubt), cfg.doubt_decay * self.doubt)
        self.doubt = np.where(seen, doubt, self.doubt)

    def _member_vanished(self, rows: np.ndarray) -> bool:
        """A member whose counter was present in the previous evidence window is missing now."""
        if rows.size < 2:
            return False
        prev, now = self.mask[rows[-2]], self.mask[rows[-1]]
        return bool(now.any() and np.any((prev > 0) & (now == 0)))

    def _outputs(self, x: np.ndarray, y: np.ndarray, mask: np.ndarray, fit: Fit, cols: np.ndarray,
                 rows: np.ndarray, refresh: bool) -> None:
        """Per column: member, split weights (interchangeable flows) and confidence, from the fit."""
        cfg = self.cfg
        s2 = sigma2(self.cfg, y, mask, fit)
        est = self.sticky[cols] >= cfg.establish_confidence
        if refresh or self.seq - self.last_refresh_seq >= cfg.refresh_every:
            self.last_refresh_seq = self.seq
            lab = cols.copy()
            loose = np.flatnonzero(~est)
            if loose.size:
                # Swapping two flows costs ~2 |x_i - x_k|^2: within 2 sigma^2 the evidence cannot order them.
                lab[loose] = cols[loose[interchangeable_classes(x[:, loose], 2.0 * s2)]]
            self.label[cols] = lab
        old_split = self.split
        self.split = {}
        labels = np.where(est, -1 - np.arange(cols.size), self.label[cols])
        _, inv, counts = np.unique(labels, return_inverse=True, return_counts=True)
        per_class = np.zeros((counts.size, self.m))  # how many of each class sit on each member
        np.add.at(per_class, (inv, fit.a), 1.0)
        per_class /= counts[:, None]
        spread = np.count_nonzero(per_class, axis=1) > 1  # classes whose flows sit on several members
        wmax = np.where(spread, per_class.max(axis=1), 1.0)[inv]
        weights = {int(u): tuple(per_class[u].tolist()) for u in np.flatnonzero(spread)}
        for i in np.flatnonzero(spread[inv]).tolist():
            self.split[int(cols[i])] = weights[int(inv[i])]
        split = wmax < 1.0
        post = member_posterior(move_costs(fit), s2)
        depth = np.minimum(1.0, (x > 0).sum(axis=0) / cfg.min_rows)
        # For interchangeable flows the class share is the measure of ambiguity; the relaxation and
        # the cold solve only restate it (they spread or swap exactly those flows).
        base = post * np.where(split, 1.0, self.support[cols]) * depth * (1.0 - self.doubt[fit.a])
        conf = base * wmax
        newly = (conf >= cfg.establish_confidence) & ~est
        self.sticky[cols[newly]] = conf[newly]
        self.best[:] = self.assign
        # Flows without bytes in the history keep their member, with what confidence they had earned,
        # as long as their member's counter keeps agreeing with the assignment.
        kept = self.sticky * (1.0 - self.doubt[np.maximum(self.assign, 0)])
        self.conf[:] = kept
        self.conf[cols] = np.maximum(conf, kept[cols])
        self.settled = bool(rows.size >= cfg.min_rows
                            and (base.size == 0 or float(np.min(base)) >= cfg.settle_confidence))
        self.conf = np.round(self.conf, 2)  # placements are cached per column while this holds
        changed = np.flatnonzero((self.conf != self._shown) | (self.best != self._shown_best)).tolist()
        changed += [c for c in old_split.keys() | self.split.keys() if old_split.get(c) != self.split.get(c)]
        for c in changed:
            self.placed[c] = None
        self._shown = self.conf.copy()
        self._shown_best = self.best.copy()

    # -- state -----------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "members": list(self.members),
            "scalars": {k: getattr(self, k) for k in (
                "seq", "calls", "last_window_ns", "suspect", "suspect_seq", "reinfers", "last_change_ns",
                "last_cold_seq", "cold_interval", "settled", "reclaimed", "last_refresh_seq")},
            "col_flow": self.col_flow,
            "col_key": [list(k) if k is not None else None for k in self.col_key],
            "free": self.free,
            "remembered": [[f, list(k), mbr] for f, (k, mbr) in self.remembered.items()],
            "split": [[c, list(w)] for c, w in self.split.items()],
            "arrays": {k: array_to_json(getattr(self, k)) for k in (
                "x", "y", "mask", "row_seq", "assign", "sticky", "support", "label", "seen_call", "in_use", "best",
                "conf", "doubt")},
        }

    @classmethod
    def from_state(cls, gid: str, st: Mapping[str, Any], cfg: InferConfig) -> GroupState:
        g = cls(gid, tuple(st["members"]), cfg)
        for k, v in st["scalars"].items():
            setattr(g, k, v)
        for k, v in st["arrays"].items():
            setattr(g, k, array_from_json(v))
        g.col_flow = list(st["col_flow"])
        g.col_key = [tuple(k) if k is not None else None for k in st["col_key"]]  # type: ignore[misc]
        g.col_of = {f: i for i, f in enumerate(g.col_flow) if f is not None}
        g.free = list(st["free"])
        g.remembered = OrderedDict((f, (tuple(k), int(mbr))) for f, k, mbr in st["remembered"])  # type: ignore[misc]
        g.split = {int(c): tuple(float(v) for v in w) for c, w in st["split"]}
        ncols = g.x.shape[1]
        g.col_pair = [None] * ncols
        g.placed = [None] * ncols
        g._shown = g.conf.copy()
        g._shown_best = g.best.copy()
        return g


# -- the resolver ------------------------------------------------------------------------------
