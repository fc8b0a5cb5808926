"""Per-window QP and port deltas: QP generations, 24-bit PSN wrap, counter resets.

Pure bookkeeping between two samples of one host. ``QpTracker.update_columns`` takes the QPs and per-QP
counters of a sample and returns, for every RC/UC QP, the bytes and packets it moved since the
previous sample and where that number came from:

* ``QP_COUNTER``: a counter bound to this QP alone with the Linux >= 6.15 optional byte counters
  (``rdma_tx_bytes`` ...): exact, ``error_bound`` 0;
* ``PSN_ESTIMATE``: send-PSN delta (mod 2^24) x (path MTU + ``frame_overhead`` bytes), i.e. every
  packet counted as a full RoCEv2 frame, the same unit as the port and switch counters. Every
  packet carries at most one MTU of payload, so this overcounts by the unused part of partial
  packets (one per message at least; a 64-byte NCCL clear-to-send write is almost all unused).
  ``psn_bounds.psn_bounds`` bounds that error per QP from the port's exact sysfs totals (see there).

A QP is identified by (device, port, lqpn) *and* its peer QP, owner pid and bound counter: when
any of these changes, or the QP was missing from the previous sample, it is a new generation
(``generation`` = ns of the sample that first saw it) and never inherits the old counters.
Loopback / flush QPs (lqpn == rqpn) and QPs without a peer (UD, GSI, ...) are not flows.

The PSN estimate is exact only while a QP sends fewer than 2^24 packets per window (at 400 Gbit/s
and MTU 4096 that is 1.37 s); longer intervals alias.

The tracker keeps its QPs as columns (numpy arrays, one row per live QP generation) and does the
window arithmetic on whole columns (10k QPs per window on a big host): ``update_columns`` returns a
``QpWindow`` of columns. Integers stay exact: a column
whose values do not fit int64 (a 64-bit counter past 2^63) is kept as Python ints (object dtype).
A sample that lists one QP twice (never seen from iproute2) is processed record by record, in order.
"""

from __future__ import annotations

import numpy as np

from flowtracer.collectors.agent.int_columns import int_column, put_widening
from flowtracer.collectors.agent.qp_rows import (
    PSN_ESTIMATE,
    QP_COUNTER,
    PortKey,
    QpDelta,
    QpKey,
    QpRows,
    QpState,
    QpWindow,
    sample_arrays,
)
from flowtracer.collectors.agent.sources.rdma_json import QPN_MASK, QpBytes, QpColumns, QpCounterColumns

_I64 = np.int64


class QpTracker:
    """QP generations and deltas of one host between consecutive samples.

    ``initial_psn`` is the PSN every QP starts with, when the deployment knows one, to count the
    first window of a QP created after the previous sample; None (default: verbs picks random
    initial PSNs) makes that window a baseline unless an exact counter covers it.
    ``frame_overhead``: bytes of headers per packet the estimate adds to the MTU (RoCEv2 over
    IPv4: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 = 62).
    """

    def __init__(self, *, default_mtu: int = 4096, frame_overhead: int = 62, initial_psn: int | None = None) -> None:
        self.default_mtu = default_mtu
        self.frame_overhead = frame_overhead
        self.initial_psn = initial_psn
        self.rows = QpRows.empty()
        #: (device, port) of each port id (``QpRows.gid``); ids are never reused
        self.port_keys: list[PortKey] = []
        self._port_ids: dict[PortKey, int] = {}
        self._row_keys = np.zeros(0, _I64)  # (port id << 32 | lqpn) of each of ``rows``
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None  # (sorted keys, their rows) of ``rows``
        self._cntns: tuple[np.ndarray, np.ndarray] = (np.zeros(0, _I64), np.zeros(0, _I64))  # (gid, cntn) seen
        self._primed = False

    # -- the columnar update ------------------------------------------------------------------

    def port_id(self, key: PortKey) -> int:
        """The tracker's id of a (device, port) (allocated on first use)."""
        g = self._port_ids.get(key)
        if g is None:
            g = self._port_ids[key] = len(self.port_keys)
            self.port_keys.append(key)
        return g

    def update_columns(self, qps: QpColumns, counters: dict[QpKey, QpBytes] | QpCounterColumns | None,
                       now_ns: int, mtu: dict[PortKey, int] | None = None) -> QpWindow:
        """Advance to a new sample; return the deltas of every flow QP since the previous one, as columns.

        ``counters`` are the per-QP counters of this sample (``rdma_json.per_qp_counters`` or
        ``per_qp_counter_columns``), None when ``rdma statistic`` is not available. ``mtu`` gives the path MTU
        (bytes) per (device, port); missing ports use ``default_mtu``. The first call only records baselines.
        """
        s = sample_arrays(qps)
        pair_gid = np.array([self.port_id(p) for p in s.pairs], _I64).reshape(len(s.pairs))
        rows = np.flatnonzero(s.peer_rows() & (s.port != 0))
        n = len(rows)
        gid = pair_gid[s.pair_of[rows]] if n else np.zeros(0, _I64)
        lqpn = s.lqpn[rows]
        if lqpn.dtype == object or (n and (int(lqpn.min()) < 0 or int(lqpn.max()) >> 32)):
            raise ValueError("QP numbers must be 0 <= lqpn < 2^32")
        key = (gid << 32) | lqpn
        ctr_has, cntn, vals = self._counters(counters, key, n)
        prev = self._sorted
        aligned = prev is not None and len(self.rows) == n and np.array_equal(self._row_keys, key)
        if aligned:  # the same QPs as in the previous sample, in the same order (the usual case)
            skey, order = prev  # type: ignore[misc]
        else:
            order = np.argsort(key, kind="stable")
            skey = key[order]
        new = QpRows(gid=gid, lqpn=lqpn, rqpn=s.rqpn[rows], pid=s.pid[rows], comm=s.comm[rows],
                     qp_type=s.qp_type[rows], state=s.state[rows], generation=np.zeros(n, _I64),
                     sq_psn=s.sq_psn[rows], rq_psn=s.rq_psn[rows],
                     rq_has=np.ones(n, bool) if s.rq_has is None else s.rq_has[rows], cntn=cntn, ctr_has=ctr_has,
                     counters=vals)
        mtu_g = np.array([(mtu or {}).get(k, self.default_mtu) for k in self.port_keys] or [0], dtype=object)
        path_mtu = int_column(mtu_g[gid].tolist(), n)
        if not aligned and n > 1 and bool((skey[1:] == skey[:-1]).any()):
            w = self._update_in_order(new, path_mtu, now_ns)
            key = (self.rows.gid << 32) | self.rows.lqpn
            order = np.argsort(key, kind="stable")
            self._sorted = (key[order], order)
        else:
            w = self._update_unique(new, key, path_mtu, now_ns, aligned)
            self.rows = new
            self._sorted = (skey, order)
        self._row_keys = key
        self._cntns = (gid[ctr_has], cntn[ctr_has])
        self._primed = True
        return w

    def _counters(self, counters: dict[QpKey, QpBytes] | QpCounterColumns | None, key: np.ndarray,
                  n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(has counter, cntn, (n, 4) values) of each flow row from the per-QP counters."""
        has = np.zeros(n, bool)
        none = has, np.zeros(n, _I64), np.zeros((n, 4), _I64)
        if not counters or not n:
            return none
        if isinstance(counters, dict):
            (devs, ports, lqpns), (cntns, values) = zip(*counters, strict=True), zip(*counters.values(), strict=True)
        else:
            devs, ports, lqpns, cntns, values = counters
        m = len(lqpns)
        if not m:
            return none
        ids = self._port_ids
        pair_id = {p: ids.get(p, -1) for p in set(zip(devs, ports, strict=True))}
        gid = np.fromiter(map(pair_id.__getitem__, zip(devs, ports, strict=True)), _I64, m)
        lq = int_column(lqpns, m)
        usable = (gid >= 0) & (lq >= 0) & (lq < 1 << 32) if lq.dtype != object else np.zeros(m, bool)
        if not usable.all():
            if lq.dtype == object:
                usable = (gid >= 0) & np.array([0 <= q < 1 << 32 for q in lqpns], bool).reshape(m)
            lq = np.where(usable, lq, 0).astype(_I64)
        ckey = np.where(usable, (gid << 32) | lq, -1)
        corder = np.argsort(ckey, kind="stable")
        sk = ckey[corder]
        last = np.ones(m, bool)
        last[:-1] = sk[1:] != sk[:-1]  # the same QP twice: the later counter, as in a dict
        sk, corder = sk[last], corder[last]
        pos = np.minimum(np.searchsorted(sk, key), len(sk) - 1)
        has = sk[pos] == key
        src = corder[pos[has]]
        cn = int_column(cntns, m)[src]
        cntn = np.zeros(n, dtype=cn.dtype)
        cntn[has] = cn
        try:
            v = np.array(values, dtype=_I64).reshape(m, 4)
        except OverflowError:
            v = np.array(values, dtype=object).reshape(m, 4)
        vals = np.zeros((n, 4), dtype=v.dtype)
        vals[has] = v[src]
        return has, cntn, vals

    def _update_unique(self, new: QpRows, key: np.ndarray, path_mtu: np.ndarray, now_ns: int,
                       aligned: bool) -> QpWindow:
        """The window of a sample that lists every QP once (the normal case), on whole columns.
        ``aligned``: row i is row i of the previous sample."""
        n = len(new)
        old = self.rows
        m = QPN_MASK
        if aligned:
            found = np.ones(n, bool)
            oi = np.arange(n)
        elif len(old) and self._sorted is not None:
            skey, sorder = self._sorted
            pos = np.minimum(np.searchsorted(skey, key), len(skey) - 1)
            found = skey[pos] == key
            oi = np.where(found, sorder[pos], 0)
        else:
            found = np.zeros(n, bool)
            oi = np.zeros(n, _I64)
            old = QpRows.empty() if not len(old) else old
        if len(old):
            o_rqpn, o_pid, o_cntn, o_ctr = ((old.rqpn, old.pid, old.cntn, old.ctr_has) if aligned else
                                            (old.rqpn[oi], old.pid[oi], old.cntn[oi], old.ctr_has[oi]))
            same_ctr = o_ctr & new.ctr_has & (o_cntn == new.cntn)
            match = found & (o_rqpn == new.rqpn) & (o_pid == new.pid) & (~o_ctr | ~new.ctr_has | same_ctr)
        else:
            match = found
            same_ctr = found
        first = not self._primed
        tx_b = np.zeros(n, _I64)
        rx_b = np.zeros(n, _I64)
        tx_p = np.zeros(n, _I64)
        rx_p = np.zeros(n, _I64)
        src = np.zeros(n, _I64)
        eb = np.zeros(n, _I64)
        has_delta = match.copy()
        frame = path_mtu + self.frame_overhead
        if match.any():
            mi = np.flatnonzero(match)
            o = oi[mi]
            exact = same_ctr[mi]
            if exact.any():
                d = new.counters[mi] - old.counters[o]
                exact &= (d >= 0).all(axis=1)  # else the counter went down (re-bound or reset): PSNs this once
            if exact.any():
                ei = mi[exact]
                d = d[exact]
                tx_b, rx_b, tx_p, rx_p = (put_widening(a, ei, d[:, j]) for j, a in enumerate((tx_b, rx_b, tx_p, rx_p)))
                src[ei] = QP_COUNTER
            pi = mi[~exact]
            if len(pi):
                op = oi[pi]
                p_tx = (new.sq_psn[pi] - old.sq_psn[op]) & m
                p_rx = np.where(new.rq_has[pi] & old.rq_has[op], (new.rq_psn[pi] - old.rq_psn[op]) & m, 0)
                f = frame[pi]
                tx_b = put_widening(tx_b, pi, p_tx * f)
                rx_b = put_widening(rx_b, pi, p_rx * f)
                tx_p = put_widening(tx_p, pi, p_tx)
                rx_p = put_widening(rx_p, pi, p_rx)
                eb = put_widening(eb, pi, p_tx * (path_mtu[pi] - 1))  # narrowed per port by psn_bounds
                src[pi] = PSN_ESTIMATE
        fresh = ~match
        generation = np.full(n, now_ns, dtype=_I64 if -(1 << 63) <= now_ns < 1 << 63 else object)
        if len(old):
            mi = np.flatnonzero(match)
            generation = put_widening(generation, mi, old.generation[oi[mi]])
            new.qp_type[mi] = old.qp_type[oi[mi]]  # a generation keeps the type it was first seen with
        new.generation = generation
        if not first and fresh.any():
            fi = np.flatnonzero(fresh)
            exact_fi = []
            with_ctr = fi[new.ctr_has[fi]]
            if len(with_ctr):
                seen = set(zip(*(a.tolist() for a in self._cntns), strict=True))
                for i, g, c in zip(with_ctr.tolist(), new.gid[with_ctr].tolist(), new.cntn[with_ctr].tolist(),
                                   strict=True):
                    if (g, c) not in seen:
                        exact_fi.append(i)  # a counter allocated in this window has counted only this window
            if exact_fi:
                ei = np.array(exact_fi, _I64)
                v = new.counters[ei]
                tx_b, rx_b, tx_p, rx_p = (put_widening(a, ei, v[:, j]) for j, a in enumerate((tx_b, rx_b, tx_p, rx_p)))
                src[ei] = QP_COUNTER
                has_delta[ei] = True
            if self.initial_psn is not None:
                pi = np.setdiff1d(fi, np.array(exact_fi, _I64), assume_unique=True)
                init = self.initial_psn
                p_tx = (new.sq_psn[pi] - init) & m
                p_rx = np.where(new.rq_has[pi], (new.rq_psn[pi] - init) & m, 0)
                f = frame[pi]
                tx_b = put_widening(tx_b, pi, p_tx * f)
                rx_b = put_widening(rx_b, pi, p_rx * f)
                tx_p = put_widening(tx_p, pi, p_tx)
                rx_p = put_widening(rx_p, pi, p_rx)
                eb = put_widening(eb, pi, p_tx * (path_mtu[pi] - 1))
                src[pi] = PSN_ESTIMATE
                has_delta[pi] = True
        slot = np.flatnonzero(has_delta)
        return QpWindow(new if len(slot) == n else new.take(slot), slot, tx_b[slot], rx_b[slot], tx_p[slot],
                        rx_p[slot], src[slot], eb[slot],
                        np.where(match, oi, -1))

    def _update_in_order(self, new: QpRows, path_mtu: np.ndarray, now_ns: int) -> QpWindow:
        """The window of a sample that lists a QP more than once: record by record, in order, as if
        each record were a separate observation of the QP (what the columnar path cannot express)."""
        keys = self.port_keys
        old: dict[QpKey, QpState] = {}
        for i, st in enumerate(self.rows.states(keys)):
            st.cache = i
            old[(st.device, st.port, st.lqpn)] = st
        states_new: dict[QpKey, QpState] = {}
        out: list[QpDelta] = []
        first = not self._primed
        seen_before = set(zip(*(a.tolist() for a in self._cntns), strict=True))
        overhead = self.frame_overhead
        m = QPN_MASK
        cols = [a.tolist() for a in (new.gid, new.lqpn, new.rqpn, new.pid, new.comm, new.qp_type, new.state,
                                     new.sq_psn, new.rq_psn, new.rq_has, new.cntn, new.ctr_has)]
        counters = new.counters.tolist()
        for (g, lqpn, rqpn, pid, comm, qp_type, state, sq, rq, rq_has, cntn, ctr_has), vals, mtu in zip(
                zip(*cols, strict=True), counters, path_mtu.tolist(), strict=True):
            dev, port = keys[g]
            key = (dev, port, lqpn)
            rq = rq if rq_has else None
            cntn, vals = (cntn, tuple(vals)) if ctr_has else (None, None)
            st = old.get(key)
            if (st is not None and st.rqpn == rqpn and st.pid == pid
                    and (st.cntn is None or cntn is None or st.cntn == cntn)):
                st.state, st.comm = state, comm
                before = st.counters
                d = None
                if vals is not None and before is not None and st.cntn == cntn:
                    dv = [a - b for a, b in zip(vals, before, strict=True)]
                    if min(dv) >= 0:
                        d = QpDelta(st, *dv, QP_COUNTER, 0)
                if d is None:
                    tx = (sq - st.sq_psn) & m
                    rx = (rq - st.rq_psn) & m if rq is not None and st.rq_psn is not None else 0
                    d = QpDelta(st, tx * (mtu + overhead), rx * (mtu + overhead), tx, rx, PSN_ESTIMATE,
                                tx * (mtu - 1))
                out.append(d)
            else:
                st = QpState(dev, port, lqpn, rqpn, pid, comm, qp_type, state, now_ns, sq, rq)
                if not first:
                    if vals is not None and (g, cntn) not in seen_before:
                        out.append(QpDelta(st, *vals, QP_COUNTER, 0))
                    elif self.initial_psn is not None:
                        init = self.initial_psn
                        tx = (sq - init) & m
                        rx = (rq - init) & m if rq is not None else 0
                        out.append(QpDelta(st, tx * (mtu + overhead), rx * (mtu + overhead), tx, rx, PSN_ESTIMATE,
                                           tx * (mtu - 1)))
            st.sq_psn, st.rq_psn = sq, rq
            st.cntn, st.counters = cntn, vals
            states_new[key] = st
        final = list(states_new.values())
        row_of = {id(st): i for i, st in enumerate(final)}
        gids = [self.port_id((st.device, st.port)) for st in final]
        self.rows = QpRows.from_states(final, gids)
        prev = np.array([st.cache if isinstance(st.cache, int) else -1 for st in final], _I64).reshape(len(final))
        dq = [d.qp for d in out]
        k = len(out)
        return QpWindow(QpRows.from_states(dq, [self.port_id((st.device, st.port)) for st in dq]),
                        np.array([row_of.get(id(st), -1) for st in dq], _I64).reshape(k),
                        *(int_column([getattr(d, f) for d in out], k) for f in (
                            "tx_bytes", "rx_bytes", "tx_packets", "rx_packets", "byte_source", "error_bound")),
                        prev)

