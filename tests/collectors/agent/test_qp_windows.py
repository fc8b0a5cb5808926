"""Per-window deltas: PSN wrap, QP generations, counter resets, PSN error bounds, port totals."""

from __future__ import annotations

import random

import numpy as np

from flowtracer.collectors.agent.port_windows import PortTracker
from flowtracer.collectors.agent.psn_bounds import psn_bounds, psn_delta
from flowtracer.collectors.agent.qp_rows import PSN_ESTIMATE, QP_COUNTER, QpDelta, QpState, QpWindow
from flowtracer.collectors.agent.qp_windows import QpTracker
from flowtracer.collectors.agent.sources.rdma_json import QpBytes, QpColumns, QpCounter, QpRecord, per_qp_counters
from flowtracer.fabric.roce import rocev2_udp_sport

MTU, H = 4096, 62


def qp(lqpn: int, sq: int, rq: int = 0, rqpn: int = 900, pid: int = 7, qp_type: str = "RC") -> QpRecord:
    return QpRecord("mlx5_0", 1, lqpn, rqpn, qp_type, "RTS", rq, sq, pid, "python3")


def ctr(lqpn: int, cntn: int, tx: int, pkts: int) -> dict[tuple[str, int, int], QpBytes]:
    return per_qp_counters([QpCounter("mlx5_0", 1, cntn, "RC", 7, "python3",
                                      {"rdma_tx_bytes": tx, "rdma_tx_packets": pkts,
                                       "rdma_rx_bytes": 0, "rdma_rx_packets": 0}, (lqpn,))])


def window(t: QpTracker, recs: list[QpRecord], counters: dict[tuple[str, int, int], QpBytes] | None,
           now_ns: int) -> QpWindow:
    return t.update_columns(QpColumns.from_records(recs), counters, now_ns)


def deltas(t: QpTracker, w: QpWindow) -> list[QpDelta]:
    """The window's rows, for reading in asserts."""
    cols = [c.tolist() for c in (w.tx_bytes, w.rx_bytes, w.tx_packets, w.rx_packets, w.byte_source, w.error_bound)]
    return [QpDelta(st, *row) for st, row in zip(w.qps.states(t.port_keys), zip(*cols, strict=True), strict=True)]


def live(t: QpTracker) -> dict[int, QpState]:
    """The tracker's live QP generations by lqpn."""
    return {s.lqpn: s for s in t.rows.states(t.port_keys)}


def test_issue_sport_example_and_symmetry() -> None:
    assert rocev2_udp_sport(0x1A2, 0x3B4) == 52208 == rocev2_udp_sport(0x3B4, 0x1A2)


def test_psn_delta_wraps_at_24_bits() -> None:
    assert psn_delta(100, 16777000) == 316
    assert psn_delta(5, 5) == 0


def test_psn_estimate_across_a_wrap() -> None:
    t = QpTracker()
    assert deltas(t, window(t, [qp(10, 16777000, rq=16777200)], None, 1)) == []  # baseline
    (d,) = deltas(t, window(t, [qp(10, 100, rq=50)], None, 2))
    assert (d.tx_packets, d.rx_packets) == (316, 66)
    assert (d.tx_bytes, d.byte_source) == (316 * (MTU + H), PSN_ESTIMATE)


def test_not_flows_loopback_ud_and_portless() -> None:
    t = QpTracker()
    recs = [qp(10, 0, rqpn=10), qp(11, 0, rqpn=None, qp_type="UD"), QpRecord("mlx5_0", 0, 12, 5, "RC", "INIT",
                                                                             0, 0, 7, "x")]
    window(t, recs, None, 1)
    assert deltas(t, window(t, [r._replace(sq_psn=9) for r in recs], None, 2)) == [] and live(t) == {}


def test_a_reused_lqpn_is_a_new_generation_that_inherits_nothing() -> None:
    t = QpTracker()
    window(t, [qp(10, 1000, rqpn=900)], ctr(10, 4, 10_000, 10), 1)
    gen1 = live(t)[10].generation
    # lqpn 10 was destroyed and created again towards another peer, with a new counter.
    (d,) = deltas(t, window(t, [qp(10, 50, rqpn=901)], ctr(10, 5, 700, 1), 2))
    assert live(t)[10].generation == 2 != gen1
    assert (d.tx_bytes, d.byte_source) == (700, QP_COUNTER)  # its own new counter, not 700 - 10000
    # Same numbers, but the QP vanished for a sample: also a new generation (baseline without counters).
    window(t, [], None, 3)
    assert deltas(t, window(t, [qp(10, 60, rqpn=901)], None, 4)) == []
    assert live(t)[10].generation == 4
    # With a known initial PSN the first window of a new QP is counted from it.
    t2 = QpTracker(initial_psn=0)
    window(t2, [], None, 1)
    (d,) = deltas(t2, window(t2, [qp(20, 3)], None, 2))
    assert d.tx_packets == 3


def test_counter_deltas_exact_and_reset_falls_back_to_psn() -> None:
    t = QpTracker()
    window(t, [qp(10, 0)], ctr(10, 4, 1000, 1), 1)
    (d,) = deltas(t, window(t, [qp(10, 5)], ctr(10, 4, 21_000, 6), 2))
    assert (d.tx_bytes, d.tx_packets, d.byte_source, d.error_bound) == (20_000, 5, QP_COUNTER, 0)
    (d,) = deltas(t, window(t, [qp(10, 7)], ctr(10, 4, 100, 1), 3))  # went down: cleared
    assert (d.byte_source, d.tx_packets) == (PSN_ESTIMATE, 2)
    (d,) = deltas(t, window(t, [qp(10, 8)], ctr(10, 4, 4258, 2), 4))
    assert (d.tx_bytes, d.byte_source) == (4158, QP_COUNTER)


def bounds(w: QpWindow, port_bytes: int, port_packets: int) -> list[int]:
    """The error bound (bytes) of each delta of one port's window, every one a PSN estimate here."""
    assert (w.byte_source == PSN_ESTIMATE).all()
    return psn_bounds(w.tx_bytes, w.tx_packets, np.ones(len(w), dtype=bool), MTU, H, port_bytes,
                      port_packets).tolist()


def test_psn_error_bound_holds_and_uses_the_port_totals() -> None:
    rng = random.Random(11)
    for _ in range(200):
        t = QpTracker()
        n = rng.randrange(1, 6)
        window(t, [qp(100 + i, 0) for i in range(n)], None, 1)
        # Each QP sends messages of random sizes (some tiny, like NCCL's 64-byte clear-to-send writes).
        pk, true = [], []
        for _ in range(n):
            sizes = [rng.choice([64, 4096 * 64, rng.randrange(1, 1 << 20)]) for _ in range(rng.randrange(1, 40))]
            p = sum(-(-s // MTU) for s in sizes)
            pk.append(p)
            true.append(sum(sizes) + p * H)
        other = rng.choice([0, 0, 5])  # unseen packets on the port (ACKs, UD ...)
        w = window(t, [qp(100 + i, pk[i]) for i in range(n)], None, 2)
        port_bytes = sum(true) + other * 70
        for d, b, tr in zip(deltas(t, w), bounds(w, port_bytes, sum(pk) + other), true, strict=True):
            assert abs(d.tx_bytes - tr) <= b, (d, b, tr)
            assert b <= d.tx_packets * (MTU - 1) or b == d.tx_packets * 20
    # One big flow alone on its port: the bound is the real overcount plus the extension-header margin.
    t = QpTracker()
    window(t, [qp(1, 0)], None, 1)
    w = window(t, [qp(1, 1000)], None, 2)
    true = 999 * MTU + 10 + 1000 * H
    assert bounds(w, true, 1000) == [(MTU - 10) + 4 + 20 * 1000]


def test_port_tracker_deltas_resets_and_brackets() -> None:
    p = PortTracker()
    assert p.update({("d", 1): (100, 10, 1, 1)}) == []
    (d,) = p.update({("d", 1): (300, 30, 5, 2)}, before={("d", 1): (250, 20, 4, 2)})
    assert (d.tx_bytes, d.rx_bytes, d.tx_packets, d.rx_packets) == (200, 20, 4, 1)
    assert (d.tx_bytes_lower, d.tx_packets_upper) == (150, 4)
    assert p.update({("d", 1): (5, 0, 0, 0)}) == [] and p.resets == 1  # counters cleared: new baseline
