"""Faults under a running pipeline, against the simulator's ground truth: nothing is lost beyond what is counted.

A first run (module fixture, about 60 s) of an 8-host fabric with every stage a real ``flowtracer`` subprocess:
- spine02's clock is 90 s ahead (``flowtracer sim --clock-skew``);
- 15 s in, a forged CounterBatch stamped a day ahead is produced into the counters topic with leaf01's key;
- 3 s later the collector is stopped for 4 s (SIGSTOP: starved of CPU, sockets open), then goes on;
- 25 s in, the host agent is stopped with SIGTERM and started again 5 s later.
The processor's Prometheus endpoint (its per-source clock skew included) is read before it is stopped; its outputs
are read back from Kafka.
A second run puts one switch's clock 90 s behind; a third cuts the broker off from every stage for 2 minutes.
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
from kafka import KafkaProducer
from kafka_records import topic_records

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.fabric.topology import load_topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, counters_pb2
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.testbed.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

S = 1_000_000_000
DAY = 86_400 * S
AHEAD, FORGED = "spine02", "leaf01"
WARMUP_HOPS = 6
STARVED_S = 4.0  # how long the collector is stopped (s)


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
    return topic_records(bootstrap, topics.LINK_LOADS.name, topics.PATH_LOADS.name, topics.DEAD_LETTER.name)


def _options(tmp: Path, clock_skew: str | None) -> tuple[PipelineOptions, int]:
    """An 8-host fabric (2 leaves, 2 spines), hash resolver, one switch's clock skewed (or none); the metrics port."""
    topo = tmp / "fabric8.yaml"
    topo.write_text(generate(FabricSpec(hosts=8, leaves=2, spines=2, name="ft8")).to_yaml())
    port = _free_port()
    return PipelineOptions(topology=topo, partitions=4, resolvers=("hash",),
                           sim_args=("--clock-skew", clock_skew) if clock_skew else (),
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
        pipeline.wait(3)
        # CPU contention at its worst: the collector gets no CPU for longer than its liveness timeout (3 s) while
        # the switches stream on. It must read what waited, not reconnect: every window stays exact.
        pipeline.pause_stage("collect", STARVED_S)
        pipeline.wait(10 - 3 - STARVED_S)
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
    # 90 s ahead less the batch's delivery delay (seconds on a busy machine, more across the collector's pause)
    ahead = [re.search(r"stamped (\d+\.\d) s ahead of this worker's clock", r) for r in reasons]
    assert all(m and 10 < float(m.group(1)) <= 90.5 for m in ahead), reasons[:3]
    assert max(float(m.group(1)) for m in ahead if m) > 85, "most batches come promptly"
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
    # the offset (lowest-delay readings) takes the delivery delay out: spine02 is 90 s ahead, every other clock is
    # the machine's, so within the half hop that would move a sample, however busy the machine
    offsets = _clock_gauges(faults, "flowtracer_processor_source_clock_offset_seconds", "CounterBatch")
    assert offsets[AHEAD] == pytest.approx(90, abs=0.5), offsets
    assert all(abs(v) < 0.5 for name, v in offsets.items() if name != AHEAD), offsets
    host_offsets = _clock_gauges(faults, "flowtracer_processor_source_clock_offset_seconds", "FlowBatch")
    assert set(host_offsets) == set(hosts) and all(abs(v) < 0.5 for v in host_offsets.values()), host_offsets
    delays = _clock_gauges(faults, "flowtracer_processor_source_delivery_delay_seconds", "CounterBatch")
    assert set(delays) == set(switches) and all(v >= 0 for v in delays.values()), delays
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
    start = faults.gt.start_ns + WARMUP_HOPS * S  # only a record of the pipeline's start may come late
    assert all(w <= start for w in _late_windows(faults)), sorted(_late_windows(faults))
    windows = {ll.window_end_ns for ll in faults.link_loads
               if faults.gt.start_ns + WARMUP_HOPS * S < ll.window_end_ns <= faults.last_end}
    checked = 0
    for ll in faults.link_loads:
        if _untouched(ll.link) and ll.window_end_ns in windows:
            assert ll.measured_valid, (ll.link, ll.window_end_ns)
            assert ll.measured_bytes == faults.gt.link_bytes(ll.window_start_ns, ll.window_end_ns).get(ll.link, 0)
            checked += 1
    assert checked >= 0.9 * 20 * len(windows)  # 8 host links x 2 directions + 2 spine01 cables x 2 directions


def _late_windows(f: Faults) -> set[int]:
    """The window ends (ns; a counter batch's sample stamp) of the records the processor counted late, from its log (it logs the first 20, then
    only counts). On a loaded machine a window of the pipeline's start can be released before a switch first
    streams, and that switch's record for it then comes late: counted, not reopened."""
    log = (f.run_dir / "process-hash-0.log").read_text(errors="replace")
    ends = {int(w) for w in re.findall(r"late record from .*, window end (\d+)\)", log)}
    late = int(f.metrics["flowtracer_processor_late_records"])
    assert late <= 20 and (late == 0) == (not ends), (late, sorted(ends))
    return ends


def _assert_path_bytes_match_the_ground_truth(f: Faults, windows: list[int]) -> None:
    """Each path's bytes over ``windows`` (first to last window end) within 2% of the ground truth's."""
    got: dict[str, int] = defaultdict(int)
    for pl in {(pl.path_id, pl.window_end_ns): pl for pl in f.path_loads}.values():  # a replay rewrites a record
        if windows[0] <= pl.window_end_ns <= windows[-1]:
            got[pl.path_id] += pl.bytes
    truth: dict[str, int] = defaultdict(int)
    for fw in f.gt.flows_in(windows[0] - S, windows[-1]):
        for path in fw.paths:
            truth["|".join(path)] += fw.bytes // len(fw.paths)
    assert truth
    for pid, b in truth.items():
        assert got[pid] == pytest.approx(b, rel=0.02), pid


def test_agent_restart_counts_the_gap_and_does_not_double_count(faults: Faults) -> None:
    start = faults.agent_back_at + WARMUP_HOPS * S
    windows = sorted({pl.window_end_ns for pl in faults.path_loads if start < pl.window_end_ns <= faults.last_end})
    assert len(windows) >= 10
    _assert_path_bytes_match_the_ground_truth(faults, windows)
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
    """A switch 90 s behind must not hold every newer window of its partition behind its own old ones (no path loads
    for the whole run): its windows are released as they are and its records for closed windows are late
    (counted); every other switch's links stay exact and current."""
    f = slow_clock
    assert f.metrics["flowtracer_processor_late_records"] > 0
    skews = _skews(f, "CounterBatch")
    assert skews[BEHIND] == pytest.approx(-90, abs=5), skews
    assert all(abs(v) < 5 for name, v in skews.items() if name != BEHIND), skews
    windows = {pl.window_end_ns for pl in f.path_loads if f.gt.start_ns + WARMUP_HOPS * S < pl.window_end_ns}
    assert len(windows) >= 15, "path loads keep coming"
    assert f.last_end >= f.gt.tick_ends[-1] - 5 * S, "and they are current"
    checked, unmeasured = 0, []
    for ll in f.link_loads:
        if BEHIND not in ll.link and ll.window_end_ns in windows and ll.window_end_ns <= f.last_end:
            if not ll.measured_valid:
                # a batch that came after the window was released (a busy machine) leaves the link unmeasured,
                # said so, never wrong
                unmeasured.append((ll.link, ll.window_end_ns))
                continue
            assert ll.measured_bytes == f.gt.link_bytes(ll.window_start_ns, ll.window_end_ns).get(ll.link, 0)
            checked += 1
    assert len(unmeasured) <= 0.02 * (checked + len(unmeasured)), unmeasured
    assert checked >= 0.9 * 20 * len([w for w in windows if w <= f.last_end])


OUTAGE_S = 120


@dataclass
class Outage:
    faults: Faults
    cut: tuple[int, int]  # wall clock (ns): broker cut off, broker back
    buffered_at_end: dict[str, float]  # stage -> flowtracer_kafka_buffered just before the broker came back
    sinks: dict[str, dict[str, float]]  # stage -> its /metrics after the catch-up
    closed: dict[str, tuple[int, int]]  # stage -> (sent, dropped) its Kafka sink logged when it closed


def _caught_up(pipeline: LocalPipeline, port: int, timeout_s: float) -> None:
    """Wait until the processor finalizes windows of the present again (the backlog is done), at most timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pipeline.wait(2)
        if _metrics(port).get("flowtracer_processor_last_window_end_seconds", 0) > time.time() - 8:
            return


def _finalized_past(pipeline: LocalPipeline, port: int, end_ns: int, timeout_s: float) -> None:
    """Wait until the processor has finalized a window ending after ``end_ns`` (wall clock), at most timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _metrics(port).get("flowtracer_processor_last_window_end_seconds",
                                                             0) * S <= end_ns:
        pipeline.wait(1)


def _sink_closed(log: Path) -> tuple[int, int]:
    """(sent, dropped) from the Kafka sink's last "closed" line in a stage's log."""
    found = re.findall(r"Kafka sink \S+ closed: (\d+) sent, (\d+) dropped", log.read_text(errors="replace"))
    assert found, f"no Kafka sink summary in {log}"
    return int(found[-1][0]), int(found[-1][1])


@pytest.fixture(scope="module")
def outage(tmp_path_factory: pytest.TempPathFactory) -> Outage:
    """The broker unreachable for 2 minutes under a running pipeline (every stage at once), then back.

    Tansu keeps its data in memory only: a restarted process would be a broker that lost every topic, offset and
    group. So the broker runs on, and every client reaches it through a proxy (the address it advertises) that is
    cut: open connections are reset and new ones refused on the same port, as when a broker is stopped.
    """
    tmp = tmp_path_factory.mktemp("outage")
    options, port = _options(tmp, None)
    sink_ports = {"collect": _free_port(), "agent": _free_port()}
    options.collector_args = ("--metrics-port", str(sink_ports["collect"]))
    options.agent_args = ("--metrics-port", str(sink_ports["agent"]))
    tansu_port = _free_port()
    with TcpProxy(tansu_port) as proxy:
        broker = TansuBroker(tansu_port, advertise=proxy.address, log_dir=tmp)
        with LocalPipeline(options, tmp / "run", broker=broker) as pipeline:
            pipeline.wait(20)
            cut_at = time.time_ns()
            proxy.cut()
            pipeline.wait(OUTAGE_S)  # every stage must stay up
            buffered = {s: _metrics(p)["flowtracer_kafka_buffered"] for s, p in sink_ports.items()}
            proxy.restore()
            back_at = time.time_ns()
            _caught_up(pipeline, port, timeout_s=120)
            pipeline.wait(8)
            # The windows after the outage are asserted too: a worker that catches up within a poll would otherwise
            # be stopped before 10 s of them are finalized.
            _finalized_past(pipeline, port, back_at + 13 * S, timeout_s=60)
            metrics = _metrics(port)
            sinks = {s: _metrics(p) for s, p in sink_ports.items()}
            pipeline.stop_stages()
            got = _consume(pipeline.bootstrap)
    closed = {s: _sink_closed(pipeline.stage(s).log_path) for s in sink_ports}
    f = _faults(pipeline, got, metrics, 0, back_at, (cut_at, back_at), tmp / "run")
    return Outage(f, (cut_at, back_at), buffered, sinks, closed)


def test_broker_outage_is_buffered_by_collector_and_agent_and_nothing_is_dropped(outage: Outage) -> None:
    for stage in ("collect", "agent"):
        assert outage.buffered_at_end[stage] >= 0.5 * OUTAGE_S, (stage, "buffered the outage's records")
        m = outage.sinks[stage]
        dropped = {k: v for k, v in m.items() if k.startswith("flowtracer_kafka_dropped_total")}
        assert not any(dropped.values()), (stage, dropped)
        assert m["flowtracer_kafka_buffered"] < 0.1 * outage.buffered_at_end[stage], (stage, "the backlog is delivered")
        sent, dropped_at_close = outage.closed[stage]
        assert dropped_at_close == 0 and sent > 0, (stage, outage.closed[stage])


def test_outage_windows_are_finalized_with_exact_link_loads(outage: Outage) -> None:
    """Every window of the outage (from 5 s before it to the end of the run) has every link's exact measured
    bytes, once in value. (The windows of the pipeline's start are another matter: on a loaded machine a few of
    them can be released before every switch streams.)"""
    f = outage.faults
    cut_at, back_at = outage.cut
    # Link loads come a window after path loads (the links stage waits for the attributions), so the pipeline's
    # stop can cut the last window off: up to the newest window every link's stage finalized (in order).
    newest: dict[str, int] = defaultdict(int)
    for ll in f.link_loads:
        newest[ll.link] = max(newest[ll.link], ll.window_end_ns)
    last_link_end = min(f.last_end, *newest.values())
    windows = [t for t in f.gt.tick_ends if cut_at - 5 * S < t <= last_link_end]
    during = [t for t in windows if cut_at < t < back_at]
    assert len(during) >= OUTAGE_S - 5 and last_link_end > back_at + 10 * S, "the outage's windows and later ones"
    values: dict[tuple[str, int], set[int]] = defaultdict(set)
    for ll in f.link_loads:
        if ll.window_end_ns in windows:
            assert ll.measured_valid, (ll.link, ll.window_end_ns)
            values[ll.link, ll.window_end_ns].add(ll.measured_bytes)
    links = {link for link, _ in values}
    assert len(links) == 24  # 8 host links + 4 leaf-spine cables, both directions
    missing = [(link, w) for link in links for w in windows if (link, w) not in values]
    assert not missing, f"{len(missing)} link windows never finalized, e.g. {missing[:3]}"
    for (link, w), got in values.items():
        assert got == {f.gt.link_bytes(w - S, w).get(link, 0)}, (link, w, got)
    # Nothing was waited out during the outage (the window clock stood still) and nothing came late after it;
    # the only incomplete windows, and so the only late records, are of the pipeline's start.
    log = (f.run_dir / "process-hash-0.log").read_text(errors="replace")
    released = [int(w) for w in re.findall(r"window ending (\d+) released without", log)]
    assert all(w <= cut_at - 5 * S for w in released), released
    assert all(w <= cut_at - 5 * S for w in _late_windows(f)), sorted(_late_windows(f))
    assert f.metrics["flowtracer_processor_incomplete_windows"] == len(released) < 20  # all of them are logged
    # Either way the window clock stood still: the worker noticed the silence (cut off), or a send held it for the
    # outage's length (blocked: the step that finalizes windows waited a minute for the broker's metadata).
    assert "cut off from Kafka" in log or "with outputs unacknowledged" in log, "the worker saw the outage"
    assert not f.dead_letters


def test_outage_flows_arrive_and_path_loads_match_the_ground_truth(outage: Outage) -> None:
    """The agents' buffered flow records arrive: path loads of the outage's windows equal the ground truth."""
    f = outage.faults
    cut_at, back_at = outage.cut
    windows = sorted({pl.window_end_ns for pl in f.path_loads if cut_at + S < pl.window_end_ns < back_at})
    assert len(windows) >= OUTAGE_S - 5
    _assert_path_bytes_match_the_ground_truth(f, windows)


def _kafka_client_lines(log: Path) -> list[str]:
    """The lines of a stage's (text) log written by the Kafka client loggers: aiokafka, kafka-python."""
    return re.findall(r"^\S+ \S+ \w+\s+(?:aiokafka|kafka)(?:\.[\w.]+)?: .*$", log.read_text(errors="replace"), re.M)


def _suppressed(metrics: dict[str, float]) -> float:
    return sum(v for k, v in metrics.items() if k.startswith("flowtracer_log_suppressed_total{"))


def test_outage_logs_say_so_without_a_flood(outage: Outage) -> None:
    """Unfiltered, the 2-minute outage made aiokafka write ~11,800 lines in the processor's log and kafka-python
    ~210 in the collector's and agent's (issue #16); rate-limited, each repeated template logs its first line and
    one summary per 30 s, and the rest is counted."""
    f = outage.faults
    process = _kafka_client_lines(f.run_dir / "process-hash-0.log")
    assert 0 < len(process) < 200, len(process)
    assert any("similar suppressed)" in line for line in process), "a periodic summary of the repeats"
    assert _suppressed(f.metrics) > len(process)
    for stage in ("collect", "agent"):
        lines = _kafka_client_lines(f.run_dir / f"{stage}.log")
        assert 0 < len(lines) < 100, (stage, len(lines))
        assert _suppressed(outage.sinks[stage]) > 0, stage
