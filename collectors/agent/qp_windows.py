"""Per-window QP and port deltas: QP generations, 24-bit PSN wrap, counter resets.

Pure bookkeeping between two samples of one host. ``QpTracker.update`` takes the QPs and per-QP
counters of a sample and returns, for every RC/UC QP, the bytes and packets it moved since the
previous sample and where that number came from:

* ``QP_COUNTER``: a counter bound to this QP alone with the Linux >= 6.15 optional byte counters
  (``rdma_tx_bytes`` ...): exact, ``error_bound`` 0;
* ``PSN_ESTIMATE``: send-PSN delta (mod 2^24) x (path MTU + ``frame_overhead`` bytes), i.e. every
  packet counted as a full RoCEv2 frame, the same unit as the port and switch counters. Every
  packet carries at most one MTU of payload, so this overcounts by the unused part of partial
  packets (one per message at least; a 64-byte NCCL clear-to-send write is almost all unused).
  ``psn_error_bounds`` bounds that error per QP from the port's exact sysfs totals (see there).

A QP is identified by (device, port, lqpn) *and* its peer QP, owner pid and bound counter: when
any of these changes, or the QP was missing from the previous sample, it is a new generation
(``generation`` = ns of the sample that first saw it) and never inherits the old counters.
Loopback / flush QPs (lqpn == rqpn) and QPs without a peer (UD, GSI, ...) are not flows.

The PSN estimate is exact only while a QP sends fewer than 2^24 packets per window (at 400 Gbit/s
and MTU 4096 that is 1.37 s); longer intervals alias.

The tracker keeps its QPs as columns (numpy arrays, one row per live QP generation) and does the
window arithmetic on whole columns (10k QPs per window on a big host): ``update_columns`` returns a
``QpWindow`` of columns, ``update`` the same as ``QpDelta`` objects. Integers stay exact: a column
whose values do not fit int64 (a 64-bit counter past 2^63) is kept as Python ints (object dtype).
A sample that lists one QP twice (never seen from iproute2) is processed record by record, in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowtracer.collectors.agent.sources.rdma_json import QPN_MASK, QpBytes, QpColumns, QpCounterColumns, QpRecord
from flowtracer.schemas.v1 import flows_pb2 as pb

FLOW_QP_TYPES = frozenset({"RC", "UC"})
QP_COUNTER = pb.BYTE_SOURCE_QP_COUNTER
PSN_ESTIMATE = pb.BYTE_SOURCE_PSN_ESTIMATE

QpKey = tuple[str, int, int]  # (device, port, lqpn)
PortKey = tuple[str, int]  # (device, port)

_I64 = np.int64
_INT64_SAFE = 1 << 62  # sums of fewer than 2 values this large cannot overflow int64


def psn_delta(now: int, before: int) -> int:
    """Packets between two 24-bit PSNs, modulo 2^24 (one wrap per interval is handled)."""
    return (now - before) & QPN_MASK


EXT_HEADER_BYTES = 20
"""RETH (16) + ImmDt (4): extension headers some packets carry beyond ``frame_overhead``."""


# -- exact integer columns ---------------------------------------------------------------------


def int_column(values: Iterable[Any], n: int) -> np.ndarray:
    """Python ints -> an int64 array, or an object array of the same ints when one does not fit."""
    if not isinstance(values, list):
        values = list(values)
    try:
        return np.fromiter(values, _I64, n)
    except OverflowError:
        return np.array(values, dtype=object).reshape(n)


def optional_int_column(values: list[int | None]) -> tuple[np.ndarray, np.ndarray | None]:
    """Ints or None -> (array with 0 for None, mask of the non-None rows or None when all are)."""
    n = len(values)
    try:
        return np.fromiter(values, _I64, n), None
    except TypeError:
        pass
    except OverflowError:
        if None not in values:
            return np.array(values, dtype=object).reshape(n), None
    obj = np.array(values, dtype=object).reshape(n)
    has = np.not_equal(obj, None)
    obj[~has] = 0
    try:
        return obj.astype(_I64), has
    except OverflowError:
        return obj, has


def exact_sum(a: np.ndarray) -> int:
    """Sum of an integer column as a Python int, without int64 overflow."""
    if not len(a):
        return 0
    if a.dtype != object and int(a.max()) < _INT64_SAFE // len(a) and int(a.min()) > -_INT64_SAFE // len(a):
        return int(a.sum())
    return sum(a.tolist())


def psn_bounds(tx_bytes: np.ndarray, tx_packets: np.ndarray, estimated: np.ndarray, mtu: int, frame_overhead: int,
               port_bytes_lower: int | None, port_packets_upper: int | None) -> np.ndarray:
    """``error_bound`` (bytes) of the PSN-estimated deltas (``estimated``) of one port's QPs; the
    formula is documented at ``psn_error_bounds``. Returns the bounds of the estimated rows."""
    frame = mtu + frame_overhead
    slack = None
    if port_bytes_lower is not None and port_packets_upper is not None:
        pk_all = exact_sum(tx_packets)
        if port_packets_upper >= pk_all:
            other = (port_packets_upper - pk_all) * frame
            slack = max(0, exact_sum(tx_bytes) - port_bytes_lower + other + 4) + EXT_HEADER_BYTES * pk_all
    p = tx_packets[estimated]
    over = p * (mtu - 1)
    if slack is not None:
        over = np.minimum(over, slack if slack < _INT64_SAFE or over.dtype == object else _INT64_SAFE)
    return np.maximum(over, p * EXT_HEADER_BYTES)


def psn_error_bounds(deltas: list[QpDelta], mtu: int, frame_overhead: int, port_bytes_lower: int | None,
                     port_packets_upper: int | None) -> None:
    """Set ``error_bound`` (bytes) of the PSN-estimated deltas of one port's QPs, in place.

    Per QP, the estimate ``e_i = p_i x (MTU + H)`` can exceed the true frame bytes ``t_i`` by at
    most ``p_i x (MTU - 1)`` (all payload 1 byte) and fall short by at most ``p_i x 20`` (extension
    headers). The port counters tighten the first: the port sent at least ``B`` bytes (lower
    bracket of its sysfs delta) in at most ``P`` packets, so QPs plus unseen traffic satisfy
    ``sum(t) >= B - (P - sum(p)) x (MTU + H) - 4`` (4: sysfs counts 4-byte words), hence every
    ``e_i - t_i <= sum(e) - sum(t) + 20 x sum(p)``. Exact-counter QPs on the port count with their
    true bytes in these sums.
    """
    est = [d.byte_source == PSN_ESTIMATE for d in deltas]
    if not any(est):
        return
    n = len(deltas)
    bounds = psn_bounds(int_column([d.tx_bytes for d in deltas], n), int_column([d.tx_packets for d in deltas], n),
                        np.array(est, dtype=bool), mtu, frame_overhead, port_bytes_lower, port_packets_upper)
    for d, b in zip([d for d, e in zip(deltas, est, strict=True) if e], bounds.tolist(), strict=True):
        d.error_bound = b


# -- the per-QP view (compatibility objects) ---------------------------------------------------


@dataclass(slots=True)
class QpState:
    """The tracker's memory of one QP generation (values as of the last sample)."""

    device: str
    port: int
    lqpn: int
    rqpn: int
    pid: int
    comm: str
    qp_type: str
    state: str
    generation: int  # ns of the sample that first saw this QP
    sq_psn: int
    rq_psn: int | None
    cntn: int | None = None  # per-QP counter bound at the last sample
    counters: tuple[int, int, int, int] | None = None  # its (tx_bytes, rx_bytes, tx_packets, rx_packets)
    cache: Any = None  # scratch for the record-by-record path


@dataclass(slots=True)
class QpDelta:
    """What one QP moved in one window, seen from its own host."""

    qp: QpState
    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int
    byte_source: int  # flows_pb2.ByteSource
    error_bound: int  # bytes; 0 when exact


# -- columns -----------------------------------------------------------------------------------


class QpRows:
    """QP generations as columns, one row each: the tracker's state, and the QPs of a window.

    ``gid`` is the tracker's id of the row's (device, port) (``QpTracker.port_keys``); ``rq_has``
    / ``ctr_has`` mark rows whose ``rq_psn`` / counter (``cntn``, ``counters`` columns
    tx_bytes, rx_bytes, tx_packets, rx_packets) exist. String columns are object arrays.
    """

    COLUMNS = ("gid", "lqpn", "rqpn", "pid", "comm", "qp_type", "state", "generation", "sq_psn", "rq_psn",
               "rq_has", "cntn", "ctr_has", "counters")
    __slots__ = COLUMNS

    def __init__(self, **cols: np.ndarray) -> None:
        for k in self.COLUMNS:
            setattr(self, k, cols[k])

    @classmethod
    def empty(cls) -> QpRows:
        e = np.zeros(0, _I64)
        o = np.zeros(0, dtype=object)
        b = np.zeros(0, dtype=bool)
        return cls(gid=e, lqpn=e, rqpn=e, pid=e, comm=o, qp_type=o, state=o, generation=e, sq_psn=e, rq_psn=e,
                   rq_has=b, cntn=e, ctr_has=b, counters=np.zeros((0, 4), _I64))

    def __len__(self) -> int:
        return len(self.lqpn)

    def take(self, idx: np.ndarray) -> QpRows:
        return QpRows(**{k: getattr(self, k)[idx] for k in self.COLUMNS})

    @classmethod
    def from_states(cls, states: list[QpState], gids: list[int]) -> QpRows:
        n = len(states)
        col = [[getattr(s, k) for s in states] for k in ("lqpn", "rqpn", "pid", "generation", "sq_psn")]
        rq, rq_has = optional_int_column([s.rq_psn for s in states])
        cntn, ctr_has = optional_int_column([s.cntn for s in states])
        zero = (0, 0, 0, 0)
        vals = [s.counters or zero for s in states]
        try:
            counters = np.array(vals, dtype=_I64).reshape(n, 4)
        except OverflowError:
            counters = np.array(vals, dtype=object).reshape(n, 4)
        return cls(gid=np.array(gids, _I64).reshape(n), lqpn=int_column(col[0], n), rqpn=int_column(col[1], n),
                   pid=int_column(col[2], n), comm=_objects([s.comm for s in states]),
                   qp_type=_objects([s.qp_type for s in states]), state=_objects([s.state for s in states]),
                   generation=int_column(col[3], n), sq_psn=int_column(col[4], n), rq_psn=rq,
                   rq_has=np.ones(n, bool) if rq_has is None else rq_has, cntn=cntn,
                   ctr_has=np.ones(n, bool) if ctr_has is None else ctr_has, counters=counters)

    def states(self, port_keys: list[PortKey]) -> list[QpState]:
        """One ``QpState`` per row."""
        out = []
        cols = [getattr(self, k).tolist() for k in ("gid", "lqpn", "rqpn", "pid", "comm", "qp_type", "state",
                                                     "generation", "sq_psn", "rq_psn", "rq_has", "cntn",
                                                     "ctr_has")]
        counters = self.counters.tolist()
        for (g, lqpn, rqpn, pid, comm, qp_type, state, gen, sq, rq, rq_has, cntn, ctr_has), v in zip(
                zip(*cols, strict=True), counters, strict=True):
            dev, port = port_keys[g]
            out.append(QpState(dev, port, lqpn, rqpn, pid, comm, qp_type, state, gen, sq, rq if rq_has else None,
                               cntn if ctr_has else None, tuple(v) if ctr_has else None))
        return out


def _objects(values: list[Any]) -> np.ndarray:
    a = np.empty(len(values), dtype=object)
    a[:] = values
    return a


@dataclass(slots=True)
class QpWindow:
    """The deltas of one ``QpTracker.update_columns``: one row per QP that has a delta, in record
    order. ``qps`` holds each delta's QP generation (as of this sample), ``slot`` its row in the
    tracker's state (``QpTracker.rows``), -1 for a generation a later record of the same QP
    replaced. ``prev`` maps every row of the new state to its row in the previous state (-1: a
    new generation), so callers can keep per-generation data aligned with the tracker."""

    qps: QpRows
    slot: np.ndarray
    tx_bytes: np.ndarray
    rx_bytes: np.ndarray
    tx_packets: np.ndarray
    rx_packets: np.ndarray
    byte_source: np.ndarray
    error_bound: np.ndarray
    prev: np.ndarray

    def __len__(self) -> int:
        return len(self.slot)


class _Sample:
    """Numpy columns of one sample's QPs, derived once (memoized on the ``QpColumns``)."""

    __slots__ = (
        "comm",
        "lqpn",
        "n",
        "pair_of",
        "pairs",
        "pid",
        "port",
        "qp_type",
        "rq_has",
        "rq_psn",
        "rqpn",
        "rqpn_has",
        "sq_psn",
        "state",
        "typed",
    )

    def __init__(self, qps: QpColumns) -> None:
        n = self.n = len(qps)
        self.lqpn = int_column(qps.lqpn, n)
        self.rqpn, self.rqpn_has = optional_int_column(qps.rqpn)
        self.port = int_column(qps.port, n)
        self.sq_psn = int_column(qps.sq_psn, n)
        self.rq_psn, self.rq_has = optional_int_column(qps.rq_psn)
        self.pid = int_column(qps.pid, n)
        self.qp_type = _objects(qps.qp_type)
        self.state = _objects(qps.state)
        self.comm = _objects(qps.comm)
        types = set(qps.qp_type)
        if types <= FLOW_QP_TYPES:
            self.typed = np.ones(n, bool)
        else:
            self.typed = np.zeros(n, bool)
            for t in types & FLOW_QP_TYPES:
                self.typed |= self.qp_type == t
        # (device, port) of each row: distinct pairs and the index of each row's pair
        devices = sorted(set(qps.device))
        port = self.port
        if len(devices) == 1 and port.dtype != object and n:
            lo, hi = int(port.min()), int(port.max())
            if lo == hi:
                self.pairs, self.pair_of = [(devices[0], lo)], np.zeros(n, _I64)
                return
        if port.dtype != object and (not n or (int(port.min()) >= 0 and int(port.max()) < 1 << 31)):
            code = {d: i for i, d in enumerate(devices)}
            dev = np.fromiter(map(code.__getitem__, qps.device), _I64, n) if len(devices) > 1 else np.zeros(n, _I64)
            uniq, inv = np.unique((dev << 31) | port, return_inverse=True)
            self.pairs = [(devices[u >> 31], u & ((1 << 31) - 1)) for u in uniq.tolist()]
            self.pair_of = inv.reshape(n).astype(_I64, copy=False)
        else:
            index: dict[PortKey, int] = {}
            of = [index.setdefault(p, len(index)) for p in zip(qps.device, qps.port, strict=True)]
            self.pairs, self.pair_of = list(index), np.array(of, _I64).reshape(n)

    @classmethod
    def of(cls, qps: QpColumns) -> _Sample:
        s = qps.arrays.get("sample")
        if s is None:
            s = qps.arrays["sample"] = cls(qps)
        return s

    def peer_rows(self) -> np.ndarray:
        """Rows of QPs with a peer: RC/UC with a remote QP that is not themselves (any port)."""
        m = self.typed & (self.rqpn != self.lqpn)
        if self.rqpn_has is not None:
            m &= self.rqpn_has
        return m


def sample_arrays(qps: QpColumns) -> _Sample:
    """The numpy columns of a sample's QPs (computed once per ``QpColumns``)."""
    return _Sample.of(qps)


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

    # -- compatibility views ------------------------------------------------------------------

    @property
    def qps(self) -> dict[QpKey, QpState]:
        """Every live QP generation by (device, port, lqpn), as objects (a copy)."""
        return {(s.device, s.port, s.lqpn): s for s in self.rows.states(self.port_keys)}

    def update(self, records: list[QpRecord], counters: dict[QpKey, QpBytes] | None, now_ns: int,
               mtu: dict[PortKey, int] | None = None) -> list[QpDelta]:
        """Advance to a new sample; return the deltas of every flow QP since the previous one.

        ``counters`` are the per-QP counters of this sample (``rdma_json.per_qp_counters``), None
        when ``rdma statistic`` is not available. ``mtu`` gives the path MTU (bytes) per (device,
        port); missing ports use ``default_mtu``. The first call only records baselines.
        """
        w = self.update_columns(QpColumns.from_records(records), counters, now_ns, mtu)
        states = w.qps.states(self.port_keys)
        cols = [a.tolist() for a in (w.tx_bytes, w.rx_bytes, w.tx_packets, w.rx_packets, w.byte_source,
                                     w.error_bound)]
        return [QpDelta(st, *v) for st, v in zip(states, zip(*cols, strict=True), strict=True)]

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
        """``update`` on columns: the same deltas as a ``QpWindow`` (``counters`` may also be
        ``rdma_json.per_qp_counter_columns``)."""
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
                tx_b, rx_b, tx_p, rx_p = (_put(a, ei, d[:, j]) for j, a in enumerate((tx_b, rx_b, tx_p, rx_p)))
                src[ei] = QP_COUNTER
            pi = mi[~exact]
            if len(pi):
                op = oi[pi]
                p_tx = (new.sq_psn[pi] - old.sq_psn[op]) & m
                p_rx = np.where(new.rq_has[pi] & old.rq_has[op], (new.rq_psn[pi] - old.rq_psn[op]) & m, 0)
                f = frame[pi]
                tx_b = _put(tx_b, pi, p_tx * f)
                rx_b = _put(rx_b, pi, p_rx * f)
                tx_p = _put(tx_p, pi, p_tx)
                rx_p = _put(rx_p, pi, p_rx)
                eb = _put(eb, pi, p_tx * (path_mtu[pi] - 1))  # narrowed per port by psn_bounds
                src[pi] = PSN_ESTIMATE
        fresh = ~match
        generation = np.full(n, now_ns, dtype=_I64 if -(1 << 63) <= now_ns < 1 << 63 else object)
        if len(old):
            mi = np.flatnonzero(match)
            generation = _put(generation, mi, old.generation[oi[mi]])
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
                tx_b, rx_b, tx_p, rx_p = (_put(a, ei, v[:, j]) for j, a in enumerate((tx_b, rx_b, tx_p, rx_p)))
                src[ei] = QP_COUNTER
                has_delta[ei] = True
            if self.initial_psn is not None:
                pi = np.setdiff1d(fi, np.array(exact_fi, _I64), assume_unique=True)
                init = self.initial_psn
                p_tx = (new.sq_psn[pi] - init) & m
                p_rx = np.where(new.rq_has[pi], (new.rq_psn[pi] - init) & m, 0)
                f = frame[pi]
                tx_b = _put(tx_b, pi, p_tx * f)
                rx_b = _put(rx_b, pi, p_rx * f)
                tx_p = _put(tx_p, pi, p_tx)
                rx_p = _put(rx_p, pi, p_rx)
                eb = _put(eb, pi, p_tx * (path_mtu[pi] - 1))
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


def _put(a: np.ndarray, idx: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a[idx] = v``, widening ``a`` to Python ints when ``v`` holds them."""
    if v.dtype == object and a.dtype != object:
        a = a.astype(object)
    a[idx] = v
    return a


@dataclass(slots=True)
class PortDelta:
    """Bytes and packets one RDMA port moved in one window (from sysfs, bytes already x4).

    ``tx_bytes_lower`` / ``tx_packets_upper`` bracket the port's transmit counters over the span
    of the QP snapshots when the counters were read just before and just after them.
    """

    device: str
    port: int
    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int
    tx_bytes_lower: int
    tx_packets_upper: int


Totals = dict[tuple[str, int], tuple[int, int, int, int]]  # (tx_bytes, rx_bytes, tx_packets, rx_packets)


class PortTracker:
    """Per-port deltas between samples; a counter that went down is a reset (new baseline)."""

    def __init__(self) -> None:
        self._last: Totals = {}
        self._last_before: Totals = {}
        self.resets = 0

    def update(self, totals: Totals, before: Totals | None = None) -> list[PortDelta]:
        """``totals``: absolute counters per (device, port) read after the QP snapshot; ``before``:
        read just before it (None: at the same instant, as in the simulator's snapshots)."""
        before = totals if before is None else before
        out: list[PortDelta] = []
        for key, now in totals.items():
            prev = self._last.get(key)
            if prev is None:
                continue
            d = tuple(a - b for a, b in zip(now, prev, strict=True))
            if min(d) < 0:
                self.resets += 1
                continue
            now_b = before.get(key, now)
            prev_b = self._last_before.get(key, prev)
            out.append(PortDelta(key[0], key[1], *d, tx_bytes_lower=now_b[0] - prev[0],
                                 tx_packets_upper=now[2] - prev_b[2]))
        self._last, self._last_before = dict(totals), dict(before)
        return out
