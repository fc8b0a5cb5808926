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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowtracer.schemas.v1 import flows_pb2 as pb

from .rdma_json import QPN_MASK, QpBytes, QpRecord

FLOW_QP_TYPES = frozenset({"RC", "UC"})
QP_COUNTER = pb.BYTE_SOURCE_QP_COUNTER
PSN_ESTIMATE = pb.BYTE_SOURCE_PSN_ESTIMATE

QpKey = tuple[str, int, int]  # (device, port, lqpn)


def psn_delta(now: int, before: int) -> int:
    """Packets between two 24-bit PSNs, modulo 2^24 (one wrap per interval is handled)."""
    return (now - before) & QPN_MASK


EXT_HEADER_BYTES = 20
"""RETH (16) + ImmDt (4): extension headers some packets carry beyond ``frame_overhead``."""


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
    frame = mtu + frame_overhead
    est = [d for d in deltas if d.byte_source == PSN_ESTIMATE]
    if not est:
        return
    slack = None
    if port_bytes_lower is not None and port_packets_upper is not None:
        pk_all = sum(d.tx_packets for d in deltas)
        if port_packets_upper >= pk_all:
            other = (port_packets_upper - pk_all) * frame
            slack = max(0, sum(d.tx_bytes for d in deltas) - port_bytes_lower + other + 4) \
                + EXT_HEADER_BYTES * pk_all
    for d in est:
        over = d.tx_packets * (mtu - 1)
        if slack is not None:
            over = min(over, slack)
        d.error_bound = max(over, d.tx_packets * EXT_HEADER_BYTES)


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
    cache: Any = None  # owned by the flow builder (static part of the Flow message)


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
        self.qps: dict[QpKey, QpState] = {}
        self._cntns: set[tuple[str, int, int]] = set()  # (device, port, cntn) seen at the last sample
        self._primed = False

    def update(self, records: list[QpRecord], counters: dict[QpKey, QpBytes] | None, now_ns: int,
               mtu: dict[tuple[str, int], int] | None = None) -> list[QpDelta]:
        """Advance to a new sample; return the deltas of every flow QP since the previous one.

        ``counters`` are the per-QP counters of this sample (``rdma_json.per_qp_counters``), None
        when ``rdma statistic`` is not available. ``mtu`` gives the path MTU (bytes) per (device,
        port); missing ports use ``default_mtu``. The first call only records baselines.
        """
        old: dict[QpKey, QpState] = self.qps
        new: dict[QpKey, QpState] = {}
        counters = counters or {}
        mtu = mtu or {}
        out: list[QpDelta] = []
        append = out.append
        first = not self._primed
        seen_cntns: set[tuple[str, int, int]] = set()
        flow_types = FLOW_QP_TYPES
        default_mtu = self.default_mtu
        overhead = self.frame_overhead
        m = QPN_MASK
        for r in records:  # hot loop (10k QPs per window on a big host): the common paths are inlined
            rqpn = r.rqpn
            if rqpn is None or rqpn == r.lqpn or r.port == 0 or r.qp_type not in flow_types:
                continue
            key = (r.device, r.port, r.lqpn)
            ctr = counters.get(key) if counters else None
            if ctr is None:
                cntn = vals = None
            else:
                cntn, vals = ctr
                seen_cntns.add((r.device, r.port, cntn))
            st = old.get(key)
            if (st is not None and st.rqpn == rqpn and st.pid == r.pid
                    and (st.cntn is None or cntn is None or st.cntn == cntn)):
                st.state, st.comm = r.state, r.comm
                before = st.counters
                d = None
                if vals is not None and before is not None and st.cntn == cntn:
                    tx_b, rx_b = vals[0] - before[0], vals[1] - before[1]
                    tx_p, rx_p = vals[2] - before[2], vals[3] - before[3]
                    if tx_b >= 0 and rx_b >= 0 and tx_p >= 0 and rx_p >= 0:
                        d = QpDelta(st, tx_b, rx_b, tx_p, rx_p, QP_COUNTER, 0)
                    # else the counter went down (re-bound or reset): PSNs this once
                if d is None:
                    path_mtu = mtu.get((r.device, r.port), default_mtu)
                    frame = path_mtu + overhead
                    tx_p = (r.sq_psn - st.sq_psn) & m
                    rq, rq0 = r.rq_psn, st.rq_psn
                    rx_p = (rq - rq0) & m if rq is not None and rq0 is not None else 0
                    # error_bound is narrowed per port by psn_error_bounds
                    d = QpDelta(st, tx_p * frame, rx_p * frame, tx_p, rx_p, PSN_ESTIMATE, tx_p * (path_mtu - 1))
                append(d)
            else:
                st = QpState(r.device, r.port, r.lqpn, rqpn, r.pid, r.comm, r.qp_type, r.state, now_ns,
                             r.sq_psn, r.rq_psn)
                if not first:
                    d = self._first_window(st, r, cntn, vals, mtu.get((r.device, r.port), default_mtu))
                    if d is not None:
                        append(d)
            st.sq_psn, st.rq_psn = r.sq_psn, r.rq_psn
            st.cntn, st.counters = cntn, vals
            new[key] = st
        self.qps = new
        self._cntns = seen_cntns
        self._primed = True
        return out

    def _psn(self, st: QpState, sq_before: int, rq_before: int | None, r: QpRecord, mtu: int) -> QpDelta:
        tx_p = (r.sq_psn - sq_before) & QPN_MASK
        rq = r.rq_psn
        rx_p = (rq - rq_before) & QPN_MASK if rq is not None and rq_before is not None else 0
        frame = mtu + self.frame_overhead
        # error_bound is set per port by psn_error_bounds; this is the bound without port totals.
        return QpDelta(st, tx_p * frame, rx_p * frame, tx_p, rx_p, PSN_ESTIMATE, tx_p * (mtu - 1))

    def _first_window(self, st: QpState, r: QpRecord, cntn: int | None, vals: tuple[int, int, int, int] | None,
                      mtu: int) -> QpDelta | None:
        """Deltas of a QP that appeared since the previous sample, when they can be known."""
        if vals is not None and (r.device, r.port, cntn) not in self._cntns:
            # A counter allocated in this window has counted only this window.
            return QpDelta(st, vals[0], vals[1], vals[2], vals[3], QP_COUNTER, 0)
        if self.initial_psn is None:
            return None
        init = self.initial_psn
        return self._psn(st, init, init if r.rq_psn is not None else None, r, mtu)


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
