"""The collector against a simulated switch's real gNMI server with ``gnmi.congestion`` on: every
CongestionBatch's queue and PFC values equal the switch's at that instant, deltas are exact, a counter
clear is a RESET, and the interface CounterBatches still flow beside them.

The switch's queue and PFC counters are set here, tick by tick, in its ``SwitchState`` (the simulator's
counter source; the fabric engine does not model congestion yet): the server serves them as it would any
engine's, and the collector reaches it over gRPC as it would a switch.
"""

from __future__ import annotations

import time

import pytest
from gnmi_session_util import LoopThread, collect, fast_gnmi, run_session, stop_session
from gnmi_switches import make_switch
from waiting import wait_for

from flowtracer.collectors.gnmi.config import Encoding, Target
from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE, OK, RESET
from flowtracer.collectors.gnmi.session import TargetSession
from flowtracer.schemas.openconfig import PFC_COUNTERS, QUEUE_COUNTERS
from flowtracer.schemas.v1.counters_pb2 import CongestionBatch, CounterBatch
from flowtracer.sim.switches.server import GnmiServer
from flowtracer.sim.switches.state import Event, EventKind, PfcState, QueueState, SwitchState

QUEUE_FIELDS = tuple(c.replace("-", "_") for c in QUEUE_COUNTERS)
PFC_FIELDS = ("pause_frames_rx", "pause_frames_tx")
TICK_NS = 100_000_000
CLEAR_AT = 4  # the queue and PFC counters are cleared at this tick


def _tick(st: SwitchState, k: int, t0: int) -> dict[tuple[str, str], dict[str, int | None]]:
    """Advance the switch's congestion counters to tick ``k``; return what it now serves (the truth)."""
    with st.lock:
        for (iface, q), qs in st.queues.items():
            for i, c in enumerate(QUEUE_COUNTERS):
                qs.counters[c] = (k - CLEAR_AT + 1 if k >= CLEAR_AT else 10 + k) * (i + 1) * (3 if q == "3" else 1)
            qs.max_queue_len = 1000 * k if iface == "Ethernet3" else None
        for (_, prio), p in st.pfc.items():
            for i, c in enumerate(PFC_COUNTERS):
                p.counters[c] = (k - CLEAR_AT if k >= CLEAR_AT else 5 * k) * (i + 1) + prio
        st.timestamp_ns = ts = t0 + k * TICK_NS
        truth = _served(st)
    st.emit(Event(EventKind.SAMPLE, ts))
    return truth


def _served(st: SwitchState) -> dict[tuple[str, str], dict[str, int | None]]:
    """The queue and PFC values the switch serves now: (interface, queue or priority) -> leaf -> value."""
    with st.lock:
        truth: dict[tuple[str, str], dict[str, int | None]] = {
            (i, q): {**qs.counters, "wm": qs.max_queue_len} for (i, q), qs in st.queues.items()}
        truth |= {(i, f"pfc{p}"): dict(ps.counters) for (i, p), ps in st.pfc.items()}
    return truth


@pytest.mark.parametrize("encoding", [Encoding.PROTO, Encoding.JSON_IETF])
def test_congestion_batches_equal_the_switch_with_a_clear(encoding: Encoding) -> None:
    st = make_switch("leaf1")
    t0 = time.time_ns()
    with st.lock:
        for iface in ("Ethernet3", "Ethernet4"):
            for q in ("0", "3"):
                st.queues[(iface, q)] = QueueState(iface, q)
            st.pfc[(iface, 3)] = PfcState(iface, 3)
        st.timestamp_ns = t0
    truth = {t0: _served(st)}
    congestion: list[CongestionBatch] = []
    counters: list[CounterBatch] = []
    lt = LoopThread()
    with GnmiServer({"leaf1": st}) as srv:
        gnmi = fast_gnmi(0.1, encoding=encoding, congestion=True, congestion_interval=0.1, batch_grace=0.05)
        s = TargetSession(Target(name="leaf1", address="127.0.0.1", port=srv.port), gnmi, collector_id="t",
                          emit=collect(counters), emit_congestion=collect(congestion))
        fut = run_session(s, lt)
        try:
            wait_for(lambda: s.stats.state.value == "up", 10, "the session to sync")
            for k in range(1, 9):  # one tick at a time: each instant is served and collected before the next
                truth[t0 + k * TICK_NS] = _tick(st, k, t0)
                wait_for(lambda k=k: any(b.timestamp_ns == t0 + k * TICK_NS for b in congestion), 10,
                         f"the congestion batch of tick {k}")
        finally:
            stop_session(s, fut, lt)
            lt.close()
    assert s.stats.decode_errors == 0 and not s.stats.malformed
    checked = {OK: 0, RESET: 0, BASELINE: 0}
    prev: dict[tuple[str, str], dict[str, int | None]] = {}
    for b in sorted(congestion, key=lambda b: b.timestamp_ns):
        want = truth[b.timestamp_ns]
        assert {(q.interface, q.queue) for q in b.queues} == {("Ethernet3", "0"), ("Ethernet3", "3"),
                                                              ("Ethernet4", "0"), ("Ethernet4", "3")}
        for q in b.queues:
            w = want[(q.interface, q.queue)]
            assert q.has_max_queue_len == (w["wm"] is not None)
            assert q.max_queue_len_bytes == (w["wm"] or 0)
            for f, c in zip(QUEUE_FIELDS, QUEUE_COUNTERS, strict=True):
                cell = getattr(q, f)
                assert cell.value == w[c]
                if cell.status == OK:
                    assert cell.delta == w[c] - prev[(q.interface, q.queue)][c]
                    assert q.interval_ns == TICK_NS
                checked[cell.status] += 1
                if b.timestamp_ns == t0 + CLEAR_AT * TICK_NS:
                    assert cell.status == RESET and cell.delta == 0
        for p in b.pfc:
            w = want[(p.interface, f"pfc{p.priority}")]
            for f, c in zip(PFC_FIELDS, PFC_COUNTERS, strict=True):
                cell = getattr(p, f)
                assert cell.value == w[c]
                if cell.status == OK:
                    assert cell.delta == w[c] - prev[(p.interface, f"pfc{p.priority}")][c]
                checked[cell.status] += 1
        prev = want
    assert checked[OK] >= 5 * 4 * 6 and checked[RESET] >= 4 * 6
    assert counters, "the interface counters still flow"
