"""``flowtracer sim``: ready JSON on stdout, clean stop at --duration and on SIGTERM, clear input errors."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flowtracer.cmd_sim import sim
from flowtracer.fabric.topology_generate import FabricSpec, generate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def topo_file(tmp_path: Path) -> Path:
    path = tmp_path / "fabric.yaml"
    path.write_text(generate(FabricSpec(hosts=4, leaves=2, spines=2)).to_yaml())
    return path


def test_runs_for_duration_and_prints_ready_json(topo_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(sim, ["--topology", str(topo_file), "--workload", "alltoall", "--duration", "0.5",
                                      "--tick", "0.25", "--gnmi-ports", "free", "--out", str(out),
                                      "--message-size", "16MiB", "--channels", "1"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout.splitlines()[0])
    assert info["ready"] is True and set(info["gnmi"]) == {"leaf01", "leaf02", "spine01", "spine02"}
    assert info["ground_truth"] == str(out / "ground-truth") and info["tick_s"] == 0.25
    assert Path(info["host_view_dirs"]["host03"]).is_dir() and Path(info["topology"]).is_file()
    assert len(result.stdout.splitlines()) == 1  # one JSON object, nothing else on stdout
    ticks = (out / "ground-truth" / "ticks.jsonl").read_text().splitlines()
    assert len(ticks) == 2


def test_workload_file_with_overrides(topo_file: Path, tmp_path: Path) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text("jobs:\n  - {channels: 4, ops: [{collective: allreduce, size: 1GiB}]}\n")
    result = CliRunner().invoke(sim, ["--topology", str(topo_file), "--workload", str(wl), "--duration", "0.25",
                                      "--tick", "0.25", "--gnmi-ports", "free", "--out", str(tmp_path / "o"),
                                      "--channels", "1", "--no-host-views"])
    assert result.exit_code == 0, result.output
    flows = [json.loads(x) for x in (tmp_path / "o" / "ground-truth" / "flows.jsonl").read_text().splitlines()]
    assert {f["channel"] for f in flows if "channel" in f} == {0}  # --channels 1 beat the file's 4


@pytest.mark.parametrize(("args", "message"), [
    (["--workload", "ring-allreduce", "--message-size", "big"], "'big' is not a size"),
    (["--workload", "no-such-thing"], "not a preset (ring-allreduce"),
    (["--workload", "ring-allreduce", "--nodes", "9"], "jobs[0].hosts: 9 hosts asked for, the topology has 4"),
    (["--clock-skew", "nosuchswitch=+90s"], "--clock-skew 'nosuchswitch=+90s': expected SWITCH=[+|-]DURATION"),
    (["--clock-skew", "leaf01"], "--clock-skew 'leaf01': expected SWITCH=[+|-]DURATION"),
    (["--gnmi-client-ca", "ca.pem"], "--gnmi-tls-cert and --gnmi-tls-key go together"),
    (["--gnmi-tls-cert", "missing.pem", "--gnmi-tls-key", "missing.key"],
     "--gnmi-tls-cert: cannot read missing.pem: No such file or directory"),
])
def test_bad_input_exits_2_with_one_line(topo_file: Path, tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(sim, ["--topology", str(topo_file), "--gnmi-ports", "free", "--out",
                                      str(tmp_path / "o"), *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_bad_topology_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("switches: []\n")
    result = CliRunner().invoke(sim, ["--topology", str(bad)])
    assert result.exit_code == 2 and "invalid topology" in result.output


def test_sigterm_stops_cleanly(topo_file: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "from flowtracer.cmd_sim import sim; sim(prog_name='flowtracer sim')",
           "--topology", str(topo_file), "--tick", "0.25", "--gnmi-ports", "free", "--out", str(tmp_path / "o")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        info = json.loads(line)
        assert info["pid"] == proc.pid
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()  # type: ignore[union-attr]
    assert "Traceback" not in err
