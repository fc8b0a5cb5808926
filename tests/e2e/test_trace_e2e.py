"""The trace resolver in the whole pipeline: path traces produced to the real broker, the processor with
``--resolver trace`` places flows on them.

The simulator hashes with seed 7; the processor's topology says seed 0, so its hash model is wrong and
only the traces can say where flows go. A thread in the test plays the tracing agents: it reads the
flows topic as the processor does and, for each new flow id, publishes a PathTrace of the path the
simulator routes it on (``Fabric.hash_path`` with seed 7, which the processor is not told) to the
path-traces topic, keyed by flow id, on its source leaf's partition. Scored against the simulator's
ground truth: per-path loads within 5%, every path's bytes placed by traces.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from path_traces import make_trace

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, flows_pb2
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.stream.resolvers.contract import FlowObs

pytestmark = pytest.mark.slow

S = 1_000_000_000
RUN_S = 35
PARTITIONS = 4


def _tracer(bootstrap: str, fabric: Fabric, stop: threading.Event) -> None:
    """Trace every new flow seen on the flows topic, as the host agents will."""
    consumer = KafkaConsumer(topics.FLOWS.name, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=500, enable_auto_commit=False)
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    seen: set[str] = set()
    while not stop.is_set():
        for m in consumer:
            batch = flows_pb2.FlowBatch.FromString(m.value)
            for f in batch.flows:
                src, dst = fabric.nics.get(f"{batch.host}:{f.rdma_device}"), fabric.nic_by_ip.get(f.dst_ip)
                fid = f"{batch.host}:{f.rdma_device}/{f.lqpn}/{f.qp_generation}"
                if src is None or dst is None or fid in seen:
                    continue
                seen.add(fid)
                obs = FlowObs(fid, src.name, dst.name, f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, f.lqpn,
                              f.rqpn, 0)
                path = fabric.hash_path(HeaderFields(f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port,
                                                     dst_qpn=f.rqpn), src.name, dst.name)
                assert path is not None
                trace = make_trace(fabric, obs, path, batch.window_end_ns)
                producer.send(topics.PATH_TRACES.name, key=fid.encode(), value=trace.SerializeToString(),
                              partition=topics.trace_partition(src.leaf, PARTITIONS))
            producer.flush()
            if stop.is_set():
                break
    producer.close()
    consumer.close()


def test_traced_flows_are_placed_on_their_paths(tmp_path: Path) -> None:
    real_spec = FabricSpec(hosts=16, leaves=4, spines=2, name="ft16", hash_seed=7)
    real = tmp_path / "fabric-seed7.yaml"
    real.write_text(generate(real_spec).to_yaml())
    believed = tmp_path / "fabric-seed0.yaml"
    believed.write_text(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="ft16")).to_yaml())
    options = PipelineOptions(topology=real, partitions=PARTITIONS, resolvers=("trace",), processor_topology=believed)
    stop = threading.Event()
    with LocalPipeline(options, tmp_path / "run") as pipeline:
        tracer = threading.Thread(target=_tracer, args=(pipeline.bootstrap, Fabric(generate(real_spec)), stop),
                                  daemon=True)
        tracer.start()
        pipeline.wait(RUN_S)
        pipeline.stop_stages()
        stop.set()
        tracer.join(10)
        consumer = KafkaConsumer(topics.PATH_LOADS.name, bootstrap_servers=pipeline.bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=4000, enable_auto_commit=False)
        loads = [analytics_pb2.PathLoad.FromString(m.value) for m in consumer]
        consumer.close()
    gt = GroundTruth.load(pipeline.ready["ground_truth"])
    start = gt.start_ns + 12 * S  # agents, collectors and the first traces settled
    windows = sorted({pl.window_end_ns for pl in loads if start < pl.window_end_ns <= gt.tick_ends[-1]})
    assert len(windows) >= 10
    got: dict[str, int] = defaultdict(int)
    traced = 0
    for pl in loads:
        if windows[0] <= pl.window_end_ns <= windows[-1]:
            got[pl.path_id] += pl.bytes
            traced += pl.traced_bytes
            assert pl.resolver == "trace"
    truth: dict[str, int] = defaultdict(int)
    for fw in gt.flows_in(windows[0] - S, windows[-1]):
        if fw.flow.direction == "data":
            for path in fw.paths:
                truth["|".join(path)] += fw.bytes // len(fw.paths)
    assert truth
    for pid, b in truth.items():
        assert got[pid] == pytest.approx(b, rel=0.05), pid
    assert traced >= 0.95 * sum(got.values()), "traced flows are placed by their traces"
