"""`flowtracer demo` runs scored against the simulator's ground truth, as a user runs them (the real command,
every stage a real process), asserting on the summary.json the demo writes.

- kernel data plane + trace: Linux forwards real packets with per-switch random hash seeds nobody tells the
  pipeline; the agents trace each flow's own 5-tuple from the host namespaces. Needs root.
- kernel data plane + hash: the hash model cannot know the kernel's seeds: the counters must show it
  (unexplained bytes, low true-path share) instead of confident wrong answers. Needs root.
- model data plane + trace on another scenario (4 spines).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flowtracer.fabric.topology import Role, Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.kernel.netns import missing_capability

pytestmark = pytest.mark.slow


def _demo(tmp: Path, *args: str) -> dict[str, Any]:
    out = tmp / "summary.json"
    cmd = [sys.executable, "-m", "flowtracer", "demo", "--web-port", "0", "--status-every", "30",
           "--run-dir", str(tmp / "run"), "--summary-json", str(out), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    summary: dict[str, Any] = json.loads(out.read_text())
    assert summary["stopped_by"] == "duration" and all(s["exit_code"] == 0 for s in summary["stages"][:-1])
    return summary


def _kernel_or_skip() -> None:
    missing = missing_capability()
    if missing is not None:
        pytest.skip(f"kernel data plane: {missing}")


def test_kernel_dataplane_trace_places_flows_on_their_true_paths(tmp_path: Path) -> None:
    _kernel_or_skip()
    s = _demo(tmp_path, "--dataplane", "kernel", "--resolver", "trace", "--duration", "60")
    assert (s["dataplane"], s["scenario"]["hosts"], s["scenario"]["leaves"], s["scenario"]["spines"]) == \
        ("kernel", 16, 4, 2)
    p = s["scores"]["paths"]
    # Kept up with real time: windows after the 20 s warm-up are (nearly) all there, the simulator's newest
    # tick was at most ~2 ticks behind the clock at the end.
    assert p["windows_scored"] >= 35, p
    assert s["pipeline"]["sim_lag_at_stop_s"] is not None and s["pipeline"]["sim_lag_at_stop_s"] <= 2.5
    assert p["path_overlap"] >= 0.98, p
    assert p["path_load_error"] <= 0.05, p
    assert p["traced_share"] >= 0.98 and s["scores"]["resolvers_in_outputs"] == ["trace"], p
    # Per flow (issue 36): each flow's bytes on the path its FlowPath records published, every flow of the run.
    f = s["scores"]["flows"]
    assert f["flow_true_path_share"] >= 0.98 and f["flows_scored"] >= 30, f
    fim = s["fabric_fim"]["vs_ground_truth"]
    assert fim["windows_compared"] >= 30 and fim["max_abs_error_measured"] <= 0.03, fim
    # Measured link loads are the kernel's veth counters x scale as the switches' gNMI servers showed them; the
    # collector and processor must pass them through unchanged (counter deltas between the same two samples),
    # so the tolerance is a rounding one: 0.1% overall, 99% of link-windows byte-exact.
    lk = s["scores"]["links"]
    assert lk["link_windows"] >= 35 * 40 and lk["error"] <= 0.001 and lk["exact"] >= 0.99 * lk["link_windows"], lk
    # Issue 27: after the degrade at 30 s the ring slows and the kernel's paced senders run up to a tick late; the
    # hosts report what the kernel sent, so counters and flows agree and no hash is taken for misconfigured (before:
    # hash_misconfiguration on two or three leaves from 31 s, 5% of switch-to-switch bytes unexplained).
    assert not [i for i in s["incidents"] if i["kind"] == "hash_misconfiguration"], s["incidents"]
    assert lk["unexplained_share"] <= 0.01, lk
    assert s["vs_ground_truth"]["consistent"], s["vs_ground_truth"]  # every figure it prints, attributed FIM too


def test_kernel_dataplane_hash_shows_what_it_cannot_explain(tmp_path: Path) -> None:
    _kernel_or_skip()
    # The plain ring (the preset without the demo's host01 -> host16 flow): with the demo's workload the hash
    # resolver can put 3% of path bytes on wrong paths yet leave only 0.2% unexplained on the links, since
    # misplacements that cancel on every link (equal flows swapped) are invisible to counters.
    s = _demo(tmp_path, "--dataplane", "kernel", "--resolver", "hash", "--duration", "40", "--warmup", "15",
              "--degrade-at", "-1", "--workload", "ring-allreduce")
    p, lk = s["scores"]["paths"], s["scores"]["links"]
    assert p["windows_scored"] >= 15, p
    if p["path_load_error"] < 0.02:  # each switch's seed is random per run: about 1 run in 16
        pytest.skip("the kernel's random seeds happened to split every ECMP group as the hash model did")
    # The model's seeds are not the kernel's: bytes land on wrong paths, and the switch counters say so: every
    # misplaced byte is unexplained on a switch-to-switch link, which carries only part of all path bytes.
    assert p["path_overlap"] < 0.99, p
    assert lk["unexplained_share"] >= max(0.1, p["path_load_error"]), (p, lk)
    # ... and the resolver's own counter check doubts the model instead of claiming it (stream/resolvers/hash.py):
    # its byte-weighted confidence is no higher than the share it actually got right (it was 1.00 before the check).
    # Equal flows swapped between members change no counter, so it cannot fall to that share's complement.
    assert p["confidence"] < 0.95 and p["confidence"] <= p["path_overlap"] + 0.02, p


def test_model_dataplane_trace_on_four_spines_healthy_for_60_s(tmp_path: Path) -> None:
    """Another fabric: 4 spines (4-member groups), the simulator hashing with a seed the processor's topology
    also states (trace does not need it). Ring all-reduce: all-to-all makes the simulator fall behind real time
    on a 2-core machine (docs/demo.md), and windows it closes late are scored short.

    No fault in 60 s: issue #19's healthy run. Every incident must be a condition the ground truth has: a
    persistent imbalance only on a group where flows collide (two or more share a member while a sibling carries
    at least two fewer, the processor's rule), a congestion hot spot only on a port the simulator congested.
    Two flows alone on two of four uplinks (FIM 0.67) are as even as they can be: no incident."""
    topo_file = tmp_path / "f4.yaml"
    topo = generate(FabricSpec(hosts=16, leaves=4, spines=4, name="f4", hash_seed=7))
    topo_file.write_text(topo.to_yaml())
    s = _demo(tmp_path, "--resolver", "trace", "--topology", str(topo_file), "--workload", "ring-allreduce",
              "--duration", "60", "--warmup", "15", "--degrade-at", "-1")
    assert (s["scenario"]["spines"], s["scenario"]["workload_name"]) == (4, "ring-allreduce")
    p = s["scores"]["paths"]
    assert p["windows_scored"] >= 35, p
    assert p["path_load_error"] <= 0.05 and p["path_overlap"] >= 0.95, p
    assert p["traced_share"] >= 0.95, p
    gt = GroundTruth.load(tmp_path / "run" / "sim" / "ground-truth")
    collided, uneven = _ground_truth_group_flows(gt, topo)
    congested = {port for rec in gt.congestion for port in rec["causes"]}
    # Every incident still open after the warm-up (the same 15 s the scores skip): before the agents' traces cover
    # the flows, untraced flows are unplaced bytes, which can show as a two-window hash_misconfiguration at
    # 4-5 s, closed at once (docs/stream.md says so).
    for inc in [i for i in s["incidents"] if i["end_s"] is None or i["end_s"] >= 15]:
        kind, top = inc["kind"], inc["suspects"][0]["component"]
        if kind == "persistent_imbalance":
            assert top.removeprefix("group:") in collided, (inc, collided)
        else:
            assert kind == "congestion_hotspot", inc
            tx = top.removeprefix("port:").split(">")[0]
            assert tx in congested, (inc, congested)
    # the check has teeth: the run has groups its flows leave uneven without a collision, and none is reported
    assert uneven, "some group's flows cannot spread evenly (fewer flows than members)"
    reported = {i["suspects"][0]["component"].removeprefix("group:") for i in s["incidents"]}
    assert not uneven & reported, (uneven, reported)


def _ground_truth_group_flows(gt: GroundTruth, topo: Topology) -> tuple[set[str], set[str]]:
    """From the simulator's flows (warm-up excluded): leaf uplink groups where flows collide, and groups whose flows
    leave some member idle without colliding (fewer flows than members)."""
    spines = [sw.name for sw in topo.switches if sw.role is Role.SPINE]
    leaves = {sw.name for sw in topo.switches if sw.role is Role.LEAF}
    start = gt.start_ns + 15 * 1_000_000_000
    counts: dict[str, dict[str, int]] = {}
    flows = gt.flows_in(start, gt.tick_ends[-1])
    heavy = 0.1 * max(fw.bytes for fw in flows)  # the ring's flows, not their acknowledgements
    for fw in flows:
        for path in fw.paths[:1] if fw.bytes >= heavy else ():
            for lk in path:
                tx, rx = (end.split(":")[0] for end in lk.split(">"))
                if tx in leaves and rx in spines:
                    member = counts.setdefault(f"{tx}:{'|'.join(spines)}", dict.fromkeys(spines, 0))
                    member[rx] += 1
    collided = {g for g, c in counts.items() if max(c.values()) >= 2 and min(c.values()) <= max(c.values()) - 2}
    uneven = {g for g, c in counts.items() if g not in collided and min(c.values()) == 0}
    return collided, uneven
