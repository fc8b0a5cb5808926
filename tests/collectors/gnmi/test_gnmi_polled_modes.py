"""POLL, ONCE and Get targets against the simulated gNMI server, next to a STREAM target of the same switch:
every value equals the switch's at the batch's timestamp, every delta is exact, and a polled delta equals the
sum of the STREAM deltas over the same span (the same link load, read less often)."""

from __future__ import annotations

import pytest
from gnmi_session_util import (
    EXACT,
    IF_FIELDS,
    LoopThread,
    check_against_truth,
    collect,
    fast_gnmi,
    run_session,
    stop_session,
)
from gnmi_switches import Ticker, make_switch
from waiting import wait_for

from flowtracer.collectors.gnmi.config import Target, TargetMode
from flowtracer.collectors.gnmi.session import TargetSession
from flowtracer.schemas.v1.counters_pb2 import CounterBatch
from flowtracer.sim.switches.server import GnmiServer

TICK_S = 0.1
INTERVAL_S = 0.3  # three ticks: a polled delta spans several STREAM deltas


def _stream_sums(stream: list[CounterBatch]) -> dict[tuple[str, str], dict[int, tuple[int, int]]]:
    """(interface, field) -> timestamp -> (run, sum of the STREAM's deltas in that run up to it).

    A run is a chain of exact deltas: OK, and GAP, which is exact too (the switch's tick came late, as the first one
    does when the server was slow to start, or any on a busy machine). A BASELINE or RESET starts a new run: the
    increase across it is unknown, so no polled delta is compared over it."""
    out: dict[tuple[str, str], dict[int, tuple[int, int]]] = {}
    for b in sorted(stream, key=lambda b: b.timestamp_ns):
        for i in b.interfaces:
            for f in IF_FIELDS:
                c = getattr(i, f)
                acc = out.setdefault((i.name, f), {})
                run, total = acc[max(acc)] if acc else (-1, 0)
                acc[b.timestamp_ns] = (run, total + c.delta) if c.status in EXACT else (run + 1, 0)
    return out


@pytest.mark.parametrize("mode", [TargetMode.POLL, TargetMode.ONCE, TargetMode.GET])
def test_polled_mode_gives_the_stream_s_values_and_deltas(mode: TargetMode) -> None:
    st = make_switch("leaf1")
    streamed: list[CounterBatch] = []
    polled: list[CounterBatch] = []
    lt = LoopThread()
    with GnmiServer({"leaf1": st}) as srv, Ticker([st], TICK_S) as ticker:
        gnmi = fast_gnmi(TICK_S, batch_grace=0.3)
        stream = TargetSession(Target(name="leaf1", address="127.0.0.1", port=srv.port), gnmi,
                               collector_id="t", emit=collect(streamed))
        poller = TargetSession(Target(name="leaf1", address="127.0.0.1", port=srv.port, mode=mode,
                                      interval=INTERVAL_S), gnmi, collector_id="t", emit=collect(polled))
        futs = [run_session(s, lt) for s in (stream, poller)]
        whole: list[int] = []
        try:
            wait_for(lambda: len(polled) >= 7, 15, f"7 {mode.value} batches")
        finally:
            for s, f, out in zip((stream, poller), futs, (streamed, polled), strict=True):
                whole.append(stop_session(s, f, lt, emitted=out))
            lt.close()
    assert poller.stats.decode_errors == 0 and not poller.stats.malformed and poller.stats.session == 1
    # The instant flushed on stop may be cut short (interfaces without next hops): not judged.
    streamed, polled = streamed[:whole[0]], polled[:whole[1]]
    assert check_against_truth(polled, ticker) >= 5 * 4 * len(IF_FIELDS)
    check_against_truth(streamed, ticker)
    sums = _stream_sums(streamed)
    compared = several = 0
    for b in polled:
        for i in b.interfaces:
            for f in IF_FIELDS:
                c = getattr(i, f)
                acc = sums[(i.name, f)]
                start, end = b.timestamp_ns - i.interval_ns, b.timestamp_ns
                if c.status not in EXACT or start not in acc or end not in acc or acc[start][0] != acc[end][0]:
                    continue
                assert c.delta == acc[end][1] - acc[start][1], (mode, i.name, f)
                compared += 1
                several += any(start < t < end for t in acc)
    assert compared >= 3 * 4 * len(IF_FIELDS)
    # Read every interval, not every tick: polled deltas span several STREAM deltas. Counted, not timed: how many
    # ticks one spans depends on when its round ran (a round that ran late leaves the next a single tick).
    assert several >= 4 * len(IF_FIELDS)


def test_get_on_a_switch_without_get_is_one_clear_configuration_error() -> None:
    st = make_switch("leaf1")
    lt = LoopThread()
    with GnmiServer({"leaf1": st}, serve_get=False) as srv, Ticker([st], TICK_S):
        s = TargetSession(Target(name="leaf1", address="127.0.0.1", port=srv.port, mode=TargetMode.GET,
                                 interval=INTERVAL_S), fast_gnmi(TICK_S), collector_id="t", emit=lambda b: None)
        fut = run_session(s, lt)
        try:
            wait_for(lambda: bool(s.stats.failures), 10, "the failed Get")
        finally:
            stop_session(s, fut, lt)
            lt.close()
    assert s.stats.last_error_class == "config" and "UNIMPLEMENTED" in s.stats.last_error
    assert "does not serve Get" in s.stats.last_error and "\n" not in s.stats.last_error
    assert s.stats.batches == 0
