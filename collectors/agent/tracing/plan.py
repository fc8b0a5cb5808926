"""Which flows to trace, and when: new flows, contradicted flows, flows near a link that changed state,
retries of partial or failed traces (with back-off), and a slow periodic refresh.

Pure computation on a caller-supplied clock (ns). At most one trace per flow is in flight: a flow
handed out by ``due`` is not handed out again until ``finished`` (or ``abandon``) is called for it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from flowtracer.schemas.v1 import traces_pb2 as tpb


@dataclass(frozen=True, slots=True)
class TraceFlow:
    """One flow to trace: its id as the processor names it, where it starts, and its 5-tuple (UDP)."""

    flow_id: str  # "<host>:<rdma_device>/<lqpn>/<qp_generation>"
    host: str
    src_nic: str  # "<host>:<rdma_device>"
    src_leaf: str
    src_ip: str
    dst_ip: str
    udp_src_port: int
    udp_dst_port: int = 4791
    dst_leaf: str = ""  # the last switch hop; "" = unknown (then only port unreachable / max TTL stop)
    dst_qpn: int = 0  # the flow's destination QP (its BTH field); 0 = unknown
    #: Probes are RoCE-formed (UDP 4791 with a BTH carrying ``dst_qpn``) and stop at ``switch_hops`` (the switches
    #: on the way, from the topology), short of the destination NIC; set by the prober (``Prober.start``).
    bth: bool = False
    switch_hops: int = 0


@dataclass
class FlowPlan:
    """The planner's state of one flow."""

    flow: TraceFlow
    last_seen_ns: int
    due_ns: int | None  # when the next trace is due; None = nothing scheduled
    reason: int
    in_flight: bool = False
    failures: int = 0  # consecutive partial/failed traces
    switches: frozenset[str] = field(default_factory=frozenset)


class TracePlanner:
    """Decides which flows to trace next.

    Args:
        refresh_ns: re-trace a complete trace this old; a trace holds twice this long (``valid_until_ns``).
        retry_ns: first and longest wait before re-tracing a partial or failed trace (doubling).
        expire_ns: a flow not seen in ``observe`` for this long has ended (``expired`` returns it).
    """

    def __init__(self, refresh_ns: int, retry_ns: tuple[int, int] = (2_000_000_000, 120_000_000_000),
                 expire_ns: int = 60_000_000_000) -> None:
        self.refresh_ns = refresh_ns
        self.retry_ns = retry_ns
        self.expire_ns = expire_ns
        self.flows: dict[str, FlowPlan] = {}
        self._heap: list[tuple[int, str]] = []
        self._no_expiry_before_ns: int | None = None  # no flow can have expired before this (None: now)

    def _schedule(self, st: FlowPlan, at_ns: int, reason: int) -> None:
        if st.due_ns is not None and st.due_ns <= at_ns and st.reason != tpb.TRACE_REASON_REFRESH:
            return  # something sooner (and more telling) is already due
        st.due_ns, st.reason = at_ns, reason
        heapq.heappush(self._heap, (at_ns, st.flow.flow_id))

    def valid_until_ns(self, finished_ns: int) -> int:
        """Until when a trace that finished at ``finished_ns`` holds (ns since the epoch; stamped on the PathTrace
        for the processor): its refresh is due ``refresh_ns`` later, and the same again is grace for a refresh that
        waits for the budget or comes out partial. The one setting both sides follow is ``refresh_ns``."""
        return finished_ns + 2 * self.refresh_ns

    def observe(self, flows: Iterable[TraceFlow], now_ns: int) -> None:
        """The flows active in a window: new ones are due now; a changed 5-tuple is a new flow."""
        for f in flows:
            st = self.flows.get(f.flow_id)
            if st is None or st.flow != f:
                if st is not None and st.in_flight:
                    st.flow, st.last_seen_ns, st.due_ns = f, now_ns, None  # re-traced when the running one ends
                    self._schedule(st, now_ns, tpb.TRACE_REASON_NEW_FLOW)
                    continue
                st = self.flows[f.flow_id] = FlowPlan(f, now_ns, None, tpb.TRACE_REASON_NEW_FLOW)
                self._schedule(st, now_ns, tpb.TRACE_REASON_NEW_FLOW)
            else:
                st.last_seen_ns = now_ns
        if self._no_expiry_before_ns is not None:
            self._no_expiry_before_ns = min(self._no_expiry_before_ns, now_ns + self.expire_ns)

    def expired(self, now_ns: int) -> list[str]:
        """Flows not seen for ``expire_ns``: forgotten here; the caller publishes their tombstones.

        Cheap when called often: the flows are scanned only once the oldest ``last_seen_ns`` of the last
        scan can have expired (``observe`` only moves ``last_seen_ns`` later)."""
        if self._no_expiry_before_ns is not None and now_ns < self._no_expiry_before_ns:
            return []
        gone = [fid for fid, st in self.flows.items() if now_ns - st.last_seen_ns >= self.expire_ns]
        for fid in gone:
            del self.flows[fid]
        self._no_expiry_before_ns = min((st.last_seen_ns for st in self.flows.values()), default=now_ns) \
            + self.expire_ns
        return gone

    def mark_contradicted(self, flow_id: str, now_ns: int) -> bool:
        """Counters contradict this flow's traced path: re-trace it now. False if the flow is unknown."""
        st = self.flows.get(flow_id)
        if st is None:
            return False
        st.failures = 0
        self._schedule(st, now_ns, tpb.TRACE_REASON_CONTRADICTION)
        return True

    def link_changed(self, switches: Iterable[str], now_ns: int) -> int:
        """A link between ``switches`` changed state: re-trace every flow whose last trace passed through
        one of them (the link was on its path, or an ECMP group on its path shrank or grew). Returns
        how many flows were scheduled."""
        touched = frozenset(switches)
        n = 0
        for st in self.flows.values():
            if st.switches & touched:
                st.failures = 0
                self._schedule(st, now_ns, tpb.TRACE_REASON_LINK_CHANGE)
                n += 1
        return n

    def due(self, now_ns: int, limit: int) -> list[tuple[TraceFlow, int]]:
        """Up to ``limit`` (flow, reason) whose trace is due, oldest first; they are now in flight."""
        out: list[tuple[TraceFlow, int]] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ns and len(out) < limit:
            at, fid = heapq.heappop(heap)
            st = self.flows.get(fid)
            if st is None or st.due_ns != at:
                continue  # stale entry
            if st.in_flight:
                continue  # rescheduled by finished()
            st.in_flight, st.due_ns = True, None
            out.append((st.flow, st.reason))
        return out

    def next_due_ns(self) -> int | None:
        """When the earliest scheduled trace is due (None: nothing scheduled)."""
        while self._heap:
            at, fid = self._heap[0]
            st = self.flows.get(fid)
            if st is not None and st.due_ns == at and not st.in_flight:
                return at
            heapq.heappop(self._heap)
        return None

    def finished(self, trace: tpb.PathTrace, now_ns: int) -> None:
        """A trace ended: schedule the flow's retry (partial/failed, back-off) or refresh (complete)."""
        st = self.flows.get(trace.flow_id)
        if st is None:
            return
        st.in_flight = False
        pending, pending_reason = st.due_ns, st.reason  # asked for while in flight (contradiction, link change)
        got = frozenset(h.switch for h in trace.hops if h.switch)
        if got:
            st.switches = got | {st.flow.src_leaf}
        if trace.status == tpb.TRACE_STATUS_COMPLETE:
            st.failures = 0
            st.due_ns = None
            self._schedule(st, now_ns + self.refresh_ns, tpb.TRACE_REASON_REFRESH)
        else:
            wait = min(self.retry_ns[1], self.retry_ns[0] << min(st.failures, 30))
            st.failures += 1
            st.due_ns = None
            self._schedule(st, now_ns + wait, tpb.TRACE_REASON_RETRY)
        if pending is not None:
            st.due_ns = None
            self._schedule(st, max(now_ns, pending), pending_reason)

    def in_flight(self) -> int:
        """Traces handed out and not finished."""
        return sum(st.in_flight for st in self.flows.values())

    def snapshot(self) -> Mapping[str, FlowPlan]:
        """The planner's per-flow state (read only; for tests and metrics)."""
        return self.flows
