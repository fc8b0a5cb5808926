"""The pure tracing core on a fake clock with a fake transport: prober, budget, planner."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from flowtracer.collectors.agent.tracing.budget import RateGovernor, TokenBucket
from flowtracer.collectors.agent.tracing.plan import TraceFlow, TracePlanner
from flowtracer.collectors.agent.tracing.trace import Answer, ProbeConfig, Prober
from flowtracer.schemas.v1 import traces_pb2 as tpb

MS = 1_000_000
S = 1_000_000_000
# 10.0.0.1 (leaf1) -> spine1 or spine2 -> leaf2 -> 10.0.0.2, answering from ingress addresses
ADDR = {"100.64.0.0": ("leaf1", "Ethernet1"), "172.16.0.1": ("spine1", "Ethernet1"),
        "172.16.0.3": ("spine2", "Ethernet1"), "172.16.0.5": ("leaf2", "Ethernet3"),
        "172.16.0.7": ("leaf2", "Ethernet4")}
PATHS = {0: ["100.64.0.0", "172.16.0.1", "172.16.0.5"], 1: ["100.64.0.0", "172.16.0.3", "172.16.0.7"]}


def flow(sport: int, dst_leaf: str = "leaf2") -> TraceFlow:
    return TraceFlow(f"h1:mlx5_0/{sport}/1", "h1", "h1:mlx5_0", "leaf1", "10.0.0.1", "10.0.0.2", sport,
                     dst_leaf=dst_leaf)


@dataclass
class FakeNet:
    """Answers after 1 ms: hop ``ttl`` of the sport's path, the destination's port unreachable beyond it.
    ``drop(ttl, n)`` says whether the n-th probe (1-based, over the run) at ``ttl`` gets no answer."""

    now: int = 0
    drop: object = None
    pending: list[tuple[int, Answer]] = field(default_factory=list)
    sent: list[tuple[int, int]] = field(default_factory=list)
    count: dict[int, int] = field(default_factory=dict)
    fail_open: bool = False

    def clock(self) -> int:
        return self.now

    def open(self, f: TraceFlow) -> object:
        if self.fail_open:
            raise OSError(98, "Address already in use")
        return f.udp_src_port

    def send(self, handle: object, ttl: int, token: int) -> None:
        sport = int(handle)  # type: ignore[call-overload]
        self.sent.append((sport, ttl))
        self.count[ttl] = self.count.get(ttl, 0) + 1
        if self.drop is not None and self.drop(ttl, self.count[ttl]):  # type: ignore[operator]
            return
        path = PATHS[sport % 2]
        a = (path[ttl - 1], 11, 0) if ttl <= len(path) else ("10.0.0.2", 3, 3)
        self.pending.append((self.now + MS, Answer(token, a[0], a[1], a[2], self.now + MS)))

    def close(self, handle: object) -> None:
        pass

    def poll(self, timeout_s: float) -> list[Answer]:
        self.pending.sort(key=lambda p: p[0])
        end = self.now + int(timeout_s * 1e9)
        if self.pending and self.pending[0][0] <= end:
            self.now = max(self.now, self.pending[0][0])
            out = [a for t, a in self.pending if t <= self.now]
            self.pending = [(t, a) for t, a in self.pending if t > self.now]
            return out
        self.now = max(end, self.now + 1)
        return []


CFG = ProbeConfig(max_ttl=6, timeout_ns=100 * MS, retries=2)


def run(net: FakeNet, flows: list[TraceFlow], rate: float = 1000, burst: float = 10,
        cfg: ProbeConfig = CFG) -> tuple[list[tpb.PathTrace], Prober]:
    p = Prober(net, cfg, ADDR, TokenBucket(rate, burst), RateGovernor(rate), "a1", clock=net.clock, wall_offset_ns=0)
    out = [t for f in flows if (t := p.start(f, tpb.TRACE_REASON_NEW_FLOW)) is not None]
    for _ in range(100_000):
        if not p.busy():
            break
        out += p.run_once(1.0)
    return out, p


@pytest.mark.parametrize(("drop", "status", "answered"), [
    (None, tpb.TRACE_STATUS_COMPLETE, 3),
    (lambda ttl, n: ttl == 2 and n == 1, tpb.TRACE_STATUS_COMPLETE, 3),  # one loss, retried
    (lambda ttl, n: ttl == 2, tpb.TRACE_STATUS_PARTIAL, 2),  # spine never answers: leaf2 still reached
    (lambda ttl, n: ttl == 3, tpb.TRACE_STATUS_PARTIAL, 2),  # leaf2 silent: stop at port unreachable
    (lambda ttl, n: True, tpb.TRACE_STATUS_FAILED, 0),
])
def test_one_trace_statuses(drop: object, status: int, answered: int) -> None:
    net = FakeNet(drop=drop)
    (t,), _ = run(net, [flow(7)])
    assert t.status == status
    assert sum(1 for h in t.hops if h.switch) == answered
    assert t.flow_id == "h1:mlx5_0/7/1" and t.udp_src_port == 7 and t.probes_sent == len(net.sent)
    assert [h.ttl for h in t.hops] == list(range(1, len(t.hops) + 1))
    if status == tpb.TRACE_STATUS_COMPLETE:
        assert [(h.switch, h.port) for h in t.hops] == [("leaf1", "Ethernet1"), ("spine2", "Ethernet1"),
                                                        ("leaf2", "Ethernet4")]
        assert all(h.rtt_ns == MS for h in t.hops)
    assert max(net.count.values()) <= 3  # at most 1 + retries probes per TTL


def test_stops_at_destination_leaf_not_beyond() -> None:
    net = FakeNet()
    run(net, [flow(4)])
    assert [ttl for _, ttl in net.sent] == [1, 2, 3]


def test_unknown_destination_leaf_stops_at_port_unreachable() -> None:
    net = FakeNet()
    (t,), _ = run(net, [flow(4, dst_leaf="")])
    assert [ttl for _, ttl in net.sent] == [1, 2, 3, 4]
    assert t.status == tpb.TRACE_STATUS_COMPLETE and t.hops[-1].icmp_type == 3


def test_max_ttl_bounds_a_trace() -> None:
    net = FakeNet(drop=lambda ttl, n: ttl > 1)
    (t,), _ = run(net, [flow(4)], cfg=ProbeConfig(max_ttl=4, timeout_ns=10 * MS, retries=0))
    assert max(ttl for _, ttl in net.sent) == 4 and t.status == tpb.TRACE_STATUS_PARTIAL


def test_unbindable_source_port_fails_at_once() -> None:
    (t,), p = run(FakeNet(fail_open=True), [flow(4)])
    assert t.status == tpb.TRACE_STATUS_FAILED and t.probes_sent == 0 and not p.busy()


def test_one_probe_in_flight_per_flow_and_budget_holds() -> None:
    net = FakeNet()
    flows = [flow(s) for s in range(40)]
    traces, _ = run(net, flows, rate=100, burst=5)
    assert len(traces) == 40 and all(t.status == tpb.TRACE_STATUS_COMPLETE for t in traces)
    # 120 probes at 100/s after a burst of 5: at least 1.15 s of fake time
    assert len(net.sent) == 120 and net.now >= 1.15 * S
    for f in flows:  # hop order per flow: one probe at a time
        assert [ttl for s, ttl in net.sent if s == f.udp_src_port] == [1, 2, 3]


def test_token_bucket() -> None:
    b = TokenBucket(10, 2)
    assert b.take(0) and b.take(0) and not b.take(0)
    assert b.wait_ns(0) == 100 * MS + 1
    assert b.take(100 * MS) and not b.take(100 * MS)
    with pytest.raises(ValueError, match="rate > 0"):
        TokenBucket(0, 1)


def test_governor_halves_on_silence_at_an_answering_ttl_and_recovers_slowly() -> None:
    g = RateGovernor(ceiling=50, floor=1)
    g.answered("d", 2, 0)
    assert not g.lost("d", 3, 1)  # never answered at TTL 3: not (yet) a sign
    assert g.lost("d", 2, 2) and g.rate("d", 2) == 25
    assert not g.lost("d", 2, 3)  # held for a second
    assert g.lost("d", 2, S + 2) and g.rate("d", S + 2) == 13.75  # (25 + 2.5 regained) / 2
    assert g.rate("d", 2 * S + 2) == pytest.approx(16.25)  # +5% of the ceiling per second
    assert g.rate("d", 40 * S) == 50


def test_rate_limited_answers_come_out_partial_then_governor_backs_off() -> None:
    # the second switch answers only every 4th probe (a rate limiter)
    net = FakeNet(drop=lambda ttl, n: ttl == 2 and n % 4 != 0)
    traces, p = run(net, [flow(s) for s in range(8)], cfg=ProbeConfig(max_ttl=6, timeout_ns=50 * MS, retries=1))
    assert p.governor.cuts > 0 and p.governor.rate("10.0.0.2", net.now) < 1000
    for t in traces:  # never a wrong path: what answered is the flow's own hops
        want = PATHS[t.udp_src_port % 2]
        assert all(h.address == want[h.ttl - 1] for h in t.hops if h.address and h.icmp_type == 11)
    assert {t.status for t in traces} <= {tpb.TRACE_STATUS_COMPLETE, tpb.TRACE_STATUS_PARTIAL}
    assert tpb.TRACE_STATUS_PARTIAL in {t.status for t in traces}


def trace_of(f: TraceFlow, status: int, switches: tuple[str, ...] = ("leaf1", "spine1", "leaf2")) -> tpb.PathTrace:
    return tpb.PathTrace(flow_id=f.flow_id, udp_src_port=f.udp_src_port, status=status,
                         hops=[tpb.TraceHop(ttl=i + 1, switch=s, address="x") for i, s in enumerate(switches)])


@pytest.mark.parametrize(("event", "reason", "at"), [
    ("none", tpb.TRACE_REASON_REFRESH, 600 * S + 10),
    ("contradicted", tpb.TRACE_REASON_CONTRADICTION, 20),
    ("link_on_path", tpb.TRACE_REASON_LINK_CHANGE, 20),
    ("partial", tpb.TRACE_REASON_RETRY, 2 * S + 10),
])
def test_planner_reasons(event: str, reason: int, at: int) -> None:
    pl = TracePlanner(refresh_ns=600 * S, retry_ns=(2 * S, 60 * S), expire_ns=30 * S)
    f, g = flow(1), flow(2)
    pl.observe([f, g], 0)
    assert [x.flow_id for x, r in pl.due(0, 10)] == [f.flow_id, g.flow_id]
    assert pl.due(0, 10) == []  # in flight: not handed out twice
    status = tpb.TRACE_STATUS_PARTIAL if event == "partial" else tpb.TRACE_STATUS_COMPLETE
    pl.finished(trace_of(f, status), 10)
    pl.finished(trace_of(g, tpb.TRACE_STATUS_COMPLETE, ("leaf1", "spine2", "leaf2")), 10)
    if event == "contradicted":
        assert pl.mark_contradicted(f.flow_id, 20) and not pl.mark_contradicted("nope", 20)
    if event == "link_on_path":
        assert pl.link_changed(["spine1", "leafX"], 20) == 1
    assert pl.due(at - 1, 10) == []
    assert pl.due(at, 1) == [(f, reason)]


def test_planner_retry_backs_off_and_contradiction_waits_for_running_trace() -> None:
    pl = TracePlanner(refresh_ns=600 * S, retry_ns=(2 * S, 5 * S))
    f = flow(1)
    pl.observe([f], 0)
    t = 0
    waits = []
    for _ in range(4):
        assert len(pl.due(t, 1)) == 1
        pl.finished(trace_of(f, tpb.TRACE_STATUS_FAILED), t)
        nxt = pl.next_due_ns()
        assert nxt is not None
        waits.append(nxt - t)
        t = nxt
    assert waits == [2 * S, 4 * S, 5 * S, 5 * S]
    pl.due(t, 1)
    assert pl.mark_contradicted(f.flow_id, t + 1)
    assert pl.due(t + 1, 1) == []  # one trace in flight per flow
    pl.finished(trace_of(f, tpb.TRACE_STATUS_COMPLETE), t + 2)
    assert pl.due(t + 2, 1) == [(f, tpb.TRACE_REASON_CONTRADICTION)]


def test_planner_new_tuple_and_expiry() -> None:
    pl = TracePlanner(refresh_ns=600 * S, expire_ns=30 * S)
    f = flow(1)
    pl.observe([f], 0)
    pl.due(0, 1)
    pl.finished(trace_of(f, tpb.TRACE_STATUS_COMPLETE), 1)
    moved = TraceFlow(f.flow_id, "h1", "h1:mlx5_0", "leaf1", "10.0.0.1", "10.0.0.3", 1, dst_leaf="leaf3")
    pl.observe([moved], 5)
    assert pl.due(5, 1) == [(moved, tpb.TRACE_REASON_NEW_FLOW)]
    assert pl.expired(29 * S) == []
    assert pl.expired(35 * S) == [f.flow_id] and pl.next_due_ns() is None
