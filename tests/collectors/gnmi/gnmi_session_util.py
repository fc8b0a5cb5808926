"""Test helpers: run TargetSessions / a CollectorService in a background event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Sized
from typing import Any

from gnmi_switches import Ticker
from waiting import wait_for

from flowtracer.collectors.gnmi.config import Backoff, Gnmi, Subscription, Target
from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE, GAP, OK, STATUS_NAMES, WRAPPED
from flowtracer.collectors.gnmi.counters.columns import EncodedBatch
from flowtracer.collectors.gnmi.session import TargetSession
from flowtracer.schemas.v1.counters_pb2 import CounterBatch, OperStatus
from flowtracer.sim.switches.state import INTERFACE_COUNTERS

IF_FIELDS = ("in_octets", "out_octets", "in_pkts", "out_pkts", "in_unicast_pkts", "out_unicast_pkts",
             "in_discards", "out_discards", "in_errors", "out_errors")
NH_FIELDS = ("octets_forwarded", "packets_forwarded")
#: Statuses whose delta is the exact increase since the previous sample (GAP: over a longer span than expected).
EXACT = (OK, GAP, WRAPPED)


def fast_gnmi(interval_s: float = 0.2, **kw: Any) -> Gnmi:
    """Default subscriptions at ``interval_s``; quick backoff for tests."""
    subs = [Subscription(**{**s.model_dump(), "sample_interval": interval_s}) for s in Gnmi().subscriptions]
    base = {"subscriptions": subs, "backoff": Backoff(base=0.2, cap=1.0, reset_after=5.0, slow_retry=3.0),
            "start_spread": 0.0, "batch_grace": 0.05}
    return Gnmi(**{**base, **kw})


class LoopThread:
    """An asyncio loop in a thread, for running sessions next to blocking test code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def submit(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[[], Any]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def run_session(session: TargetSession, lt: LoopThread) -> Any:
    return lt.submit(session.run())


def stop_session(session: TargetSession, fut: Any, lt: LoopThread, timeout: float = 10,
                 emitted: Sized = ()) -> int:
    """Stop ``session`` on its own loop and wait until it ended; how many items ``emitted`` (the list its ``emit``
    appends to) held when the stop took effect.

    Those the collector closed by its own rules (a newer instant, sync_response, the grace timer): what a test
    judges. What comes after is the instant that was open at the stop, flushed with whatever of it had been read
    (cut short when the stop lands between an instant's notifications, as it does on a busy machine): a test that
    judges instants as wholes leaves it out."""
    before: concurrent.futures.Future[int] = concurrent.futures.Future()

    def stop() -> None:  # on the loop that runs emit: nothing is emitted between the count and the stop
        before.set_result(len(emitted))
        session.stop()

    lt.call(stop)
    fut.result(timeout)
    return before.result(timeout)


def collect_batches(target: Target, gnmi: Gnmi, n: int, timeout: float = 10) -> tuple[list[CounterBatch],
                                                                                      TargetSession]:
    """Run one session until it emitted ``n`` CounterBatches, stop it; the batches it emitted before the stop (at
    least ``n``; not the instant flushed on stop, see ``stop_session``) and the session (its stats)."""
    batches: list[CounterBatch] = []
    lt = LoopThread()
    s = TargetSession(target, gnmi, collector_id="t", emit=collect(batches))
    fut = run_session(s, lt)
    try:
        wait_for(lambda: len(batches) >= n, timeout, f"{n} batches from {target.name}")
    finally:
        whole = stop_session(s, fut, lt, emitted=batches)
        lt.close()
    return batches[:whole], s


def collect(into: list[Any]) -> Callable[[Any], None]:
    """A session's ``emit`` that keeps each batch as its message: a session emits a CounterBatch (or
    CongestionBatch) or, from its columnar path, the serialized bytes of one (``EncodedBatch``)."""
    def emit(b: Any) -> None:
        into.append(b.message() if isinstance(b, EncodedBatch) else b)
    return emit


def compact(b: CounterBatch, t0: int = 0) -> dict[str, Any]:
    """A CounterBatch as the golden files write it: counters as [value, delta, status]."""
    d: dict[str, Any] = {"timestamp_ns": b.timestamp_ns - t0, "session": b.session, "sequence": b.sequence}
    ifs = {}
    for i in b.interfaces:
        e: dict[str, Any] = {"interval_ns": i.interval_ns}
        if i.last_clear_ns:
            e["last_clear_ns"] = i.last_clear_ns
        if i.oper_status:
            e["oper_status"] = OperStatus.Name(i.oper_status).removeprefix("OPER_STATUS_")
        for f in IF_FIELDS:
            if i.HasField(f):
                c = getattr(i, f)
                e[f] = [c.value, c.delta, STATUS_NAMES[c.status]]
        ifs[i.name] = e
    nhs = {}
    for n in b.next_hops:
        e = {"index": n.index, "group": n.group, "weight": n.weight, "interval_ns": n.interval_ns}
        for f in NH_FIELDS:
            if n.HasField(f):
                c = getattr(n, f)
                e[f] = [c.value, c.delta, STATUS_NAMES[c.status]]
        nhs[f"{n.egress_interface}|{n.next_hop_ip}"] = e
    if ifs:
        d["interfaces"] = ifs
    if nhs:
        d["next_hops"] = nhs
    return d


def check_against_truth(batches: list[CounterBatch], ticker: Ticker) -> int:
    """Every value equals the switch's at the batch's timestamp and every OK/GAP delta the difference to the
    switch's value one ``interval_ns`` earlier; the number of deltas checked."""
    checked = 0
    for b in batches:
        ifs, nhs = ticker.truth[b.timestamp_ns][b.switch]
        for i in b.interfaces:
            for f, name in zip(IF_FIELDS, INTERFACE_COUNTERS, strict=True):
                c = getattr(i, f)
                assert c.value == ifs[i.name][name]
                if c.status in (OK, GAP):
                    prev = ticker.truth[b.timestamp_ns - i.interval_ns][b.switch][0]
                    assert c.delta == ifs[i.name][name] - prev[i.name][name]
                    checked += 1
                else:
                    assert c.status == BASELINE
        for n in b.next_hops:
            assert (n.octets_forwarded.value, n.packets_forwarded.value) == nhs[n.index]
            if n.octets_forwarded.status == OK:
                prev_nh = ticker.truth[b.timestamp_ns - n.interval_ns][b.switch][1]
                assert n.octets_forwarded.delta == nhs[n.index][0] - prev_nh[n.index][0]
                checked += 1
        assert {n.egress_interface for n in b.next_hops} == {"Ethernet3", "Ethernet4"}
    return checked
