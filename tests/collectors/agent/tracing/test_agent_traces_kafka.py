"""The agent with tracing on, against the simulator's trace responder and a real broker (Tansu):
PathTraces land keyed by flow id on their source leaf's partition; ended flows get tombstones."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.sources.registry import SimSource
from flowtracer.collectors.agent.tracing.wiring import TracePublisher, build_tracer
from flowtracer.collectors.kafka_sink import KafkaSink
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.topics import trace_partition
from flowtracer.schemas.v1 import traces_pb2 as tpb
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import validate_workload
from flowtracer.sim.hosts.trace_responder import TraceResponder
from flowtracer.sim.hosts.views import host_view_dir, write_host_view

G = 1_000_000_000


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[Engine, Path, TraceResponder]]:
    topo = generate(FabricSpec(hosts=4, nics_per_host=1, leaves=2, spines=2, link_speed_bps=100 * G,
                               host_speed_bps=100 * G))
    wl = validate_workload({"seed": 1, "jobs": [{"channels": 2, "compute_gap": "20ms",
                                                "ops": [{"collective": "allreduce", "size": "64MiB"}]}]}, "t")
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as tmp:
        views = Path(tmp) / "hosts"
        engine = Engine(topo, wl, tick_s=0.1)
        for hs in engine.host_states.values():
            write_host_view(hs, views)
        engine.add_tick_listener(lambda _t: [write_host_view(hs, views) for hs in engine.host_states.values()])
        responder = TraceResponder(engine)
        ready = tmp_path / "ready.json"
        ready.write_text(json.dumps({"host_view_dirs": {h: str(host_view_dir(views, h)) for h in engine.host_states},
                                     "trace_responder": responder.start()}))
        try:
            yield engine, ready, responder
        finally:
            responder.stop()


def read(bootstrap: str, topic: str, want: int, max_s: float = 20) -> list[tuple[int, bytes, bytes | None]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=200)
    try:
        c.assign([TopicPartition(topic, p) for p in range(8)])
        c.seek_to_beginning()
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + max_s
        while len(out) < want and time.monotonic() < deadline:
            for tp, recs in c.poll(timeout_ms=200).items():
                out.extend((tp.partition, r.key, r.value) for r in recs)
        return out
    finally:
        c.close()


def test_agent_publishes_traces_on_the_source_leaf_partition(sim: tuple[Engine, Path, TraceResponder],
                                                             kafka: TansuBroker, unique_id: str) -> None:
    engine, ready, responder = sim
    kafka.create_topics({unique_id: 8})
    cfg = AgentConfig(source="sim", sim_endpoints=ready, interval="100ms", agent_id="tracer-test",
                      tracing={"enabled": True, "transport": "sim", "probes_per_second": 2000, "burst": 100,
                               "timeout": "200ms", "expire": "1s"})
    topo = engine.fabric.topology
    sink = KafkaSink(kafka.bootstrap, client_id="agent-trace-test", enable_idempotence=False)
    publisher = TracePublisher(sink, topic=unique_id)
    tracer = build_tracer(cfg, topo, publisher)
    a = Agent(cfg, SimSource(cfg), sink, topo, tracer=tracer)
    try:
        start = engine.now_ns
        for i in range(4):
            engine.advance(1)
            a.window(start + (i + 1) * 100_000_000)
        flows = dict(tracer.planner.flows)
        assert flows
        done = tracer.run_until_idle(10)
        assert {t.flow_id for t in done} == set(flows)
        time.sleep(1.1)  # nothing observed since: every flow expires
        tracer.step(0.01)
        assert sink.flush(10)
    finally:
        sink.close(timeout=5)
    recs = read(kafka.bootstrap, unique_id, 2 * len(flows))
    traces = [(p, k.decode(), tpb.PathTrace.FromString(v)) for p, k, v in recs if v is not None]
    tombs = {(p, k.decode()) for p, k, v in recs if v is None}
    assert len(traces) == len(flows) and len(tombs) == len(flows)
    for p, key, t in traces:
        f = flows[key].flow
        assert t.flow_id == key and key.startswith(f"{f.host}:") and key.count("/") == 2
        assert p == trace_partition(f.src_leaf, 8) and t.src_leaf == f.src_leaf
        assert t.status == tpb.TRACE_STATUS_COMPLETE and t.agent_id == "tracer-test"
        assert t.valid_until_ns == t.finished_ns + 2 * 600 * 1_000_000_000  # its refresh (10 min) and as much grace
        assert t.hops[0].switch == f.src_leaf and t.hops[-1].switch == f.dst_leaf
        assert (p, key) in tombs
    assert responder.answered >= len(flows)
