"""A next hop withdrawn under a running pipeline: the processor's group follows the AFT within a window, and the
drift from the topology is reported, against the simulator's ground truth; the hash resolver follows the live
groups too, so the links are explained again, and a weighted group carries (and is attributed) its weights.

One short run (about 14 s of traffic) of the 16-host fabric with ring all-reduce traffic (128 QPs per connection);
8 s in, the workload withdraws leaf01's next hop toward spine01 (``nh_withdraw``: the route, not the cable) and gives
leaf02's next hop toward spine02 weight 2 (``nh_weight``: the AFT says so and the simulated switch hashes 1:2).
Every stage is a real ``flowtracer`` subprocess (sim, collector, agent, processor), the broker is Tansu; outputs are
read back from Kafka.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
import yaml
from kafka import KafkaConsumer

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.stream.analytics.fim import fim

pytestmark = pytest.mark.slow

S = 1_000_000_000
WITHDRAW_AT_S = 8
PORT = "Ethernet5"  # leaf01 -> spine01
GROUP = "leaf01:spine01|spine02"
QPS = 128  # ring QPs per connection: 256 flows over leaf02's uplinks, so hashing spreads them by weight
ROLLING_S = 2  # rolling FIM window: short, so that some windows lie wholly after the weight change


@dataclass
class Run:
    gt: GroundTruth
    fims: list[analytics_pb2.FimSample]
    drifts: list[analytics_pb2.EcmpDrift]
    loads: list[analytics_pb2.LinkLoad]
    logs: str


def _until_leaf01_fim(pipeline: LocalPipeline, end_ns: int, timeout_s: float) -> None:
    """Let the pipeline run until leaf01's FIM sample of the window ending at ``end_ns`` (ns) is out."""
    consumer = KafkaConsumer(topics.FIM.name, bootstrap_servers=pipeline.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=1000).values()
            if any(f.switch == "leaf01" and f.window_end_ns >= end_ns
                   for f in (analytics_pb2.FimSample.FromString(m.value) for ms in batches for m in ms)):
                return
            pipeline.check()
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("ecmp-live")
    topo = tmp / "fabric16.yaml"
    topo.write_text(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="ft16")).to_yaml())
    workload = tmp / "withdraw.yaml"
    workload.write_text(yaml.safe_dump({
        "jobs": [{"name": "ring", "qps_per_connection": QPS, "ops": [{"collective": "allreduce", "algorithm": "ring"}]}],
        "faults": [{"at": f"{WITHDRAW_AT_S}s", "nh_withdraw": f"leaf01:{PORT}"},
                   {"at": f"{WITHDRAW_AT_S}s", "nh_weight": "leaf02:Ethernet6", "weight": 2}]}))
    options = PipelineOptions(topology=topo, workload=str(workload), partitions=2,
                              processor_args=("--rolling-window", str(ROLLING_S)))
    with LocalPipeline(options, tmp / "run") as pipeline:
        pipeline.wait(WITHDRAW_AT_S + 6)
        # On a busy machine the processor trails the simulator by seconds: go on (at most 30 s) until it has
        # finalized leaf01's windows well past the change, so every check below has its windows.
        _until_leaf01_fim(pipeline, pipeline.ready["start_ns"] + (WITHDRAW_AT_S + 5) * S, timeout_s=30)
        pipeline.stop_stages()
        types = {topics.FIM.name: analytics_pb2.FimSample, topics.ECMP_DRIFT.name: analytics_pb2.EcmpDrift,
                 topics.LINK_LOADS.name: analytics_pb2.LinkLoad}
        consumer = KafkaConsumer(*types, bootstrap_servers=pipeline.bootstrap, auto_offset_reset="earliest",
                                 consumer_timeout_ms=4000, enable_auto_commit=False)
        got = [types[m.topic].FromString(m.value) for m in consumer]
        consumer.close()
    logs = "".join(p.read_text(errors="replace") for p in sorted((tmp / "run").glob("*.log")))
    gt = GroundTruth.load(pipeline.ready["ground_truth"])
    return Run(gt, [f for f in got if isinstance(f, analytics_pb2.FimSample)],
               [d for d in got if isinstance(d, analytics_pb2.EcmpDrift)],
               [ll for ll in got if isinstance(ll, analytics_pb2.LinkLoad)], logs)


def _aft_ports(gt: GroundTruth, t_ns: int) -> list[str]:
    """The egress ports of leaf01's group as the simulated switch's AFT showed it at ``t_ns``."""
    c = gt.counters_at("leaf01", t_ns)
    ((_, members),) = c.groups.values()
    return sorted(c.next_hops[i].interface for i in members)


def test_the_group_loses_the_withdrawn_member_within_one_window_and_drift_is_reported(run: Run) -> None:
    (event,) = [ev for ev in run.gt.events if ev["kind"] == "nh_withdraw"]
    t_w = event["t_ns"]
    leaf01 = sorted((f for f in run.fims if f.switch == "leaf01" and f.basis == analytics_pb2.LOAD_BASIS_MEASURED),
                    key=lambda f: f.window_end_ns)
    # The withdrawal happens at the tick ending t_w: the switch's sample stamped t_w still counted the old group,
    # its AFT delete is stamped t_w too, so the window ending at t_w may show either. Every later one must show it.
    before = [f for f in leaf01 if f.window_end_ns < t_w]
    after = [f for f in leaf01 if f.window_end_ns >= t_w + S]
    assert before and len(after) >= 3, (len(before), len(after))
    for f in before:
        assert _aft_ports(run.gt, f.window_end_ns) == ["Ethernet5", "Ethernet6"]  # what the switch said ...
        assert (f.group, f.members, f.group_source) == (GROUP, 2, "aft")  # ... and what the processor used
    for f in after:
        assert _aft_ports(run.gt, f.window_end_ns) == ["Ethernet6"]
        assert (f.group, list(f.member_links), f.group_source) == (
            "leaf01:spine02", ["leaf01:Ethernet6>spine02:Ethernet1"], "aft"), f.window_end_ns
    # The simulated switches stream next-hop counters: the measured member loads come from them.
    assert {f.load_source for f in leaf01 if f.total_bytes} == {"next_hop_counters"}

    drift = [d for d in run.drifts if d.switch == "leaf01"]
    assert not [d for d in drift if d.window_end_ns < t_w], "no drift before the withdrawal"
    ends = {d.window_end_ns for d in drift}
    assert {f.window_end_ns for f in after} <= ends, "drift reported in every window after it"
    assert {(d.group, d.kind, d.port, d.link, d.topology_weight, d.network_weight) for d in drift} == {
        (GROUP, analytics_pb2.DRIFT_KIND_MEMBER_WITHDRAWN, PORT, "leaf01:Ethernet5>spine01:Ethernet1", 1, 0)}
    assert not [d for d in run.drifts if d.switch not in ("leaf01", "leaf02")], "the others agree with the topology"
    assert run.logs.count("ECMP drift on leaf01") == 1, "one log line for the change, not one per window"


def test_a_weight_change_is_followed_within_one_window_and_reported(run: Run) -> None:
    (event,) = [ev for ev in run.gt.events if ev["kind"] == "nh_weight"]
    t_c = event["t_ns"]
    leaf02 = [f for f in run.fims if f.switch == "leaf02" and f.basis == analytics_pb2.LOAD_BASIS_MEASURED]
    before = [f for f in leaf02 if f.window_end_ns < t_c]
    after = [f for f in leaf02 if f.window_end_ns >= t_c + S]
    assert before and len(after) >= 3, (len(before), len(after))
    assert {(f.group, tuple(f.member_weights)) for f in before} == {("leaf02:spine01|spine02", (1, 1))}
    assert {(f.group, tuple(f.member_weights)) for f in after} == {("leaf02:spine01|spine02", (1, 2))}
    ((_, members),) = run.gt.counters_at("leaf02", after[0].window_end_ns).groups.values()
    assert len(members) == 2  # the simulated switch kept both members; only the weight changed
    drift = [d for d in run.drifts if d.switch == "leaf02"]
    assert {f.window_end_ns for f in after} <= {d.window_end_ns for d in drift}
    assert {(d.kind, d.port, d.topology_weight, d.network_weight) for d in drift} == {
        (analytics_pb2.DRIFT_KIND_WEIGHT_CHANGED, "Ethernet6", 1, 2)}
    assert not [d for d in drift if d.window_end_ns < t_c]


def test_after_the_withdrawal_the_hash_resolver_explains_the_links_again(run: Run) -> None:
    """The flows stage hashes over leaf01's live group: no bytes attributed to the withdrawn uplink, none missing."""
    (event,) = [ev for ev in run.gt.events if ev["kind"] == "nh_withdraw"]
    after = [ll for ll in run.loads if ll.window_end_ns >= event["t_ns"] + S and ll.measured_valid
             and ll.src_node.startswith(("leaf", "spine")) and ll.dst_node.startswith(("leaf", "spine"))]
    windows = {ll.window_end_ns for ll in after}
    assert len(windows) >= 3, windows
    withdrawn = [ll for ll in after if ll.link == "leaf01:Ethernet5>spine01:Ethernet1"]
    assert len(withdrawn) == len(windows) and not any(ll.measured_bytes or ll.attributed_bytes for ll in withdrawn)
    assert {tuple(ll.groups) for ll in withdrawn} == {()}, "LinkLoad.groups names the live groups"
    kept = [ll for ll in after if ll.link == "leaf01:Ethernet6>spine02:Ethernet1"]
    assert {tuple(ll.groups) for ll in kept} == {("leaf01:spine02",)}
    assert sum(ll.measured_bytes for ll in kept) > 0
    measured = sum(ll.measured_bytes for ll in after)
    unexplained = sum(abs(ll.unexplained_bytes) for ll in after)
    assert unexplained / measured < 0.01, (unexplained, measured)  # test_pipeline_e2e's tolerance


def test_the_weighted_group_carries_its_weights(run: Run) -> None:
    """The simulator hashes leaf02's group 1:2 once its AFT says so (a member replicated by its weight): FIM against
    the weights is near 0, measured and as the hash resolver attributes it (it hashes the same way), while the
    same loads against equal weights are not balanced (a group still hashed 1:1 would be the other way round)."""
    (event,) = [ev for ev in run.gt.events if ev["kind"] == "nh_weight"]
    # Rolling windows wholly after the change (ROLLING_S back from their end).
    after = [f for f in run.fims if f.group == "leaf02:spine01|spine02" and f.window_end_ns >= event["t_ns"] + 2 * S]
    bases = {analytics_pb2.LOAD_BASIS_MEASURED, analytics_pb2.LOAD_BASIS_ATTRIBUTED}
    assert {f.basis for f in after} == bases and len(after) >= 2 * len(bases), len(after)
    for f in after:
        assert tuple(f.member_weights) == (1, 2) and f.window_end_ns - f.window_start_ns == ROLLING_S * S
        assert f.fim < 0.05, (f.basis, f.window_end_ns, list(f.member_bytes), f.fim)
        assert fim(list(f.member_bytes)) > 0.2, (f.basis, list(f.member_bytes))
