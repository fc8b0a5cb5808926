"""End to end against the simulator and the real broker: a 16-host fabric (4 leaves, 2 spines)
running ring all-reduce for 30 s in 1 s ticks, a spine rebooted mid-run, the collector sampling
every 1 s (its default) into Kafka; three leaves are read the ways the collector drives (POLL, ONCE, Get every
1 s), the rest STREAM. Every CounterBatch read back from Kafka must carry deltas equal to the
simulator's ground truth, per interface, per next hop and per sample; the reboot must show as a
flagged BASELINE in a new session, never a negative delta or a spike."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from gnmi_session_util import IF_FIELDS, NH_FIELDS, LoopThread, fast_gnmi
from kafka_records import consume_all
from waiting import wait_for

from flowtracer.collectors.gnmi.config import CollectorConfig, Kafka, TargetMode, TargetOverride, resolve_targets
from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE, GAP, OK, RESET, WRAPPED
from flowtracer.collectors.gnmi.service import CollectorService
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.fabric.topology import load_topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1.counters_pb2 import CounterBatch
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import preset
from flowtracer.sim.runner import RunnerOptions, SimRunner
from flowtracer.sim.switches.state import INTERFACE_COUNTERS

pytestmark = pytest.mark.slow

TICK_S = 1.0
RUN_S = 30.0
REBOOT = "spine01"
REBOOT_AT_S, DOWN_FOR_S = 10.0, 3.0
#: Leaves read by the collector's own rounds instead of STREAM: their deltas are held to the same ground truth.
POLLED = {"leaf01": TargetMode.POLL, "leaf02": TargetMode.ONCE, "leaf03": TargetMode.GET}


@dataclass
class Run:
    batches: list[CounterBatch]
    truth: GroundTruth
    svc: CollectorService
    switches: set[str]


@pytest.fixture(scope="module")
def run(kafka: TansuBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    out = tmp_path_factory.mktemp("fabric")
    topic = f"counters-e2e-{time.time_ns()}"
    kafka.create_topics({topic: 8})
    topo = generate(FabricSpec(hosts=16, leaves=4, spines=2, link_speed_bps=100 * 10**9,
                               host_speed_bps=100 * 10**9))
    workload = preset("ring-allreduce", hosts="all", size="256MiB")
    runner = SimRunner(topo, workload, out, RunnerOptions(tick_s=TICK_S, gnmi_ports="free", host_views=False))
    info = runner.start()
    lt = LoopThread()
    try:
        # grace: a switch's notifications of one instant come in a burst; the simulator's first
        # snapshot after a (re)connect can pause mid-burst for tens of ms on a loaded machine
        cfg = CollectorConfig(collector_id="e2e", gnmi=fast_gnmi(TICK_S, batch_grace=0.3),
                              kafka=Kafka(bootstrap=kafka.bootstrap, topic=topic, idempotence=False),
                              targets=tuple(TargetOverride(name=n, mode=m, interval=TICK_S) for n, m in POLLED.items()))
        targets = resolve_targets(cfg, load_topology(info["topology"]))
        assert {t.name: t.mode for t in targets if t.polled} == POLLED
        svc = CollectorService(cfg, targets)
        fut = lt.submit(svc.run())
        time.sleep(REBOOT_AT_S)
        assert runner.engine is not None
        runner.engine.inject("reboot", REBOOT, down_for_s=DOWN_FOR_S)
        time.sleep(RUN_S - REBOOT_AT_S)
        svc.stop()
        fut.result(30)
    finally:
        lt.close()
        runner.stop()
    raw = consume_all(kafka.bootstrap, topic, idle_s=1.5, expect=svc.sink.sent_ok)
    batches = [CounterBatch.FromString(v) for _, v in raw]
    assert all(k.decode() == b.switch for (k, _), b in zip(raw, batches, strict=True))  # key = switch name
    yield Run(batches, GroundTruth.load(out / "ground-truth"), svc, {t.name for t in targets})


def test_every_delta_equals_ground_truth(run: Run) -> None:
    checked = defaultdict(int)
    for b in run.batches:
        now = run.truth.counters_at(b.switch, b.timestamp_ns)
        assert now.t_ns == b.timestamp_ns, "a batch is stamped with an engine tick end"
        for i in b.interfaces:
            for f, name in zip(IF_FIELDS, INTERFACE_COUNTERS, strict=True):
                c = getattr(i, f)
                assert c.value == now.interfaces[i.name][name], (b.switch, i.name, f)
                if c.status in (OK, GAP, WRAPPED):
                    before = run.truth.counters_at(b.switch, b.timestamp_ns - i.interval_ns)
                    assert before.t_ns == b.timestamp_ns - i.interval_ns
                    assert c.delta == now.interfaces[i.name][name] - before.interfaces[i.name][name], \
                        (b.switch, b.timestamp_ns, i.name, f)
                    checked["interface"] += 1
                else:
                    assert c.delta == 0
        for n in b.next_hops:
            t = now.next_hops[n.index]
            assert (n.egress_interface, n.next_hop_ip) == (t.interface, t.ip_address)
            for f in NH_FIELDS:
                c = getattr(n, f)
                assert c.value == getattr(t, f)
                if c.status in (OK, GAP, WRAPPED):
                    before = run.truth.counters_at(b.switch, b.timestamp_ns - n.interval_ns)
                    assert c.delta == getattr(t, f) - getattr(before.next_hops[n.index], f), (b.switch, n.index, f)
                    checked["next_hop"] += 1
    samples = {(b.switch, b.timestamp_ns) for b in run.batches}
    assert len(samples) == len(run.batches), "one batch per switch per sample instant"
    assert {b.switch for b in run.batches} == run.switches
    # coverage: ~30 samples x 6 switches; every interface and next-hop counter compared each time
    assert len(run.batches) >= 6 * 25
    # (each leaf: 2 uplink next hops x 2 counters; the spines' downlinks are single paths)
    assert checked["interface"] >= 5000 and checked["next_hop"] >= 4 * 2 * 2 * 25, dict(checked)
    # traffic really flowed: the comparison is not 0 == 0
    assert sum(i.out_octets.delta for b in run.batches for i in b.interfaces) > 10**9


def test_reboot_is_a_flagged_baseline_in_a_new_session_and_resumes_within_the_backoff(run: Run) -> None:
    spine = sorted((b for b in run.batches if b.switch == REBOOT), key=lambda b: b.sequence)
    sessions = sorted({b.session for b in spine})
    assert len(sessions) >= 2, "the reboot ended the session"
    first_after = next(b for b in spine if b.session == sessions[-1])
    for i in first_after.interfaces:
        assert all(getattr(i, f).status == BASELINE and getattr(i, f).delta == 0 for f in IF_FIELDS)
    assert all(n.octets_forwarded.status == BASELINE for n in first_after.next_hops)
    assert [b.sequence for b in spine] == list(range(1, len(spine) + 1)), "no batch lost, sequence continues"
    # no negative or spiked delta anywhere: deltas never exceed line rate x interval
    for b in run.batches:
        for i in b.interfaces:
            for f in ("in_octets", "out_octets"):
                c = getattr(i, f)
                assert c.status != RESET
                assert c.delta <= i.speed_bps / 8 * i.interval_ns / 1e9 * 1.01 + 10_000
    boot = next(e for e in run.truth.events if e["kind"] == "boot" and e["target"] == REBOOT)
    lag_s = (first_after.timestamp_ns - boot["t_ns"]) / 1e9
    backoff = run.svc.cfg.gnmi.backoff
    assert 0 <= lag_s <= backoff.cap + 2 * TICK_S, f"resumed {lag_s:.2f} s after the switch came back"


def test_metrics_saw_it(run: Run) -> None:
    s = {x.name: x for x in run.svc.sessions}[REBOOT].stats
    assert s.reconnects >= 1 and s.session >= 2 and s.decode_errors == 0
    assert run.svc.sink.dropped == 0 and run.svc.sink.sent_ok == len(run.batches)
    wait_for(lambda: True, 0, "")



def test_polled_leaves_were_read_every_interval_in_one_session(run: Run) -> None:
    sessions = {x.name: x for x in run.svc.sessions}
    for name in POLLED:
        s = sessions[name].stats
        assert s.session == 1 and s.decode_errors == 0 and not s.malformed, (name, s)
        mine = [b for b in run.batches if b.switch == name]
        # one every interval (RUN_S / TICK_S of them, less a start-up round or two), each a distinct tick
        assert len(mine) >= 25 and len({b.timestamp_ns for b in mine}) == len(mine), name
