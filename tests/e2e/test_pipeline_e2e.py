"""The whole pipeline against the simulator's ground truth: sim -> collect/agent -> Kafka -> process -> Kafka/VM.

One run (module fixture) of the FlowTracer-like 16-host fabric with NCCL ring all-reduce traffic,
whose default QP numbering hashes two rings onto one uplink of two leaves (a known collision); every
stage is a real `flowtracer` subprocess, the broker is Tansu and the store VictoriaMetrics. The
assertions compare what the processor wrote with what the simulator says really happened.

The fabric mixes vendors (``PLATFORMS``): each leaf serves its counters under another platform's gNMI paths
(SR Linux native, SONiC COUNTERS_DB, EOS Smash + OpenConfig, NX-OS device model), the spines OpenConfig; the
collector reads each through its profile, so the link loads below are exact on every platform at once. Two
switches are not streamed (``MODES``): the collector polls leaf02 (gNMI POLL) and asks spine02 for one snapshot a
second (ONCE); their links must be exactly as exact as the streamed ones.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from kafka import KafkaConsumer, KafkaProducer

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, counters_pb2
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.stream.analytics.fim import fabric_fim, fim

pytestmark = pytest.mark.slow

S = 1_000_000_000
RUN_S = 60
WARMUP_HOPS = 6  # agents and collectors starting, baseline samples, the first (grace-released) windows
ROLLING = 10
#: Switch -> vendor profile (fabric/profiles) it serves; the rest OpenConfig.
PLATFORMS = {"leaf01": "nokia_srl", "leaf02": "sonic", "leaf03": "arista_eos", "leaf04": "cisco_nxos"}
#: Switch -> subscription mode other than STREAM, at a 1 s interval the collector drives.
MODES = {"leaf02": "poll", "spine02": "once"}


def _mixed_platforms(topo: Topology) -> str:
    """The topology's YAML with ``gnmi.platform`` set per PLATFORMS (the sim serves, the collector reads, it)."""
    data = yaml.safe_load(topo.to_yaml())
    for sw in data["switches"]:
        if sw["name"] in PLATFORMS:
            sw["gnmi"]["platform"] = PLATFORMS[sw["name"]]
    return yaml.safe_dump(data, sort_keys=False)


@dataclass
class Outputs:
    link_loads: list[analytics_pb2.LinkLoad] = field(default_factory=list)
    path_loads: list[analytics_pb2.PathLoad] = field(default_factory=list)
    fims: list[analytics_pb2.FimSample] = field(default_factory=list)
    collisions: list[analytics_pb2.Collision] = field(default_factory=list)
    dead_letters: list[analytics_pb2.DeadLetter] = field(default_factory=list)


@dataclass
class Run:
    gt: GroundTruth
    out: Outputs
    victoria: Any
    first_end: int  # first window end that is fully measured
    last_end: int  # last window end the ground truth covers


def _consume(bootstrap: str) -> Outputs:
    out = Outputs()
    types = {topics.LINK_LOADS.name: (analytics_pb2.LinkLoad, out.link_loads),
             topics.PATH_LOADS.name: (analytics_pb2.PathLoad, out.path_loads),
             topics.FIM.name: (analytics_pb2.FimSample, out.fims),
             topics.COLLISIONS.name: (analytics_pb2.Collision, out.collisions),
             topics.DEAD_LETTER.name: (analytics_pb2.DeadLetter, out.dead_letters)}
    consumer = KafkaConsumer(*types, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=4000, enable_auto_commit=False)
    for m in consumer:
        cls, dest = types[m.topic]
        dest.append(cls.FromString(m.value))
    consumer.close()
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, victoria: Any) -> Run:
    tmp = tmp_path_factory.mktemp("e2e")
    topo = tmp / "fabric16.yaml"
    topo.write_text(_mixed_platforms(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="ft16"))))
    collector = tmp / "collector.yaml"
    collector.write_text(yaml.safe_dump({"targets": [{"name": n, "mode": m, "interval": "1s"}
                                                     for n, m in MODES.items()]}))
    options = PipelineOptions(topology=topo, partitions=4, resolvers=("hash", "infer"), influx_url=victoria.url,
                              collector_args=("--config", str(collector)))
    pipeline = LocalPipeline(options, tmp / "run")
    pipeline.env["INFLUX_TOKEN"] = "e2e-not-a-secret"
    with pipeline:
        pipeline.wait(RUN_S / 2)
        # Bad input in the middle of the run: garbage and a future schema version.
        producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap, enable_idempotence=False)
        producer.send(topics.COUNTERS.name, key=b"leaf01", value=b"\x08\xff\xff garbage")
        future = counters_pb2.CounterBatch(schema_version=2, switch="leaf01", timestamp_ns=time.time_ns())
        producer.send(topics.COUNTERS.name, key=b"leaf01", value=future.SerializeToString())
        producer.flush()
        producer.close()
        pipeline.wait(RUN_S / 2)
        pipeline.stop_stages()
        out = _consume(pipeline.bootstrap)
    gt = GroundTruth.load(pipeline.ready["ground_truth"])
    return Run(gt, out, victoria, gt.start_ns + WARMUP_HOPS * S, _last_scored(gt, out))


def _last_scored(gt: GroundTruth, out: Outputs) -> int:
    """The newest window both the simulator ran and every processor finalized before being stopped."""
    finalized = min(max(f.window_end_ns for f in out.fims if f.group == "fabric" and f.resolver == r)
                    for r in {f.resolver for f in out.fims if f.resolver})
    return min(gt.tick_ends[-1], finalized)


def _window_ok(r: Run, end: int) -> bool:
    return r.first_end <= end <= r.last_end


def test_measured_link_loads_equal_ground_truth(run: Run) -> None:
    checked = 0
    by_mode: dict[str, int] = defaultdict(int)
    for ll in run.out.link_loads:
        if not ll.measured_valid or not _window_ok(run, ll.window_end_ns):
            continue
        truth = run.gt.link_bytes(ll.window_start_ns, ll.window_end_ns).get(ll.link, 0)
        assert ll.measured_bytes == truth, (ll.link, ll.window_end_ns)
        checked += 1
        # the switch whose counter measured it: the transmitting switch, or a host uplink's leaf
        by_mode[MODES.get(ll.dst_node if ll.src_node.startswith("host") else ll.src_node, "stream")] += 1
    # 16 host links x 2 directions + 8 cables x 2 directions = 48 links per window, for most windows.
    assert checked >= 48 * (RUN_S - WARMUP_HOPS - 8)
    # per window the polled leaf measures 10 links (2 uplinks, 4 host links each way), the spine read ONCE 4
    assert by_mode["poll"] >= 10 * (RUN_S - WARMUP_HOPS - 8) and by_mode["once"] >= 4 * (RUN_S - WARMUP_HOPS - 8), \
        by_mode


def test_hash_attribution_explains_the_measured_bytes(run: Run) -> None:
    loads = [ll for ll in run.out.link_loads
             if ll.resolver == "hash" and ll.measured_valid and _window_ok(run, ll.window_end_ns)]
    measured = sum(ll.measured_bytes for ll in loads)
    unexplained = sum(abs(ll.unexplained_bytes) for ll in loads)
    assert measured > 0
    assert unexplained / measured < 0.01


@pytest.mark.parametrize(("resolver", "tolerance"), [("hash", 0.02), ("infer", 0.05)])
def test_path_loads_match_ground_truth_after_30_s(run: Run, resolver: str, tolerance: float) -> None:
    """hash within 2% over the whole run; infer within 5% once it has had 30 s of evidence."""
    start = run.gt.start_ns + 30 * S if resolver == "infer" else run.first_end
    got: dict[str, int] = defaultdict(int)
    for pl in run.out.path_loads:
        if pl.resolver == resolver and start < pl.window_end_ns <= run.last_end:
            got[pl.path_id] += pl.bytes
    windows = sorted({pl.window_end_ns for pl in run.out.path_loads
                      if pl.resolver == resolver and start < pl.window_end_ns <= run.last_end})
    truth: dict[str, int] = defaultdict(int)
    for fw in run.gt.flows_in(windows[0] - S, windows[-1]):
        for path in fw.paths:
            truth["|".join(path)] += fw.bytes // len(fw.paths)
    assert truth and set(got) >= set(truth)
    for pid, b in truth.items():
        assert got[pid] == pytest.approx(b, rel=tolerance), pid
    stray = sum(b for pid, b in got.items() if pid not in truth)
    assert stray <= tolerance * sum(truth.values()), "bytes placed on paths no flow took"


def _gt_fims(r: Run, end: int) -> tuple[dict[str, float], dict[str, int]]:
    loads = r.gt.group_loads(end - ROLLING * S, end)
    return {g: fim(v) for g, v in loads.items()}, {g: sum(v) for g, v in loads.items()}


def test_fim_series_within_002_of_ground_truth(run: Run) -> None:
    checked = 0
    for f in run.out.fims:
        end = f.window_end_ns
        if end - ROLLING * S < run.first_end or end > run.last_end:
            continue  # the rolling window must lie inside fully measured time
        if f.resolver == "infer" and end < run.gt.start_ns + 30 * S + ROLLING * S:
            continue  # infer is judged once it has had 30 s of evidence
        fims, totals = _gt_fims(run, end)
        truth = fabric_fim(list(fims.values()), [totals[g] for g in fims]) if f.group == "fabric" else fims[f.group]
        assert f.fim == pytest.approx(truth, abs=0.02), (f.group, f.basis, end)
        checked += 1
    assert checked >= 5 * 3 * (RUN_S - WARMUP_HOPS - ROLLING - 5)  # 4 groups + fabric; measured, hash, infer


def test_the_known_collision_is_reported_with_the_right_flows(run: Run) -> None:
    """Ground truth: on each leaf group, the member carrying two or more rings while a sibling idles."""
    meta_groups = run.gt.meta["ecmp_groups"]
    expected: dict[tuple[str, int], tuple[str, set[tuple[str, str, int]]]] = {}
    for end in range(run.first_end, run.last_end + 1, S):
        per_member: dict[str, set[tuple[str, str, int]]] = defaultdict(set)
        for fw in run.gt.flows_in(end - S, end):
            if fw.bytes < 0.1 * 50e9:  # heavy: 10% of a 400G member in the hop
                continue
            for path in fw.paths:
                for lid in path:
                    per_member[lid].add((fw.flow.src_ip, fw.flow.dst_ip, fw.flow.udp_src_port))
        for gid, members in meta_groups.items():
            counts = [len(per_member.get(m, ())) for m in members]
            busiest = max(range(len(members)), key=lambda i: counts[i])
            if counts[busiest] >= 2 and min(counts) <= counts[busiest] - 2:
                expected[(gid, end)] = (members[busiest], per_member[members[busiest]])
    assert expected, "the scenario should contain a collision"
    got = {(c.group, c.window_end_ns): c for c in run.out.collisions if c.resolver == "hash"}
    matched = 0
    absent = []
    for (gid, end), (link, flows) in expected.items():
        c = got.get((gid, end))
        if c is None:
            absent.append(((end - run.gt.start_ns) // S, gid))
            continue
        assert c.link == link
        assert {(f.key.src_ip, f.key.dst_ip, f.key.udp_src_port) for f in c.flows} == flows
        matched += 1
    assert matched >= 0.9 * len(expected), f"no collision reported at (second of the run, group): {sorted(absent)}"
    assert all(c.flows and c.idle_utilization < c.link_utilization for c in got.values())


def test_dead_letters_name_the_problem_and_processing_continues(run: Run) -> None:
    reasons = [d.reason for d in run.out.dead_letters]
    assert any(r.startswith("cannot decode CounterBatch") for r in reasons), reasons
    assert any(r.startswith("unknown schema_version 2 in CounterBatch") for r in reasons), reasons
    bad_at = min(d.received_ns for d in run.out.dead_letters)
    later = [f for f in run.out.fims if f.group == "fabric" and f.window_end_ns > bad_at + 5 * S]
    assert later, "windows after the bad records were still processed"


def test_store_holds_what_kafka_holds(run: Run) -> None:
    """VictoriaMetrics received the points through influxdb-client: same values, window-end timestamps."""
    kafka = {(f.window_end_ns // 1_000_000, f.basis, f.resolver): f.fim
             for f in run.out.fims if f.group == "fabric" and f.basis == analytics_pb2.LOAD_BASIS_ATTRIBUTED}
    stored = {}
    for s in run.victoria.export('fim_fim{group="fabric",basis="attributed"}'):
        for ts, v in zip(s["timestamps"], s["values"], strict=True):
            stored[(ts, analytics_pb2.LOAD_BASIS_ATTRIBUTED, s["metric"]["resolver"])] = v
    assert set(kafka) <= set(stored)
    for k, v in kafka.items():
        assert stored[k] == pytest.approx(v, abs=1e-9)
    by_ts = {}
    for s in run.victoria.export('link_load_measured_bytes{link="leaf01:Ethernet5>spine01:Ethernet1",resolver="hash"}'):
        by_ts.update(zip(s["timestamps"], s["values"], strict=True))  # a series may come in several lines
    for ll in run.out.link_loads:
        if ll.link == "leaf01:Ethernet5>spine01:Ethernet1" and ll.measured_valid and ll.resolver == "hash":
            assert by_ts[ll.window_end_ns // 1_000_000] == ll.measured_bytes


@pytest.fixture(scope="module")
def wrong_seed(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The operator's topology says seed 0; the switches really hash with seed 7 (and so does the simulator).

    CRC16 is affine in its initial value: seed 7 flips the low bit of the hash of every 13-byte 5-tuple,
    so with two uplinks the believed model puts every flow on the uplink it does not take.
    """
    tmp = tmp_path_factory.mktemp("e2e-seed")
    real = tmp / "fabric16-seed7.yaml"
    real.write_text(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="ft16", hash_seed=7)).to_yaml())
    believed = tmp / "fabric16-seed0.yaml"
    believed.write_text(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="ft16", hash_seed=0)).to_yaml())
    options = PipelineOptions(topology=real, partitions=4, resolvers=("hash", "infer"), processor_topology=believed)
    with LocalPipeline(options, tmp / "run") as pipeline:
        pipeline.wait(50)
        pipeline.stop_stages()
        out = _consume(pipeline.bootstrap)
    gt = GroundTruth.load(pipeline.ready["ground_truth"])
    return Run(gt, out, None, gt.start_ns + WARMUP_HOPS * S, _last_scored(gt, out))


def _unexplained_share(r: Run, resolver: str) -> float:
    loads = [ll for ll in r.out.link_loads if ll.resolver == resolver and ll.measured_valid
             and ll.window_end_ns > r.gt.start_ns + 30 * S and ll.window_end_ns <= r.last_end]
    return sum(abs(ll.unexplained_bytes) for ll in loads) / max(1, sum(ll.measured_bytes for ll in loads))


def test_a_wrong_hash_seed_shows_as_unexplained_bytes_and_infer_still_finds_the_paths(wrong_seed: Run) -> None:
    r = wrong_seed
    assert _unexplained_share(r, "hash") > 0.05, "the wrong seed puts flows on the wrong uplinks"
    assert _unexplained_share(r, "infer") < 0.01
    start = r.gt.start_ns + 30 * S
    truth: dict[str, int] = defaultdict(int)
    got: dict[str, int] = defaultdict(int)
    windows = sorted({pl.window_end_ns for pl in r.out.path_loads
                      if pl.resolver == "infer" and start < pl.window_end_ns <= r.last_end})
    for pl in r.out.path_loads:
        if pl.resolver == "infer" and windows[0] <= pl.window_end_ns <= windows[-1]:
            got[pl.path_id] += pl.bytes
    for fw in r.gt.flows_in(windows[0] - S, windows[-1]):
        for path in fw.paths:
            truth["|".join(path)] += fw.bytes // len(fw.paths)
    for pid, b in truth.items():
        assert got[pid] == pytest.approx(b, rel=0.05), pid
