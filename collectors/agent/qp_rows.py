"""QP generations as objects (``QpState``, ``QpDelta``) and as columns (``QpRows``, ``QpWindow``), and
the numpy columns of one sample's QPs (``QpSample``): the data the QP tracker works on (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flowtracer.collectors.agent.int_columns import int_column, object_column, optional_int_column
from flowtracer.collectors.agent.sources.rdma_json import QpColumns
from flowtracer.schemas.v1 import flows_pb2 as pb

FLOW_QP_TYPES = frozenset({"RC", "UC"})
QP_COUNTER = pb.BYTE_SOURCE_QP_COUNTER
PSN_ESTIMATE = pb.BYTE_SOURCE_PSN_ESTIMATE

QpKey = tuple[str, int, int]  # (device, port, lqpn)
PortKey = tuple[str, int]  # (device, port)

_I64 = np.int64


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
                   pid=int_column(col[2], n), comm=object_column([s.comm for s in states]),
                   qp_type=object_column([s.qp_type for s in states]), state=object_column([s.state for s in states]),
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


class QpSample:
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
        self.qp_type = object_column(qps.qp_type)
        self.state = object_column(qps.state)
        self.comm = object_column(qps.comm)
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
    def of(cls, qps: QpColumns) -> QpSample:
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


def sample_arrays(qps: QpColumns) -> QpSample:
    """The numpy columns of a sample's QPs (computed once per ``QpColumns``)."""
    return QpSample.of(qps)
