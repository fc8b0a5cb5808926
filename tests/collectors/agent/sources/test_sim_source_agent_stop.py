"""The simulator's ``agent_stop``: one host's view stops being written while the host forwards. The sim source (one
process acting as every host's agent) goes on for the other hosts, sends nothing for the stopped one, and after
``agent_resume`` that host's next window starts where its last one ended. Virtual time, lockstep, as
test_agent_sim_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.sources.registry import SimSource
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import validate_workload
from flowtracer.sim.hosts.views import host_view_dir, write_host_view

G = 1_000_000_000
START = 1_700_000_000 * G


class Batches(list[pb.FlowBatch]):
    """The agent's sink: every FlowBatch sent, in order."""

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.append(pb.FlowBatch.FromString(value))

    def flush(self, timeout: float | None = None) -> bool:
        return True  # nothing buffered

    close = flush


def test_a_stopped_agent_costs_only_its_host_and_resumes_from_its_last_window(tmp_path: Path) -> None:
    topo = generate(FabricSpec(hosts=4, nics_per_host=1, leaves=2, spines=1, link_speed_bps=100 * G,
                               host_speed_bps=100 * G))
    wl = validate_workload({"faults": [{"at": 3, "agent_stop": "host02"}, {"at": 6, "agent_resume": "host02"}],
                            "flows": [{"src": f"host0{i}:mlx5_0", "dst": f"host0{i % 4 + 1}:mlx5_0", "rate": "10G"}
                                      for i in range(1, 5)]}, "t")
    engine = Engine(topo, wl, tick_s=0.5, start_ns=START, ground_truth=tmp_path / "gt")
    views = tmp_path / "views"
    for hs in engine.host_states.values():
        write_host_view(hs, views)
    ready = tmp_path / "ready.json"
    ready.write_text(json.dumps({"host_view_dirs": {h: str(host_view_dir(views, h)) for h in engine.host_states}}))
    cfg = AgentConfig(source="sim", sim_endpoints=ready, agent_id="t")
    source, sink = SimSource(cfg), Batches()
    agent = Agent(cfg, source, sink, topo)
    agent.window(START)  # baselines
    held: list[bool] = []

    def tick(t_ns: int) -> None:
        for hs in engine.host_states.values():
            write_host_view(hs, views)
        if t_ns % G == G // 2 and t_ns > START + G:  # a boundary's window one tick after it, as a real-time agent waits for the views
            boundary = t_ns - G // 2
            held.append(source.now_ns() < boundary)  # would the agent still be waiting for it?
            agent.window(boundary)

    engine.add_tick_listener(tick)
    engine.advance(17)  # 8 windows
    engine.close()
    assert held == [False] * 8
    windows = {h: sorted((b.window_start_ns - START) // G for b in sink if b.host == h)
               for h in engine.host_states}
    assert windows["host01"] == windows["host03"] == windows["host04"] == list(range(8))
    # views stamped up to 3 s (before the fault acts) and from 6.5 s: windows to 3 s, none ending at 4..6, then
    # one from 3 s to 7 s
    assert windows["host02"] == [0, 1, 2, 3, 7]
    gap = next(b for b in sink if b.host == "host02" and b.window_start_ns == START + 3 * G)
    assert gap.window_end_ns == START + 7 * G
    sent = sum(f.tx_bytes for f in gap.flows)
    truth = sum(w.bytes for w in GroundTruth.load(tmp_path / "gt").flows_in(START + 3 * G, START + 7 * G)
                if w.flow.src_host == "host02")
    assert sent == truth > 0  # the host forwarded all along; its agent reports the gap's bytes when it is back
