"""The agent's tracer: planner + prober on a thread, finished traces and tombstones to a publisher.

``observe`` (each window's active flows), ``mark_contradicted`` and ``link_changed`` may be called
from any thread. ``link_changed`` is called by the agent's ``GroupWatch`` when the processor's
ecmp-groups topic says a switch's groups changed; ``mark_contradicted`` by its ``RequestWatch`` when the
processor's trace-requests topic names a flow whose trace the counters contradict (docs/tracing.md).
Every published trace carries ``valid_until_ns`` (``TracePlanner.valid_until_ns``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from flowtracer.collectors.agent.tracing.plan import TraceFlow, TracePlanner
from flowtracer.collectors.agent.tracing.trace import Prober
from flowtracer.schemas.v1 import traces_pb2 as tpb

log = logging.getLogger(__name__)

#: ``publish(flow_id, src_leaf, trace)``; ``trace`` None = the flow ended (a tombstone).
Publish = Callable[[str, str, "tpb.PathTrace | None"], None]


class Tracer:
    """Traces the flows it is told about, within the prober's budget; see the module docstring.

    ``max_concurrent`` bounds the traces in progress at once (each holds one socket on the kernel
    transport).
    """

    def __init__(self, prober: Prober, planner: TracePlanner, publish: Publish, max_concurrent: int = 64) -> None:
        self.prober = prober
        self.planner = planner
        self.publish = publish
        self.max_concurrent = max_concurrent
        self.clock = prober.clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._leaf: dict[str, str] = {}
        self.traces = 0
        self.completed = 0

    def observe(self, flows: Iterable[TraceFlow]) -> None:
        """The flows active in the latest window (new ones are traced, unseen ones expire)."""
        flows = list(flows)
        with self._lock:
            for f in flows:
                self._leaf[f.flow_id] = f.src_leaf
            self.planner.observe(flows, self.clock())
        self._wake.set()

    def mark_contradicted(self, flow_id: str) -> bool:
        """The flow's counters contradict its traced path: re-trace it now (False: unknown flow)."""
        with self._lock:
            ok = self.planner.mark_contradicted(flow_id, self.clock())
        self._wake.set()
        return ok

    def link_changed(self, switches: Iterable[str]) -> int:
        """A link between ``switches`` (both ends' switch names) went down or up: re-trace every flow
        whose path passed through either; returns how many."""
        with self._lock:
            n = self.planner.link_changed(switches, self.clock())
        self._wake.set()
        return n

    def step(self, max_wait_s: float) -> list[tpb.PathTrace]:
        """One round: publish tombstones of ended flows, start due traces, probe, publish finished ones."""
        with self._lock:
            now = self.clock()
            for fid in self.planner.expired(now):
                self.publish(fid, self._leaf.pop(fid, ""), None)
            room = self.max_concurrent - self.prober.busy()
            due = self.planner.due(now, room) if room > 0 else []
        done = [t for f, reason in due if (t := self.prober.start(f, reason)) is not None]
        done += self.prober.run_once(max_wait_s)
        with self._lock:
            now = self.clock()
            for t in done:
                t.valid_until_ns = self.planner.valid_until_ns(t.finished_ns)
                self.planner.finished(t, now)
                self.traces += 1
                self.completed += t.status == tpb.TRACE_STATUS_COMPLETE
                self.publish(t.flow_id, t.src_leaf, t)
        return done

    def idle(self) -> bool:
        """Nothing in progress and nothing due now."""
        with self._lock:
            nxt = self.planner.next_due_ns()
            return not self.prober.busy() and (nxt is None or nxt > self.clock())

    def run_until_idle(self, max_s: float) -> list[tpb.PathTrace]:
        """Step until nothing is in progress or due (at most ``max_s`` seconds); the traces that finished."""
        out: list[tpb.PathTrace] = []
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline:
            out += self.step(0.05)
            if self.idle():
                break
        return out

    def start(self) -> Tracer:
        """Run on a daemon thread until ``close``."""
        self._thread = threading.Thread(target=self._run, name="agent-tracer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step(0.05)
            except Exception:  # a bad answer must not end tracing for the host
                log.exception("tracer step failed")
                self._stop.wait(1.0)
            if self.idle():
                with self._lock:
                    nxt = self.planner.next_due_ns()
                wait = 0.5 if nxt is None else min(0.5, max(0.0, (nxt - self.clock()) / 1e9))
                self._wake.wait(wait)
                self._wake.clear()

    def close(self) -> None:
        """Stop the thread; traces in progress are dropped."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
