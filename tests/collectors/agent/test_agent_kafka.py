"""`flowtracer agent --source sim` into a real Kafka-protocol broker (Tansu), and with no broker at all."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka_records import consume_all

from flowtracer.cmd_agent import agent
from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.sources.registry import SimSource
from flowtracer.collectors.kafka_sink import KafkaSink
from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.fabric.topology import load_topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.topics import FLOWS
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import validate_workload
from flowtracer.sim.hosts.views import host_view_dir, write_host_view

G = 1_000_000_000


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[Engine, Path, Path]]:
    """A 4-host simulated fabric with host views; yields (engine, ready JSON, topology file)."""
    topo = generate(FabricSpec(hosts=4, nics_per_host=1, leaves=2, spines=2, link_speed_bps=100 * G,
                               host_speed_bps=100 * G))
    wl = validate_workload({"seed": 1, "jobs": [{"channels": 1, "compute_gap": "20ms",
                                                "ops": [{"collective": "allreduce", "size": "64MiB"}]}]}, "t")
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        views = Path(tmp) / "hosts"
        engine = Engine(topo, wl, tick_s=0.1)
        for hs in engine.host_states.values():
            write_host_view(hs, views)
        engine.add_tick_listener(lambda _t: [write_host_view(hs, views) for hs in engine.host_states.values()])
        ready = tmp_path / "ready.json"
        ready.write_text(json.dumps({"ready": True, "host_views": str(views),
                                     "host_view_dirs": {h: str(host_view_dir(views, h)) for h in engine.host_states}}))
        topo_file = tmp_path / "topology.yaml"
        topo_file.write_text(topo.to_yaml())
        yield engine, ready, topo_file


def test_cli_agent_streams_flow_batches_into_kafka(sim: tuple[Engine, Path, Path], kafka: TansuBroker,
                                                   unique_id: str) -> None:
    engine, ready, topo_file = sim
    kafka.create_topics({unique_id: 8})
    stop = threading.Event()
    t = threading.Thread(target=engine.run, args=(stop,), daemon=True)  # real time, 0.1 s ticks
    t.start()
    try:
        before = time.time_ns()
        r = CliRunner().invoke(agent, ["--source", "sim", "--sim-endpoints", str(ready), "--topology", str(topo_file),
                                       "--kafka", kafka.bootstrap, "--no-kafka-idempotence", "--topic", unique_id,
                                       "--interval", "100ms", "--max-windows", "3", "--agent-id", "sim-agents"])
        after = time.time_ns()
    finally:
        stop.set()
        t.join()
    assert r.exit_code == 0, r.output
    records = consume_all(kafka.bootstrap, unique_id, expect=12, idle_s=20, max_s=20)
    assert len(records) == 12  # 3 windows x 4 hosts (one NIC, one leaf each)
    batches = [(k.decode(), pb.FlowBatch.FromString(v)) for k, v in records]
    assert all(k == b.leaf and b.leaf.startswith("leaf") and b.agent_id == "sim-agents" for k, b in batches)
    # stamped with the agent's wall clock when it read the window (what the processor measures skew against)
    assert all(before <= b.received_ns <= after for _k, b in batches), [b.received_ns for _k, b in batches]
    # aligned 100 ms windows; one may span several intervals if the agent fell behind (real time, loaded machine)
    assert all(b.window_end_ns > b.window_start_ns and b.window_start_ns % 100_000_000 == 0
               and b.window_end_ns % 100_000_000 == 0 for _k, b in batches)
    for host in {b.host for _k, b in batches}:  # each host's windows are contiguous: nothing skipped
        own = sorted((b.window_start_ns, b.window_end_ns) for _k, b in batches if b.host == host)
        assert all(a[1] == b[0] for a, b in pairwise(own)), own
    flows = [f for _k, b in batches for f in b.flows if f.tx_bytes]
    assert flows and all(f.byte_source == pb.BYTE_SOURCE_QP_COUNTER and f.dst_ip and f.nccl.comm_id for f in flows)


def test_no_broker_the_agent_keeps_going_and_buffers_boundedly(sim: tuple[Engine, Path, Path]) -> None:
    engine, ready, topo_file = sim
    cfg = AgentConfig(source="sim", sim_endpoints=ready, interval="100ms")
    sink = KafkaSink(f"127.0.0.1:{free_port()}", client_id="agent-test", max_buffer=5, enable_idempotence=False)
    a = Agent(cfg, SimSource(cfg), sink, load_topology(topo_file))
    try:
        start = engine.now_ns
        for i in range(10):
            engine.advance(1)
            a.window(start + (i + 1) * 100_000_000)
        assert a.stats.windows == 9 and a.stats.batches == 36
        assert sink.buffered <= 5 and sink.dropped >= 36 - 5 and sink.sent_ok == 0
    finally:
        sink.close(timeout=0.5)
    assert FLOWS.name == cfg.topic


def test_two_agent_processes_find_each_others_peers(sim: tuple[Engine, Path, Path], kafka: TansuBroker,
                                                    unique_id: str, tmp_path: Path) -> None:
    """Two `flowtracer agent` processes, each reading two of the four hosts, as on separate machines:
    every flow to the other process's hosts gets its dst_ip through the exchanged QP ends."""
    engine, ready, topo_file = sim
    flows_topic, ends_topic = f"{unique_id}-flows", f"{unique_id}-ends"
    kafka.create_topics({flows_topic: 8, ends_topic: 1})
    views = json.loads(ready.read_text())["host_view_dirs"]
    halves = [sorted(views)[:2], sorted(views)[2:]]
    procs = []
    stop = threading.Event()
    t = threading.Thread(target=engine.run, args=(stop,), daemon=True)  # real time, 0.1 s ticks
    t.start()
    try:
        for i, hosts in enumerate(halves):
            r = tmp_path / f"ready-{i}.json"
            r.write_text(json.dumps({"host_view_dirs": {h: views[h] for h in hosts}}))
            cfg = tmp_path / f"agent-{i}.yaml"
            cfg.write_text(f"peer_topic: {ends_topic}\n")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "flowtracer", "agent", "-c", str(cfg), "--source", "sim", "--sim-endpoints",
                 str(r), "--topology", str(topo_file), "--kafka", kafka.bootstrap, "--no-kafka-idempotence",
                 "--topic", flows_topic, "--interval", "200ms", "--max-windows", "15", "--agent-id", f"half-{i}",
                 "--peer-exchange"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        stop.set()
        t.join()
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs
    batches = [pb.FlowBatch.FromString(v) for _k, v in consume_all(kafka.bootstrap, flows_topic, expect=60, idle_s=20, max_s=20)]
    assert len(batches) == 60  # 15 windows x 4 hosts
    ip_host = {n.ip: h.name for h in load_topology(topo_file).hosts for n in h.nics}
    # Each process publishes its QP ends from its first window on; the two start a little apart, so
    # check the windows from 1 s after the later one's first (the earlier ones may still wait for a table).
    settled = max(min(b.window_start_ns for b in batches if b.host in half) for half in halves) + 1_000_000_000
    crossing = 0
    for b in batches:
        other = halves[1] if b.host in halves[0] else halves[0]
        for f in b.flows:
            if f.tx_bytes and b.window_start_ns >= settled:
                assert ip_host.get(f.dst_ip, "") not in ("", b.host), (b.host, f.lqpn, f.dst_ip)
                crossing += ip_host[f.dst_ip] in other
    assert crossing > 0  # found only through the other process's published QP ends
