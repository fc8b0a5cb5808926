"""Faults under a running pipeline, against the simulator's ground truth: nothing is lost beyond what is counted.

One run (module fixture, about 60 s) of an 8-host fabric with every stage a real ``flowtracer`` subprocess:
- spine02's clock is 90 s ahead (``flowtracer sim --clock-skew``);
- 15 s in, a forged CounterBatch stamped a day ahead is produced into the counters topic with leaf01's key;
- 25 s in, the host agent is stopped with SIGTERM and started again 5 s later.
The processor's Prometheus endpoint (its per-source clock skew included) is read before it is stopped; its outputs
are read back from Kafka.
"""

from __future__ import annotations

import re
import signal
import socket
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.schemas import topics
from flowtracer.schemas.topology import load_topology
from flowtracer.schemas.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2, counters_pb2
from flowtracer.sim.fabric.ground_truth import GroundTruth

pytestmark = pytest.mark.slow

S = 1_000_000_000
DAY = 86_400 * S
AHEAD, FORGED = "spine02", "leaf01"
WARMUP_HOPS = 6


@dataclass
class Faults:
    gt: GroundTruth
    link_loads: list[analytics_pb2.LinkLoad]
    path_loads: list[analytics_pb2.PathLoad]
    dead_letters: list[analytics_pb2.DeadLetter]
    metrics: dict[str, float]
    forged_at: int  # wall clock (ns) when the forged batch was produced
    agent_back_at: int  # wall clock (ns) when the agent was started again
    agent_gap: tuple[int, int]  # wall clock (ns): agent stopped, agent started again
    last_end: int  # newest window both the simulator ran and the processor finalized
    run_dir: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metrics(port: int) -> dict[str, float]:
    """``name{labels}`` -> value from the processor's Prometheus endpoint."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def _consume(bootstrap: str) -> dict[str, list[bytes]]:
    got: dict[str, list[bytes]] = defaultdict(list)
    names = (topics.LINK_LOADS.name, topics.PATH_LOADS.name, topics.DEAD_LETTER.name)
    consumer = KafkaConsumer(*names, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=4000, enable_auto_commit=False)
    for m in consumer:
        got[m.topic].append(m.value)
    consumer.close()
    return got


def _options(tmp: Path, clock_skew: str) -> tuple[PipelineOptions, int]:
    """An 8-host fabric (2 leaves, 2 spines), hash resolver, one switch's clock skewed; the metrics port."""
    topo = tmp / "fabric8.yaml"
    topo.write_text(generate(FabricSpec(hosts=8, leaves=2, spines=2, name="ft8")).to_yaml())
    port = _free_port()
    return PipelineOptions(topology=topo, partitions=4, resolvers=("hash",), sim_args=("--clock-skew", clock_skew),
                           processor_args=("--metrics-port", str(port))), port


def _faults(pipeline: LocalPipeline, got: dict[str, list[bytes]], metrics: dict[str, float], forged_at: int,
            back_at: int, agent_gap: tuple[int, int], run_dir: Path) -> Faults:
    gt = GroundTruth.load(pipeline.ready["ground_truth"])
    link_loads = [analytics_pb2.LinkLoad.FromString(v) for v in got[topics.LINK_LOADS.name]]
    path_loads = [analytics_pb2.PathLoad.FromString(v) for v in got[topics.PATH_LOADS.name]]
    dead = [analytics_pb2.DeadLetter.FromString(v) for v in got[topics.DEAD_LETTER.name]]
    last_end = min(gt.tick_ends[-1], max(pl.window_end_ns for pl in path_loads))
    return Faults(gt, link_loads, path_loads, dead, metrics, forged_at, back_at, agent_gap, last_end, run_dir)


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Faults:
    tmp = tmp_path_factory.mktemp("faults")
    options, port = _options(tmp, f"{AHEAD}=+90s")
    with LocalPipeline(options, tmp / "run") as pipeline:
        pipeline.wait(15)
        forged_at = time.time_ns()
        forged = counters_pb2.CounterBatch(schema_version=1, switch=FORGED, timestamp_ns=forged_at + DAY)
        producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap, enable_idempotence=False)
        producer.send(topics.COUNTERS.name, key=FORGED.encode(), value=forged.SerializeToString())
        producer.flush()
        producer.close()
        pipeline.wait(10)
        stopped_at = time.time_ns()
        assert pipeline.kill_stage("agent", signal.SIGTERM) is not None
        time.sleep(5)
        pipeline.restart("agent")
        back_at = time.time_ns()
        pipeline.wait(25)
        metrics = _metrics(port)
        pipeline.stop_stages()
        got = _consume(pipeline.bootstrap)
    return _faults(pipeline, got, metrics, forged_at, back_at, (stopped_at, back_at), tmp / "run")


def _clock_gauges(f: Faults, metric: str, kind: str) -> dict[str, float]:
    """source -> value of one of the processor's per-source clock gauges, for one kind."""
    out = {}
    for series, value in f.metrics.items():
        m = re.fullmatch(rf'{metric}\{{kind="{kind}",source="([^"]+)"\}}', series)
        if m:
            out[m.group(1)] = value
    return out


def _skews(f: Faults, kind: str) -> dict[str, float]:
    return _clock_gauges(f, "flowtracer_processor_source_skew_seconds", kind)


def _untouched(link: str) -> bool:
    """A link neither end of which is a skewed switch."""
    return AHEAD not in link


def test_forged_future_batch_is_dead_lettered_and_the_partition_keeps_going(faults: Faults) -> None:
    reasons = [d.reason for d in faults.dead_letters if f"from switch {FORGED} " in d.reason]
    assert len(reasons) == 1, reasons
    assert re.search(r"stamped 86[34]\d\d\.\d s ahead of this worker.s clock", reasons[0]), reasons
    # leaf01's partition: every window after the forged batch is still finalized with leaf01's measured bytes,
    # equal to the ground truth (a poisoned watermark would make all of them late and leave them out).
    after = sorted({ll.window_end_ns for ll in faults.link_loads
                    if faults.forged_at + 2 * S < ll.window_end_ns <= faults.last_end})
    assert len(after) >= 30
    checked = 0
    for ll in faults.link_loads:
        if ll.window_end_ns in after and FORGED in ll.link and _untouched(ll.link):
            assert ll.measured_valid, (ll.link, ll.window_end_ns)
            assert ll.measured_bytes == faults.gt.link_bytes(ll.window_start_ns, ll.window_end_ns).get(ll.link, 0)
            checked += 1
    assert checked >= 0.9 * len(after) * 4  # leaf01's host links (4 hosts x 2 directions) and its spine01 cable


def test_switch_clock_ahead_is_dead_lettered_with_the_reason(faults: Faults) -> None:
    reasons = [d.reason for d in faults.dead_letters if f"from switch {AHEAD} " in d.reason]
    assert len(reasons) >= 30, "every batch of the fast switch"
    assert all("ahead of this worker's clock" in r and re.search(r"stamped (8\d|9\d)\.\d s ahead", r)
               for r in reasons), reasons[:3]
    assert faults.metrics['flowtracer_processor_source_ahead_seconds{kind="CounterBatch"}'] < 10


def test_skew_is_measured_per_source_end_to_end(faults: Faults) -> None:
    """The switch's sample stamp against its collector's receive stamp, the agent's window end against its read
    stamp: spine02 reads +90 s (though every batch of it is dead-lettered), every other source about 0. A margin of
    5 s for the delivery delay on a loaded machine; the forged batch carries no receive stamp and changes nothing."""
    topo = load_topology(faults.run_dir.parent / "fabric8.yaml")
    switches = _skews(faults, "CounterBatch")
    assert set(switches) == {sw.name for sw in topo.switches}
    assert switches[AHEAD] == pytest.approx(90, abs=5)
    assert all(abs(v) < 5 for name, v in switches.items() if name != AHEAD), switches
    hosts = _skews(faults, "FlowBatch")
    assert set(hosts) == {h.name for h in topo.hosts}
    assert all(abs(v) < 5 for v in hosts.values()), hosts
    # one machine, one clock: a record reaches the processor after its producer stamped it
    for kind in ("CounterBatch", "FlowBatch"):
        transit = _clock_gauges(faults, "flowtracer_processor_source_transit_seconds", kind)
        assert set(transit) == set(switches if kind == "CounterBatch" else hosts)
        assert all(v >= 0 for v in transit.values()), transit
    assert faults.metrics['flowtracer_processor_skew_abs_seconds_bucket{kind="CounterBatch",le="60.0"}'] < \
        faults.metrics['flowtracer_processor_skew_abs_seconds_bucket{kind="CounterBatch",le="300.0"}']


def test_other_switches_stay_exact_and_nothing_is_late(faults: Faults) -> None:
    """Neither the fast switch nor the forged batch makes any record late; every link the fast switch does not
    measure keeps its exact measured bytes in every window."""
    assert faults.metrics["flowtracer_processor_late_records"] == 0
    windows = {ll.window_end_ns for ll in faults.link_loads
               if faults.gt.start_ns + WARMUP_HOPS * S < ll.window_end_ns <= faults.last_end}
    checked = 0
    for ll in faults.link_loads:
        if _untouched(ll.link) and ll.window_end_ns in windows:
            assert ll.measured_valid, (ll.link, ll.window_end_ns)
            assert ll.measured_bytes == faults.gt.link_bytes(ll.window_start_ns, ll.window_end_ns).get(ll.link, 0)
            checked += 1
    assert checked >= 0.9 * 20 * len(windows)  # 8 host links x 2 directions + 2 spine01 cables x 2 directions


def test_agent_restart_counts_the_gap_and_does_not_double_count(faults: Faults) -> None:
    start = faults.agent_back_at + WARMUP_HOPS * S
    windows = sorted({pl.window_end_ns for pl in faults.path_loads if start < pl.window_end_ns <= faults.last_end})
    assert len(windows) >= 10
    got: dict[str, int] = defaultdict(int)
    for pl in faults.path_loads:
        if windows[0] <= pl.window_end_ns <= windows[-1]:
            got[pl.path_id] += pl.bytes
    truth: dict[str, int] = defaultdict(int)
    for fw in faults.gt.flows_in(windows[0] - S, windows[-1]):
        for path in fw.paths:
            truth["|".join(path)] += fw.bytes // len(fw.paths)
    assert truth
    for pid, b in truth.items():
        assert got[pid] == pytest.approx(b, rel=0.02), pid
    assert faults.metrics["flowtracer_processor_incomplete_windows"] > 0, "the gap is counted"


BEHIND = "spine01"


@pytest.fixture(scope="module")
def slow_clock(tmp_path_factory: pytest.TempPathFactory) -> Faults:
    """A second, shorter run: spine01's clock 90 s behind (nothing else wrong)."""
    tmp = tmp_path_factory.mktemp("slow-clock")
    options, port = _options(tmp, f"{BEHIND}=-90s")
    with LocalPipeline(options, tmp / "run") as pipeline:
        pipeline.wait(30)
        metrics = _metrics(port)
        pipeline.stop_stages()
        got = _consume(pipeline.bootstrap)
    return _faults(pipeline, got, metrics, 0, 0, (0, 0), tmp / "run")


def test_switch_clock_behind_is_late_and_holds_nobody(slow_clock: Faults) -> None:
    """A switch 90 s behind used to hold every newer window of its partition behind its own old ones (no path loads
    for the whole run). Its windows are now released as they are and its records for closed windows are late
    (counted); every other switch's links stay exact and current."""
    f = slow_clock
    assert f.metrics["flowtracer_processor_late_records"] > 0
    skews = _skews(f, "CounterBatch")
    assert skews[BEHIND] == pytest.approx(-90, abs=5), skews
    assert all(abs(v) < 5 for name, v in skews.items() if name != BEHIND), skews
    windows = {pl.window_end_ns for pl in f.path_loads if f.gt.start_ns + WARMUP_HOPS * S < pl.window_end_ns}
    assert len(windows) >= 15, "path loads keep coming"
    assert f.last_end >= f.gt.tick_ends[-1] - 5 * S, "and they are current"
    checked = 0
    for ll in f.link_loads:
        if BEHIND not in ll.link and ll.window_end_ns in windows and ll.window_end_ns <= f.last_end:
            assert ll.measured_valid, (ll.link, ll.window_end_ns)
            assert ll.measured_bytes == f.gt.link_bytes(ll.window_start_ns, ll.window_end_ns).get(ll.link, 0)
            checked += 1
    assert checked >= 0.9 * 20 * len([w for w in windows if w <= f.last_end])
