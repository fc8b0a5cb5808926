"""`flowtracer demo` without running the pipeline: refusals before anything starts, the scenario files,
and the view and summary built from output records (fast; the full run is test_demo_dashboard.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from flowtracer.cmd_demo import MARKER, demo
from flowtracer.demo.scenario import DEGRADE_LINK, write_scenario
from flowtracer.demo.status import Observed
from flowtracer.demo.summary import build_summary, summary_lines
from flowtracer.demo.view_render import Reported, change_lines
from flowtracer.demo.view_state import view_state
from flowtracer.fabric.topology import load_topology
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, common_pb2
from flowtracer.sim.fabric.workload import load_workload

S = 1_000_000_000
T0 = 1_800_000_000 * S
SWITCHES = frozenset({"leaf01", "leaf02", "leaf03", "leaf04", "spine01", "spine02"})


def _run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(demo, args, env=env or {"INFLUX_TOKEN": "", "FLOWTRACER_INFLUX_TOKEN": ""})
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


def test_a_dashboard_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out = _run(["--web-port", str(port), "--run-dir", str(tmp_path / "run"), "--duration", "5"])
    assert code == 2
    assert f"port 127.0.0.1:{port} (dashboard, --web-port) is already in use" in out
    assert "--web-port 0" in out
    assert not (tmp_path / "run").exists()


def test_influx_without_a_token_is_refused(tmp_path: Path) -> None:
    code, out = _run(["--influx-url", "http://127.0.0.1:8086", "--run-dir", str(tmp_path / "run"), "--web-port", "0"])
    assert code == 2 and "export FLOWTRACER_INFLUX_TOKEN or INFLUX_TOKEN" in out
    assert "never on the command line" in out


def test_a_run_dir_that_is_not_a_demo_run_is_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    code, out = _run(["--web-port", "0", "--run-dir", str(tmp_path)])
    assert code == 2 and "is not a previous demo run" in out
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    assert not (tmp_path / MARKER).exists()


@pytest.mark.parametrize("args, message", [
    (["--duration", "0", "--web-port", "0"], "--duration 0.0: must be positive"),
    (["--web-port", "70000"], "--web-port 70000: must be 0..65535"),
    (["--broker-memory-limit", "-1", "--web-port", "0"], "--broker-memory-limit -1.0: must be 0 (no limit)"),
])
def test_bad_flags_name_the_flag(tmp_path: Path, args: list[str], message: str) -> None:
    code, out = _run([*args, "--run-dir", str(tmp_path / "run")])
    assert code == 2 and message in out


def test_scenario_is_the_16_node_fabric_with_ring_allreduce_a_known_collision_and_a_degraded_link(tmp_path: Path) -> None:
    sc = write_scenario(tmp_path, degrade_at_s=30)
    topo = load_topology(sc.topology)
    assert (len(topo.hosts), sorted(s.name for s in topo.switches)) == (16, sorted(SWITCHES))
    wl = load_workload(sc.workload)
    [job] = wl.jobs
    assert job.name == "ring-allreduce" and job.ops[0].collective.value == "allreduce"
    [fault] = wl.faults
    assert (fault.kind, fault.target, fault.at, fault.capacity) == ("degrade", DEGRADE_LINK, 30.0, 0.5)
    assert load_workload(write_scenario(tmp_path / "nofault", degrade_at_s=None).workload).faults == ()
    # The known collision: ring on host01..host15, a second NIC's steady flow to host16, congestion modelled
    # (the kernel data plane cannot: congestion=False leaves the model out, and the collectors' counters off).
    assert job.hosts == 15 and [(f.src, f.dst) for f in wl.flows] == [("host01:mlx5_0", "host16:mlx5_0")]
    assert wl.congestion is not None and sc.congestion and sc.workload_name == "known-collision"
    kernel = write_scenario(tmp_path / "kernel", congestion=False)
    assert load_workload(kernel.workload).congestion is None and not kernel.congestion
    # a preset gets the congestion model too (what shows a degraded link), except on the kernel data plane
    assert write_scenario(tmp_path / "preset", workload="ring-allreduce").congestion
    assert not write_scenario(tmp_path / "preset-kernel", workload="ring-allreduce", congestion=False).congestion


def _fim(end: int, value: float, basis: int) -> bytes:
    return analytics_pb2.FimSample(schema_version=1, window_end_ns=end, group="fabric", basis=basis,
                                   fim=value).SerializeToString()


def _observed() -> Observed:
    obs = Observed(switch_names=SWITCHES)
    for k in range(1, 6):
        end = T0 + k * S
        obs.add(topics.FIM.name, _fim(end, 0.5, analytics_pb2.LOAD_BASIS_MEASURED), 0)
        obs.add(topics.FIM.name, _fim(end, 0.5, analytics_pb2.LOAD_BASIS_ATTRIBUTED), 0)
        ll = analytics_pb2.LinkLoad(schema_version=1, window_end_ns=end, link="leaf01:Ethernet5>spine01:Ethernet1",
                                    src_node="leaf01", dst_node="spine01", measured_valid=True,
                                    measured_bytes=25 * 10**9)
        obs.add(topics.LINK_LOADS.name, ll.SerializeToString(), end // 10**6 + 1500)
        flows = [common_pb2.FlowRef(key=common_pb2.FlowKey(src_ip="10.0.0.4", dst_ip="10.0.0.5", udp_src_port=p),
                                    src_host="host04", dst_host="host05", collective="AllReduce", bytes=10**10)
                 for p in (59280, 61397)]
        c = analytics_pb2.Collision(schema_version=1, window_end_ns=end, switch="leaf01",
                                    group="leaf01:spine01|spine02", link="leaf01:Ethernet5>spine01:Ethernet1",
                                    idle_link="leaf01:Ethernet6>spine02:Ethernet1", link_utilization=0.45,
                                    flows=flows)
        obs.add(topics.COLLISIONS.name, c.SerializeToString(), 0)
    obs.add(topics.DEAD_LETTER.name, analytics_pb2.DeadLetter(topic="t", reason="cannot decode").SerializeToString(), 0)
    obs.add(topics.FIM.name, b"\xff\xff garbage", 0)
    return obs


def test_observed_folds_outputs_and_the_view_shows_fim_collisions_and_health() -> None:
    obs = _observed()
    assert obs.latest_fabric() == (T0 + 5 * S, {"measured": 0.5, "attributed": 0.5})
    [c] = obs.current_collisions()
    assert c.windows == 5 and len(c.flows) == 2
    assert obs.fabric_bytes[T0 + 5 * S] == 25 * 10**9 and obs.switches[T0 + 5 * S] == {"leaf01"}
    assert obs.latency_stats()["p50_s"] == pytest.approx(1.5)
    assert obs.dead_letters == 1 and obs.undecodable == 1
    v = view_state(obs, "demo", "12s/60s", T0 + 7 * S, stages=[("sim", True), ("collect", False)])
    lines, _ = change_lines(Reported(), v)
    assert lines[0] == "[12s/60s] fabric FIM measured 0.500 attributed 0.500"
    assert "collision leaf01:spine01|spine02: 2 flows on leaf01:Ethernet5>spine01:Ethernet1 45%" in lines[1]
    assert "host04>host05:59280" in lines[1]
    assert lines[-1] == ("[12s/60s] health: lag 2.0s, windows 5, switches reporting 1, dead letters 1, undecodable 1, "
                         "STOPPED: collect")


def test_summary_without_ground_truth_says_so_and_keeps_the_collisions() -> None:
    s = build_summary(_observed(), ground_truth_dir=None, rolling_s=10.0, hop_s=1.0, extra={"stopped_by": "duration"})
    assert s["stopped_by"] == "duration" and s["summary_version"] == 1
    assert s["fabric_fim"]["vs_ground_truth"]["windows_compared"] == 0
    assert not s["fabric_fim"]["vs_ground_truth"]["consistent"]
    assert [c["group"] for c in s["collisions"]] == ["leaf01:spine01|spine02"]
    assert s["collisions"][0]["flows"][0]["job_ground_truth"] is None
    assert s["pipeline"]["dead_letters"] == 1
    text = "\n".join(summary_lines(s))
    assert "not compared with ground truth" in text
    assert "collision leaf01:spine01|spine02: 2 flows share leaf01:Ethernet5>spine01:Ethernet1" in text
