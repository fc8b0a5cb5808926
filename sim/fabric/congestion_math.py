"""The congestion model's formulas: RED marking, DCQCN's onset transient and fixed point, offered load.

Pure functions over numpy arrays, no state; ``congestion.py`` applies them per port and tick.
Equations and defaults: docs/congestion.md. Rates are wire bit/s, queues bytes, times seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class CongestionParams:
    """Thresholds and DCQCN constants (defaults: DCQCN paper, Zhu et al. SIGCOMM 2015, scaled to 400G buffers)."""

    pfc: bool = True
    kmin: float = 150e3  # bytes: RED/ECN marking starts
    kmax: float = 1.5e6  # bytes: marking probability reaches pmax; every packet is marked above
    pmax: float = 0.1
    xoff: float = 3e6  # bytes: PFC pauses the feeding ports (PFC on)
    buffer: float = 3e6  # bytes: tail drop (PFC off)
    cnp_interval: float = 50e-6  # s: at most one CNP per flow per interval (np_min_time_between_cnps)
    rate_ai: float = 40e6  # bit/s: DCQCN additive increase per rate timer
    rate_timer: float = 55e-6  # s: DCQCN rate increase timer
    recovery: float = 275e-6  # s: a port idle this long lets senders recover line rate (5 timers)
    ack_timeout: float = 4.096e-6 * 2**20  # s: the QP's local ACK timeout (NCCL_IB_TIMEOUT=20)
    rtt: float = 10e-6  # s: in flight behind a dropped packet (out-of-sequence packets)


@dataclass
class ActiveFlows:
    """Data flows with something to send over one stretch of constant rates, as flat arrays.

    Entries are (flow, hop) pairs, contiguous per flow in path order, so the hop upstream of entry
    ``e`` is entry ``e - 1`` whenever ``entry_hop[e] > 0``.
    """

    ids: list[int]
    path_len: npt.NDArray[np.intp]
    entry_flow: npt.NDArray[np.intp]
    entry_link: npt.NDArray[np.intp]
    entry_hop: npt.NDArray[np.intp]
    src_nic: npt.NDArray[np.intp]
    dst_nic: npt.NDArray[np.intp]
    offered: npt.NDArray[np.float64]  # wire bit/s the flow would send at its NIC's fair share
    rate: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))  # wire bit/s it gets


def red_probability(q: float, p: CongestionParams) -> float:
    """RED/ECN marking probability at queue depth ``q`` bytes."""
    if q < p.kmin:
        return 0.0
    if q > p.kmax:
        return 1.0
    return p.pmax * (q - p.kmin) / (p.kmax - p.kmin)


def onset_transient(arrival: float, capacity: float, p: CongestionParams) -> tuple[float, int]:
    """Queue peak (bytes) and rate cuts of an onset: senders arriving at ``arrival`` bit/s into
    ``capacity`` all halve their rate once per CNP interval (DCQCN's first cut, alpha = 1) until
    they fit; the queue grows by the excess meanwhile."""
    peak, cuts, a = 0.0, 0, arrival
    while a > capacity * (1 + 1e-9) and cuts < 64:
        peak += (a - capacity) * p.cnp_interval / 8
        a /= 2
        cuts += 1
    return peak, cuts


def entry_offered(fs: ActiveFlows, capacity: npt.NDArray[np.float64], n_links: int) -> npt.NDArray[np.float64]:
    """What each flow offers each link of its path (wire bit/s): its NIC share at the first hop, then
    scaled down by every oversubscribed link before (a FIFO serves its inputs in proportion to their
    arrival rates), so a port downstream of a bottleneck sees at most that bottleneck's capacity."""
    eo = fs.offered[fs.entry_flow].astype(np.float64)
    up = np.flatnonzero(fs.entry_hop > 0)
    for _ in range(int(fs.path_len.max(initial=1)) - 1):  # one pass per hop settles every hop in order
        load = np.bincount(fs.entry_link, eo, minlength=n_links)
        scale = np.minimum(1.0, capacity / np.maximum(load, 1e-9))
        eo[up] = eo[up - 1] * scale[fs.entry_link[up - 1]]
    return eo


def steady_marking(rate: npt.NDArray[np.float64], pkt: int, p: CongestionParams) -> tuple[
        npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """DCQCN fixed point for flows of ``rate`` bit/s: (marking probability per packet, queue bytes).

    Per CNP interval tau a flow's rate rises by R_AI * tau / T and a CNP cuts it by R * alpha / 2 with
    alpha ~ P(CNP in an interval) = Pc, so the balance is Pc^2 R / 2 = R_AI tau / T, Pc = sqrt(2 R_AI
    tau / (T R)); a flow sends n = R tau / (8 pkt) packets per interval, so 1 - (1 - p)^n = Pc gives the
    per-packet marking probability p, and RED's line the queue depth that marks with p.
    """
    r = np.maximum(rate, 1.0)
    pc = np.minimum(1.0, np.sqrt(2 * p.rate_ai * p.cnp_interval / (p.rate_timer * r)))
    n = np.maximum(r * p.cnp_interval / (8 * pkt), 1.0)
    prob = -np.expm1(np.log1p(-np.minimum(pc, 1 - 1e-12)) / n)
    q = np.where(prob >= p.pmax, p.kmax, p.kmin + prob / p.pmax * (p.kmax - p.kmin))
    return prob, q


def largest_remainder(total: int, share: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Split ``total`` whole units by ``share`` (largest remainder), so the parts sum to ``total``."""
    if len(share) == 0:
        return np.zeros(0, dtype=np.int64)
    w = share / share.sum() * total
    base = np.floor(w).astype(np.int64)
    rest = total - int(base.sum())
    if rest:
        base[np.argsort(-(w - base), kind="stable")[:rest]] += 1
    return base
