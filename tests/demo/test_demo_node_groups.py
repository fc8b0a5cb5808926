"""The demo's heterogeneous scenario and its summary section, without the pipeline: the workload the demo writes,
and ``node_groups_section`` over agents' FlowBatches of a ring at the simulator's pace, scored against the
simulator's ground truth of the same workload (a few seconds of the engine in virtual time)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ring_batches import S, ring_batches

from flowtracer.demo.node_groups import load_inputs, node_groups_section
from flowtracer.demo.scenario import SLOW_GROUP, ScenarioError, write_scenario
from flowtracer.demo.status import Observed
from flowtracer.demo.summary import node_group_lines
from flowtracer.demo.view_state import view_state
from flowtracer.fabric.roce import FRAME_OVERHEAD_BYTES
from flowtracer.schemas import topics
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth

GIB = 2**30
#: Frame bytes a NIC sends per iteration of the 16-rank ring all-reduce of 1 GiB (MTU 4096).
FRAMES = 2 * 15 / 16 * GIB * (4096 + FRAME_OVERHEAD_BYTES) / 4096
T_SLOW = 0.05 + FRAMES * 8 / 200e9  # 50 ms of compute, then the ring at the slow group's 200G
T_FAST = 0.05 + FRAMES * 8 / 400e9


def test_the_heterogeneous_workload_has_a_slow_group(tmp_path: Path) -> None:
    sc = write_scenario(tmp_path / "sc", degrade_at_s=None, workload="heterogeneous")
    topo, wl = load_inputs(sc.topology, sc.workload)
    assert sc.node_groups and sc.congestion and sc.workload_name == "heterogeneous"
    [g] = wl.node_groups
    assert (list(g.hosts), g.nic_rate) == (SLOW_GROUP["hosts"], 200_000_000_000)
    assert wl.jobs[0].hosts == "all" and len(topo.hosts) == 16
    assert not write_scenario(tmp_path / "kc", degrade_at_s=None).node_groups
    other = tmp_path / "t.yaml"
    other.write_text(topo.to_yaml())
    with pytest.raises(ScenarioError, match="--workload heterogeneous: runs on the demo's fabric only"):
        write_scenario(tmp_path / "x", workload="heterogeneous", topology_file=other)


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("ng")
    sc = write_scenario(tmp / "sc", degrade_at_s=None, workload="heterogeneous")
    topo, wl = load_inputs(sc.topology, sc.workload)
    engine = Engine(topo, wl, start_ns=0, ground_truth=tmp / "gt")
    engine.advance(22)
    engine.close()
    gt = GroundTruth.load(tmp / "gt")
    obs = Observed(watch_flows=True)
    hosts = [h.name for h in topo.hosts]
    for b in ring_batches(topo, hosts, T_SLOW, FRAMES, 20, start_ns=0):
        obs.add(topics.FLOWS.name, b.SerializeToString(), 0)
    series = [{"window_end_ns": e * S, "measured": 0.5 if e > 12 else 0.9, "ground_truth": 0.5 if e > 12 else None}
              for e in range(5, 21)]
    section = node_groups_section(obs, topo, wl, gt, 4.0, series)
    assert section is not None
    return {"s": section, "obs": obs}


def test_section_names_the_slow_group_and_scores_the_iteration(scored: dict) -> None:
    s = scored["s"]
    assert s["job"] == "ring-allreduce" and s["hosts_measured"] == 16 and s["span"] == {"from_s": 4.0, "to_s": 20.0}
    # The simulator's ground truth is the same arithmetic the batches were built with.
    assert s["iteration_s_ground_truth"] == pytest.approx(T_SLOW, rel=1e-3)
    assert s["iteration_s"] == pytest.approx(T_SLOW, rel=0.01) and s["consistent"] and s["iteration_error"] < 0.01
    slow, rest = s["groups"]
    assert slow["slow"] and slow["hosts"] == SLOW_GROUP["hosts"] and slow["nic_rate_bps"] == 200e9
    assert not rest["slow"] and len(rest["hosts"]) == 12 and rest["nic_rate_bps"] == 400e9
    assert slow["nic_busy"] == pytest.approx(2 * rest["nic_busy"], abs=2e-3)
    assert s["model"]["all_fast_iteration_s"] == pytest.approx(T_FAST, rel=0.01)
    assert s["model"]["nic_bottleneck"] == ",".join(SLOW_GROUP["hosts"])
    assert s["all_fast_iteration_s_ground_truth"] == pytest.approx(T_FAST, rel=1e-3)  # the counterfactual run
    fim = s["fim"]
    # Only the windows compared with ground truth (the FIM section's fully measured ones).
    assert (fim["with_slow_group_measured"], fim["with_slow_group_ground_truth"], fim["windows"]) == (0.5, 0.5, 8)
    assert fim["replay_as_recorded"] == pytest.approx(fim["replay_all_fast"])  # a ring alone: scale-invariant


def test_summary_and_the_view_show_the_slow_group(scored: dict) -> None:
    s = scored["s"]
    text = "\n".join(node_group_lines(s))
    assert f"iteration {s['iteration_s'] * 1e3:.1f} ms, ground truth {T_SLOW * 1e3:.1f} ms" in text.splitlines()[0]
    assert "SLOW group host13, host14, host15, host16 (4): NIC 200G" in text
    assert "other hosts host01..host12 (12): NIC 400G" in text
    assert "all nodes fast (what-if model)" in text and "counterfactual simulator run (ground truth)" in text
    v = view_state(scored["obs"], "demo", "20s", 20 * S)
    assert v.iteration_ms is not None and 130 <= v.iteration_ms < 140  # ~131.7 ms over the last 10 s, +-1 op
