"""The prober: runs many traces at once over a transport, one probe in flight per flow.

A trace sends TTL 1, 2, ... probes carrying exactly the flow's 5-tuple (RoCE-formed with ``ProbeConfig.roce``:
a BTH with the flow's destination QP too, so a switch hashing on it places the probe like the flow; such a
trace never probes past the destination leaf, ``TraceFlow.switch_hops``, so no probe reaches the
destination NIC, docs/tracing.md); each answered probe names
the hop that dropped it (ICMP time exceeded from the switch's ingress-port address, mapped to
``(switch, port)`` with ``schemas.addressing.port_by_address``). Per TTL: a timeout and at most
``retries`` retries, then the hop is recorded unanswered and the next TTL is probed. A trace stops
at the destination's leaf (the last switch hop), at a port unreachable from the destination, or at
``max_ttl``. Probes leave within the host budget (``budget.TokenBucket``) and the per-destination
pacing (``budget.RateGovernor``), which halves on signs of ICMP rate limiting.

Pure apart from the transport: the clock is passed in, so the core runs in tests on a fake clock
with a fake transport; ``udp_probe`` (kernel sockets) and ``sim_probe`` (the simulator's responder)
are the real transports.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from flowtracer.collectors.agent.tracing.budget import RateGovernor, TokenBucket
from flowtracer.collectors.agent.tracing.plan import TraceFlow
from flowtracer.schemas.v1 import traces_pb2 as tpb

log = logging.getLogger(__name__)

ICMP_TIME_EXCEEDED = 11
ICMP_DEST_UNREACH = 3
ICMP_PORT_UNREACH = 3


@dataclass(frozen=True, slots=True)
class Answer:
    """An ICMP error that came back for the probe ``token``: who sent it (IPv4), its type and code, and
    when it arrived (ns, the prober's clock)."""

    token: int
    address: str
    icmp_type: int
    icmp_code: int
    at_ns: int


class Transport(Protocol):
    """How probes leave and answers come back (kernel UDP sockets, or the simulator's responder)."""

    def open(self, flow: TraceFlow) -> object:
        """Prepare to probe ``flow`` (e.g. a socket bound to its source address and port); OSError if not."""
        ...

    def send(self, handle: object, ttl: int, token: int) -> None:
        """Send one probe of ``flow`` with IP TTL ``ttl``; ``token`` comes back in its ``Answer``."""
        ...

    def close(self, handle: object) -> None: ...

    def poll(self, timeout_s: float) -> list[Answer]:
        """Answers that arrived, waiting at most ``timeout_s`` seconds for the first."""
        ...

    # Optional: ``collect(wait_s) -> list[Answer]``: wait ``wait_s`` without waking for answers, then
    # return all that arrived, each stamped with its arrival time (kernel receive timestamps). The
    # prober uses it while the budget is spent, when an answer could only queue for a token anyway.


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    """Per-trace knobs. ``timeout_ns``: wait for one probe's answer; ``retries``: extra probes per TTL; ``roce``:
    RoCE-formed probes for flows whose destination QP and switch hops are known (plain UDP for the rest)."""

    max_ttl: int = 8
    timeout_ns: int = 1_000_000_000
    retries: int = 2
    roce: bool = False


@dataclass
class TraceRun:
    """One trace in progress."""

    flow: TraceFlow
    reason: int
    handle: object
    started_ns: int
    ttl: int = 1
    tries: int = 0
    token: int | None = None  # the probe in flight
    sent_ns: int = 0
    deadline_ns: int = 0
    hops: list[tpb.TraceHop] = field(default_factory=list)
    probes_sent: int = 0
    probes_lost: int = 0
    reached: bool = False
    seq: int = 0  # start order: among runs that may send at the same instant, the earliest started goes first


class Prober:
    """Drives traces to completion. Call ``start`` for each due flow, then ``run_once`` in a loop; it
    returns the PathTraces that finished.

    Cost is per event, not per trace in progress: a probe in flight sits in a heap by its time-out, a
    trace waiting to send sits in a heap by start order (when its destination's pacing allows now) or
    by the time its destination's pacing allows it, so a round touches only the traces that time out
    or send, and the wait is until the earliest of the next time-out, the next token of the budget
    and the next paced destination. Which trace gets a token when they are scarce is as if every
    trace in progress were visited in start order each round: the earliest started goes first.

    Args:
        transport: where probes go.
        addresses: ``IPv4 -> (switch, port)`` (``port_by_address`` of the topology).
        bucket: the host's probe budget (probes/s with a burst).
        governor: per-destination pacing (halves on ICMP rate limiting).
        clock: monotonic ns; ``wall_offset_ns`` turns it into ns since the epoch for the records.
        batch_ns: while traces wait for the budget, wake when it holds this long's tokens (at most its
            burst, at most one per waiting trace), so probes leave a few per wake-up at high budgets;
            at the default 50 probes/s that is one token.
        switch_hops: (source leaf, destination leaf) -> switches on a shortest path between them (0: unknown),
            the TTL a RoCE-formed probe stops at.
    """

    def __init__(self, transport: Transport, cfg: ProbeConfig, addresses: Mapping[str, tuple[str, str]],
                 bucket: TokenBucket, governor: RateGovernor, agent_id: str = "",
                 clock: Callable[[], int] = time.monotonic_ns, wall_offset_ns: int | None = None,
                 batch_ns: int = 5_000_000, switch_hops: Callable[[str, str], int] | None = None) -> None:
        self.transport = transport
        self.switch_hops = switch_hops
        self._collect: Callable[[float], list[Answer]] | None = getattr(transport, "collect", None)
        self.batch = max(1, min(int(bucket.burst), int(bucket.rate * batch_ns / 1e9)))
        self.cfg = cfg
        self.addresses = addresses
        self.bucket = bucket
        self.governor = governor
        self.agent_id = agent_id
        self.clock = clock
        self.wall_offset_ns = time.time_ns() - time.monotonic_ns() if wall_offset_ns is None else wall_offset_ns
        self.runs: dict[str, TraceRun] = {}
        self._by_token: dict[int, TraceRun] = {}
        self._token = 0
        self._seq = 0
        self._timeouts: list[tuple[int, int, TraceRun]] = []  # (deadline ns, token, run) of probes in flight
        self._ready: list[tuple[int, TraceRun]] = []  # (seq, run): waiting to send, pacing allowed (last seen)
        self._paced: list[tuple[int, int, TraceRun]] = []  # (not before ns, seq, run): waiting for its pacing
        self.sequence = 0
        self.probes_sent = 0
        self.probes_lost = 0

    def busy(self) -> int:
        """Traces in progress."""
        return len(self.runs)

    def start(self, flow: TraceFlow, reason: int) -> tpb.PathTrace | None:
        """Begin tracing ``flow``. Returns a FAILED trace at once when the transport cannot probe it
        (e.g. its source port cannot be bound); None otherwise. A flow already in progress is ignored."""
        if flow.flow_id in self.runs:
            return None
        flow = self._formed(flow)
        now = self.clock()
        try:
            handle = self.transport.open(flow)
        except OSError as e:
            log.warning("cannot trace %s from %s:%d: %s", flow.flow_id, flow.src_ip, flow.udp_src_port,
                        e.strerror or e)
            return self._record(TraceRun(flow, reason, None, now), now)
        self._seq += 1
        r = self.runs[flow.flow_id] = TraceRun(flow, reason, handle, now, seq=self._seq)
        heapq.heappush(self._ready, (r.seq, r))
        return None

    def _formed(self, flow: TraceFlow) -> TraceFlow:
        """``flow`` with its probes' form: RoCE-formed, capped at the switch hops, when configured and both its
        destination QP and its hop count are known; else plain UDP (a RoCE probe that could reach the
        destination NIC is never sent)."""
        if not self.cfg.roce or not flow.dst_qpn or not flow.dst_leaf or self.switch_hops is None:
            return flow
        hops = self.switch_hops(flow.src_leaf, flow.dst_leaf)
        return replace(flow, bth=True, switch_hops=hops) if hops > 0 else flow

    def run_once(self, max_wait_s: float) -> list[tpb.PathTrace]:
        """Send what may be sent, wait for answers up to the next deadline (at most ``max_wait_s``),
        handle them and the timeouts; return the traces that finished."""
        done = self._step()
        wait_ns = self._next_event_ns() - self.clock()
        wait = max(0.0, min(max_wait_s, wait_ns / 1e9))
        if not self.runs:
            answers = []
        elif self._ready and self._collect is not None:
            answers = self._collect(wait)  # the budget is spent: an answer could only queue for a token
        else:
            answers = self.transport.poll(wait)
        done += self.handle(answers)
        done += self._step()
        return done

    def handle(self, answers: list[Answer]) -> list[tpb.PathTrace]:
        """Record answers; return traces they finished. Answers to no probe in flight (late, duplicate) are
        ignored."""
        done: list[tpb.PathTrace] = []
        for a in answers:
            r = self._by_token.pop(a.token, None)
            if r is None or r.token != a.token:
                continue
            r.token = None  # its time-out heap entry is now stale
            sw, port = self.addresses.get(a.address, ("", ""))
            r.hops.append(tpb.TraceHop(ttl=r.ttl, address=a.address, rtt_ns=max(0, a.at_ns - r.sent_ns), switch=sw,
                                       port=port, icmp_type=a.icmp_type, icmp_code=a.icmp_code, probes=r.tries + 1))
            self.governor.answered(r.flow.dst_ip, r.ttl, a.at_ns)
            if a.icmp_type == ICMP_DEST_UNREACH or (sw and sw == r.flow.dst_leaf):
                r.reached = True
                done.append(self._finish(r, a.at_ns))
            elif a.icmp_type != ICMP_TIME_EXCEEDED:
                done.append(self._finish(r, a.at_ns))  # some other error: the path ends here
            elif self._next_ttl(r, a.at_ns, done):
                heapq.heappush(self._ready, (r.seq, r))
        return done

    def _next_ttl(self, r: TraceRun, now: int, done: list[tpb.PathTrace]) -> bool:
        """Move ``r`` to its next TTL; False when that ended the trace (``max_ttl``)."""
        r.ttl += 1
        r.tries = 0
        if r.ttl > (min(self.cfg.max_ttl, r.flow.switch_hops) if r.flow.bth else self.cfg.max_ttl):
            done.append(self._finish(r, now))
            return False
        return True

    def _live(self, r: TraceRun) -> bool:
        return r.token is None and self.runs.get(r.flow.flow_id) is r

    def _timed_out(self, r: TraceRun, now: int, done: list[tpb.PathTrace]) -> bool:
        """The probe in flight of ``r`` got no answer in time; False when that ended the trace."""
        self._by_token.pop(r.token, None)  # type: ignore[arg-type]
        r.token = None
        r.probes_lost += 1
        self.probes_lost += 1
        self.governor.lost(r.flow.dst_ip, r.ttl, now)
        r.tries += 1
        if r.tries > self.cfg.retries:
            r.hops.append(tpb.TraceHop(ttl=r.ttl, probes=r.tries))
            return self._next_ttl(r, now, done)
        return True

    def _send(self, r: TraceRun, now: int, done: list[tpb.PathTrace]) -> bool:
        """Send the next probe of waiting ``r`` if its pacing and the budget allow; else queue it where it
        waits. False when the budget is spent (for ``now``)."""
        ready_ns = self.governor.ready_ns(r.flow.dst_ip, now)
        if ready_ns > now:
            heapq.heappush(self._paced, (ready_ns, r.seq, r))
            return True
        if not self.bucket.take(now):
            heapq.heappush(self._ready, (r.seq, r))
            return False
        self._token += 1
        r.token = self._token
        try:
            self.transport.send(r.handle, r.ttl, r.token)
        except OSError as e:
            log.warning("probe of %s at TTL %d failed: %s", r.flow.flow_id, r.ttl, e.strerror or e)
            r.token = None
            done.append(self._finish(r, now))
            return True
        self._by_token[r.token] = r
        r.sent_ns, r.deadline_ns = now, now + self.cfg.timeout_ns
        heapq.heappush(self._timeouts, (r.deadline_ns, r.token, r))
        r.probes_sent += 1
        self.probes_sent += 1
        self.governor.sent(r.flow.dst_ip, now)
        return True

    def _step(self) -> list[tpb.PathTrace]:
        now = self.clock()
        done: list[tpb.PathTrace] = []
        timeouts, ready, paced = self._timeouts, self._ready, self._paced
        expired: list[TraceRun] = []
        while timeouts and timeouts[0][0] <= now:
            _, token, r = heapq.heappop(timeouts)
            if r.token == token and self._by_token.get(token) is r:
                expired.append(r)
        while paced and paced[0][0] <= now:
            _, seq, r = heapq.heappop(paced)
            if self._live(r):
                heapq.heappush(ready, (seq, r))
        expired.sort(key=lambda r: r.seq)
        # In start order over the traces that time out now and those waiting to send: each times out,
        # then sends if its pacing and the budget allow (once the budget is spent, only time-outs).
        i, budget_left = 0, True
        while True:
            if ready and budget_left and (i == len(expired) or ready[0][0] < expired[i].seq):
                _, r = heapq.heappop(ready)
                if self._live(r):
                    budget_left = self._send(r, now, done)
            elif i < len(expired):
                r = expired[i]
                i += 1
                if self._timed_out(r, now, done):
                    budget_left = self._send(r, now, done) and budget_left
            else:
                return done

    def _next_event_ns(self) -> int:
        """The earliest of: the next time-out, and (for the traces waiting to send) the later of the
        budget's next tokens (``batch``) and their destination's pacing; at most 1 s ahead."""
        now = self.clock()
        t = now + 1_000_000_000
        timeouts, ready, paced = self._timeouts, self._ready, self._paced
        while timeouts and not (timeouts[0][2].token == timeouts[0][1]
                                and self._by_token.get(timeouts[0][1]) is timeouts[0][2]):
            heapq.heappop(timeouts)
        if timeouts:
            t = min(t, timeouts[0][0])
        while ready and not self._live(ready[0][1]):
            heapq.heappop(ready)
        while paced:  # a destination's pacing only moves later: bring the head's time up to date
            at, seq, r = paced[0]
            if not self._live(r):
                heapq.heappop(paced)
                continue
            real = self.governor.ready_ns(r.flow.dst_ip, now)
            if real <= at:
                break
            heapq.heapreplace(paced, (real, seq, r))
        if ready or paced:
            waiting = now if ready else paced[0][0]
            tokens = min(len(ready), self.batch) if ready else 1
            t = min(t, max(waiting, now + self.bucket.wait_ns(now, tokens)))
        return t

    def _finish(self, r: TraceRun, now: int) -> tpb.PathTrace:
        self.runs.pop(r.flow.flow_id, None)
        if r.token is not None:
            self._by_token.pop(r.token, None)
        if r.handle is not None:
            self.transport.close(r.handle)
        return self._record(r, now)

    def _record(self, r: TraceRun, now: int) -> tpb.PathTrace:
        f = r.flow
        switch_hops = [h for h in r.hops if h.icmp_type != ICMP_DEST_UNREACH]
        answered = [h for h in switch_hops if h.address]
        first_ok = not switch_hops or not switch_hops[0].switch or switch_hops[0].switch == f.src_leaf
        if not answered or not first_ok:
            status = tpb.TRACE_STATUS_FAILED
        elif r.reached and len(answered) == len(switch_hops) and all(h.switch for h in answered) and (
                not f.dst_leaf or switch_hops[-1].switch == f.dst_leaf):
            status = tpb.TRACE_STATUS_COMPLETE
        else:
            status = tpb.TRACE_STATUS_PARTIAL
        self.sequence += 1
        return tpb.PathTrace(
            schema_version=1, flow_id=f.flow_id, host=f.host, src_nic=f.src_nic, src_leaf=f.src_leaf,
            src_ip=f.src_ip, dst_ip=f.dst_ip, udp_src_port=f.udp_src_port, udp_dst_port=f.udp_dst_port,
            started_ns=r.started_ns + self.wall_offset_ns, finished_ns=now + self.wall_offset_ns, hops=r.hops,
            status=status, reason=r.reason, probes_sent=r.probes_sent, probes_lost=r.probes_lost,
            agent_id=self.agent_id, sequence=self.sequence)
