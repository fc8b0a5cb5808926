"""`flowtracer demo`'s scenario, data-plane and resolver options: refusals before anything starts (fast), the
agent's tracing configuration the demo writes, and the scores the summary computes from output records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from unprivileged import as_nobody

from flowtracer.cmd_demo import MARKER, demo
from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.demo.scenario import ScenarioError, write_scenario
from flowtracer.fabric.topology_generate import FabricSpec, generate


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(demo, args, env={"INFLUX_TOKEN": "", "FLOWTRACER_INFLUX_TOKEN": ""})
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None else "")


def test_kernel_data_plane_without_root_is_one_line_exit_2(tmp_path: Path) -> None:
    """The real capability check, as an unprivileged user (root drops to nobody with setpriv)."""
    cmd = [sys.executable, "-m", "flowtracer", "demo", "--dataplane", "kernel", "--duration", "5",
           "--run-dir", str(tmp_path / "run")]
    if os.geteuid() == 0:
        unprivileged = as_nobody(cmd)
        if isinstance(unprivileged, str):
            pytest.skip(unprivileged)
        tmp_path.chmod(0o777)
        cmd = unprivileged
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flowtracer demo: --dataplane kernel: "), res.stderr
    assert "root" in lines[0]
    assert not (tmp_path / "run").exists()


def test_a_bad_workload_file_is_refused_and_the_previous_run_is_kept(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / MARKER).write_text("x")
    (run / "summary.json").write_text("{}")
    bad = tmp_path / "wl.yaml"
    bad.write_text("jobs: [{collective: nope}]\n")
    code, out = _run(["--workload", str(bad), "--run-dir", str(run), "--duration", "5", "--web-port", "0"])
    assert code == 2 and out.strip().startswith(f"flowtracer demo: --workload {bad}:"), out
    assert len(set(out.strip().splitlines())) == 1  # (CliRunner output may repeat stderr)
    assert (run / "summary.json").exists(), "bad input must not replace the previous run"


def test_a_missing_topology_or_preset_is_refused(tmp_path: Path) -> None:
    # --web-port 0: the default dashboard port may be taken by another demo on this machine, and that is a
    # different refusal
    code, out = _run(["--topology", str(tmp_path / "nope.yaml"), "--run-dir", str(tmp_path / "r"), "--web-port", "0"])
    assert code == 2 and "--topology" in out and "Traceback" not in out
    code, out = _run(["--workload", "ring-allreduse", "--run-dir", str(tmp_path / "r"), "--web-port", "0"])
    assert code == 2 and "--workload ring-allreduse" in out and "Traceback" not in out


def test_scenario_from_a_topology_and_a_preset(tmp_path: Path) -> None:
    topo = tmp_path / "f.yaml"
    topo.write_text(generate(FabricSpec(hosts=16, leaves=4, spines=4, name="f4")).to_yaml())
    sc = write_scenario(tmp_path / "sc", degrade_at_s=None, topology_file=topo, workload="alltoall")
    assert (sc.hosts, sc.leaves, sc.spines, sc.degrade_link) == (16, 4, 4, None)
    assert "alltoall" in sc.workload.read_text()
    with pytest.raises(ScenarioError, match="--workload"):
        write_scenario(tmp_path / "sc2", workload=str(tmp_path / "missing.yaml"))


def test_agent_tracing_config_follows_the_data_plane(tmp_path: Path) -> None:
    """What the demo gives the agent: sim transport on the model, kernel transport + host namespaces on the kernel."""
    p = LocalPipeline(PipelineOptions(topology=tmp_path / "t.yaml", agent_tracing=True), tmp_path)
    p.ready = {"dataplane": "model", "trace_responder": "127.0.0.1:9", "host_view_dirs": {"h1": "x", "h2": "y"}}
    cfg = yaml.safe_load(p.write_agent_config().read_text())["tracing"]
    assert cfg["enabled"] and cfg["transport"] == "sim" and cfg["probes_per_second"] == 100
    p.ready = {"dataplane": "kernel", "netns": {"h1": "ftx-h1", "h2": "ftx-h2", "leaf01": "ftx-leaf01"},
               "host_view_dirs": {"h1": "x", "h2": "y"}}
    cfg = json.loads(p.write_agent_config().read_text())["tracing"]
    assert cfg["transport"] == "kernel" and cfg["netns"] == {"h1": "ftx-h1", "h2": "ftx-h2"}
