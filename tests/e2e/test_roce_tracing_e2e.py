"""Tracing where switches hash on the BTH destination QP or spread packets (issue 32), the whole pipeline: the
simulator's gNMI servers and trace responder, real tracing agents, the broker, the processor with
``--resolver trace``. Scored against the simulator's ground truth (only the test reads it) over the windows after
the warm-up.

- Leaves hashing the 5-tuple plus the BTH destination QP: RoCE-formed probes place at least 98% of the bytes on
  their true paths by traces (plain UDP probes, hashed as no flow's packets are, placed 0.78 when measured).
- Leaves that spray or route adaptively: flows across leaves are labelled ``sprayed``, no collision is reported,
  and per-path loads are within 5% of the truth.
- A mixed fabric (5-tuple, BTH and adaptive leaves): each path's flows get the method their source leaf calls for.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from path_load_wait import read_topic, until_window

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.ecmp_hash import HashMode
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.sim.fabric.ground_truth import GroundTruth

pytestmark = pytest.mark.slow

S = 1_000_000_000
WARMUP_S = 15  # agents, collectors, the first traces and the re-traces that find the last sprayed flows settle
END_S = 30
LEAVES = ("leaf01", "leaf02", "leaf03", "leaf04")


class Run:
    """One pipeline run's outputs over the scored windows, and the truth."""

    def __init__(self, tmp_path: Path, modes: dict[str, HashMode], probe_form: str = "roce") -> None:
        topo = generate(FabricSpec(hosts=16, leaves=4, spines=4, name="ft16", hash_seed=7))
        switches = tuple(s.model_copy(update={"hash_mode": modes[s.name]}) if s.name in modes else s
                         for s in topo.switches)
        path = tmp_path / "fabric.yaml"
        path.write_text(topo.model_copy(update={"switches": switches}).to_yaml())
        workload = tmp_path / "ring.yaml"
        workload.write_text(yaml.safe_dump({"jobs": [{"name": "ring", "channels": 2,
                                                      "ops": [{"collective": "allreduce", "algorithm": "ring"}]}]}))
        options = PipelineOptions(topology=path, workload=str(workload), partitions=2, resolvers=("trace",),
                                  agent_tracing=True, probe_form=probe_form)
        with LocalPipeline(options, tmp_path / "run") as pipeline:
            start_ns = pipeline.ready["start_ns"]
            until_window(pipeline, start_ns + END_S * S, timeout_s=END_S + 90)
            pipeline.stop_stages()
            loads = [analytics_pb2.PathLoad.FromString(v) for _, v in read_topic(pipeline.bootstrap,
                                                                                 topics.PATH_LOADS.name) if v]
            self.collisions = [analytics_pb2.Collision.FromString(v)
                               for _, v in read_topic(pipeline.bootstrap, topics.COLLISIONS.name) if v]
        gt = GroundTruth.load(pipeline.ready["ground_truth"])
        self.first_ns = start_ns + WARMUP_S * S
        self.last_ns = min(start_ns + END_S * S, gt.tick_ends[-1])
        ends = sorted({pl.window_end_ns for pl in loads if self.first_ns <= pl.window_end_ns <= self.last_ns})
        assert len(ends) >= END_S - WARMUP_S - 2, ends
        hop = ends[1] - ends[0]
        #: path id -> [bytes, traced bytes, sprayed bytes, src NIC, dst NIC] over the scored windows
        self.est: dict[str, list] = {}
        for pl in loads:
            if pl.window_end_ns in ends:
                e = self.est.setdefault(pl.path_id, [0, 0, 0, f"{pl.src_host}:{pl.src_nic}", pl.dst_host])
                e[0] += pl.bytes
                e[1] += pl.traced_bytes
                e[2] += pl.sprayed_bytes
        self.truth: dict[str, int] = defaultdict(int)
        for per in gt.path_bytes(ends[0] - hop, ends[-1]).values():
            for p, b in per.items():
                self.truth["|".join(p)] += b
        self.leaf_of = {nic.ip: nic.leaf.split(":", 1)[0] for h in topo.hosts for nic in h.nics}
        self.nic_leaf = {f"{h.name}:{nic.rdma_device}": nic.leaf.split(":", 1)[0] for h in topo.hosts
                         for nic in h.nics}
        self.host_leaf = {h.name: h.nics[0].leaf.split(":", 1)[0] for h in topo.hosts}

    def traced_on_true_paths(self) -> float:
        """Share of the true bytes that traces placed on their true paths."""
        right = sum(min(self.est.get(p, [0, 0])[1], t) for p, t in self.truth.items())
        return right / sum(self.truth.values())

    def leaves(self, pid: str) -> tuple[str, str]:
        e = self.est[pid]
        return self.nic_leaf[e[3]], self.host_leaf[e[4]]


def test_bth_hashing_leaves_roce_probes_place_the_flows_bytes_on_their_true_paths(tmp_path: Path) -> None:
    # With probe_form "udp" the same run places 0.78 (docs/tracing.md, "Flows without one path", measured): this
    # fails on plain probes; tests/collectors/agent/tracing/test_roce_probes.py shows them wrong at every run.
    run = Run(tmp_path, dict.fromkeys(LEAVES, HashMode.FIVE_TUPLE_BTH_DQP))
    assert run.traced_on_true_paths() >= 0.98


def test_spraying_and_adaptive_leaves_give_sprayed_flows_no_collisions_and_true_path_loads(tmp_path: Path) -> None:
    modes = {"leaf01": HashMode.SPRAY, "leaf02": HashMode.SPRAY, "leaf03": HashMode.ADAPTIVE,
             "leaf04": HashMode.ADAPTIVE}
    run = Run(tmp_path, modes)
    across = [pid for pid in run.est if run.leaves(pid)[0] != run.leaves(pid)[1]]
    assert across
    placed = sum(run.est[p][0] for p in across)
    sprayed = sum(run.est[p][2] for p in across)
    assert sprayed >= 0.95 * placed, (sprayed, placed)
    assert not [c for c in run.collisions if run.first_ns <= c.window_end_ns <= run.last_ns]
    assert not [f for c in run.collisions for f in c.flows if f.method == "sprayed"]
    for pid, t in run.truth.items():
        assert run.est.get(pid, [0])[0] == pytest.approx(t, rel=0.05), pid


def test_a_mixed_fabric_gives_each_flow_its_method(tmp_path: Path) -> None:
    modes = {"leaf01": HashMode.FIVE_TUPLE, "leaf02": HashMode.FIVE_TUPLE_BTH_DQP, "leaf03": HashMode.ADAPTIVE}
    run = Run(tmp_path, modes)  # leaf04 hashes the 5-tuple by default
    for pid, (b, traced, sprayed, *_ends) in run.est.items():
        src, dst = run.leaves(pid)
        if src == "leaf03" and dst != src:  # the adaptive leaf deals these flows' packets over every spine
            assert sprayed >= 0.95 * b, (pid, b, traced, sprayed)
        else:
            assert sprayed == 0 and traced >= 0.95 * b, (pid, b, traced, sprayed)
    assert run.traced_on_true_paths() >= 0.9
