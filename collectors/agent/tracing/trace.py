"""The prober: runs many traces at once over a transport, one probe in flight per flow.

A trace sends TTL 1, 2, ... probes carrying exactly the flow's 5-tuple; each answered probe names
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

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    """Per-trace knobs. ``timeout_ns``: wait for one probe's answer; ``retries``: extra probes per TTL."""

    max_ttl: int = 8
    timeout_ns: int = 1_000_000_000
    retries: int = 2


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


class Prober:
    """Drives traces to completion. Call ``start`` for each due flow, then ``run_once`` in a loop; it
    returns the PathTraces that finished.

    Args:
        transport: where probes go.
        addresses: ``IPv4 -> (switch, port)`` (``port_by_address`` of the topology).
        bucket: the host's probe budget (probes/s with a burst).
        governor: per-destination pacing (halves on ICMP rate limiting).
        clock: monotonic ns; ``wall_offset_ns`` turns it into ns since the epoch for the records.
    """

    def __init__(self, transport: Transport, cfg: ProbeConfig, addresses: Mapping[str, tuple[str, str]],
                 bucket: TokenBucket, governor: RateGovernor, agent_id: str = "",
                 clock: Callable[[], int] = time.monotonic_ns, wall_offset_ns: int | None = None) -> None:
        self.transport = transport
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
        now = self.clock()
        try:
            handle = self.transport.open(flow)
        except OSError as e:
            log.warning("cannot trace %s from %s:%d: %s", flow.flow_id, flow.src_ip, flow.udp_src_port,
                        e.strerror or e)
            return self._record(TraceRun(flow, reason, None, now), now)
        self.runs[flow.flow_id] = TraceRun(flow, reason, handle, now)
        return None

    def run_once(self, max_wait_s: float) -> list[tpb.PathTrace]:
        """Send what may be sent, wait for answers up to the next deadline (at most ``max_wait_s``),
        handle them and the timeouts; return the traces that finished."""
        done = self._step()
        wait_ns = self._next_event_ns() - self.clock()
        wait = max(0.0, min(max_wait_s, wait_ns / 1e9))
        answers = self.transport.poll(wait) if self.runs else []
        done += self.handle(answers)
        done += self._step()
        return done

    def handle(self, answers: list[Answer]) -> list[tpb.PathTrace]:
        """Record answers; return traces they finished. Answers to no probe in flight (late, duplicate) are
        ignored."""
        done = []
        for a in answers:
            r = self._by_token.pop(a.token, None)
            if r is None or r.token != a.token:
                continue
            r.token = None
            sw, port = self.addresses.get(a.address, ("", ""))
            r.hops.append(tpb.TraceHop(ttl=r.ttl, address=a.address, rtt_ns=max(0, a.at_ns - r.sent_ns), switch=sw,
                                       port=port, icmp_type=a.icmp_type, icmp_code=a.icmp_code, probes=r.tries + 1))
            self.governor.answered(r.flow.dst_ip, r.ttl, a.at_ns)
            if a.icmp_type == ICMP_DEST_UNREACH or (sw and sw == r.flow.dst_leaf):
                r.reached = True
                done.append(self._finish(r, a.at_ns))
            elif a.icmp_type != ICMP_TIME_EXCEEDED:
                done.append(self._finish(r, a.at_ns))  # some other error: the path ends here
            else:
                self._next_ttl(r, a.at_ns, done)
        return done

    def _next_ttl(self, r: TraceRun, now: int, done: list[tpb.PathTrace]) -> None:
        r.ttl += 1
        r.tries = 0
        if r.ttl > self.cfg.max_ttl:
            done.append(self._finish(r, now))

    def _step(self) -> list[tpb.PathTrace]:
        now = self.clock()
        done: list[tpb.PathTrace] = []
        for r in list(self.runs.values()):
            if r.token is not None:
                if now < r.deadline_ns:
                    continue
                self._by_token.pop(r.token, None)
                r.token = None
                r.probes_lost += 1
                self.probes_lost += 1
                self.governor.lost(r.flow.dst_ip, r.ttl, now)
                r.tries += 1
                if r.tries > self.cfg.retries:
                    r.hops.append(tpb.TraceHop(ttl=r.ttl, probes=r.tries))
                    self._next_ttl(r, now, done)
                    if r.flow.flow_id not in self.runs:
                        continue
            if self.governor.ready_ns(r.flow.dst_ip, now) > now or not self.bucket.take(now):
                continue
            self._token += 1
            r.token = self._token
            try:
                self.transport.send(r.handle, r.ttl, r.token)
            except OSError as e:
                log.warning("probe of %s at TTL %d failed: %s", r.flow.flow_id, r.ttl, e.strerror or e)
                r.token = None
                done.append(self._finish(r, now))
                continue
            self._by_token[r.token] = r
            r.sent_ns, r.deadline_ns = now, now + self.cfg.timeout_ns
            r.probes_sent += 1
            self.probes_sent += 1
            self.governor.sent(r.flow.dst_ip, now)
        return done

    def _next_event_ns(self) -> int:
        now = self.clock()
        t = now + 1_000_000_000
        for r in self.runs.values():
            if r.token is not None:
                t = min(t, r.deadline_ns)
            else:
                t = min(t, max(self.governor.ready_ns(r.flow.dst_ip, now), now + self.bucket.wait_ns(now)))
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
