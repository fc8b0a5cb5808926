"""Exact cleanup of a kernel fabric: close(), SIGTERM of `flowtracer sim`, SIGKILL then reap_stale(); and
the one-line exit 2 without the capability."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from netns_skip import needs_netns
from unprivileged import as_nobody

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.kernel import records
from flowtracer.sim.kernel.netns import KernelFabric, new_prefix

FLOWTRACER = Path(sys.executable).with_name("flowtracer")


def _exists(ns: str) -> bool:
    return (records.NETNS_DIR / ns).exists()


@pytest.fixture
def topo_file(tmp_path: Path) -> Path:
    path = tmp_path / "fabric.yaml"
    path.write_text(generate(FabricSpec(hosts=4, leaves=2, spines=2)).to_yaml())
    return path


@needs_netns
def test_close_removes_exactly_the_runs_namespaces() -> None:
    kf = KernelFabric(generate(FabricSpec(hosts=4, leaves=2, spines=2))).build()
    names = list(kf.plan.namespaces.values())
    assert all(_exists(n) for n in names) and kf.record is not None and kf.record.path.exists()
    kf.close()
    kf.close()  # twice is fine
    assert not any(_exists(n) for n in names) and not kf.record.path.exists()


def _start_sim(topo_file: Path, out: Path) -> tuple[subprocess.Popen[str], dict[str, object]]:
    p = subprocess.Popen([str(FLOWTRACER), "sim", "--topology", str(topo_file), "--dataplane", "kernel",
                          "--gnmi-ports", "free", "--out", str(out), "--tick", "0.5"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line, "flowtracer sim ended before it was ready"
    return p, json.loads(line)


@needs_netns
def test_sigterm_of_a_running_sim_removes_everything(topo_file: Path, tmp_path: Path) -> None:
    p, info = _start_sim(topo_file, tmp_path / "run")
    names = list(info["netns"].values())  # type: ignore[attr-defined]
    assert info["dataplane"] == "kernel" and all(_exists(n) for n in names)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 0
    assert not any(_exists(n) for n in names)
    assert not (records.STATE_DIR / f"{names[0].split('-')[0]}.json").exists()


@needs_netns
def test_sigkill_leftovers_are_reaped_from_the_record_and_live_owners_are_left_alone(
        topo_file: Path, tmp_path: Path) -> None:
    p, info = _start_sim(topo_file, tmp_path / "run")
    names = list(info["netns"].values())  # type: ignore[attr-defined]
    p.kill()
    p.wait(timeout=10)
    assert all(_exists(n) for n in names)  # a crash leaves them behind ...
    # ... next to the record of a run whose owner (this process) is alive:
    live = records.new_record(new_prefix(), [])
    live.namespaces = [f"{live.prefix}-x"]
    live.save()
    subprocess.run(["ip", "netns", "add", live.namespaces[0]], check=True)
    try:
        removed = records.reap_stale()
        assert not any(_exists(n) for n in names) and set(names) <= set(removed)
        assert _exists(live.namespaces[0]) and live.path.exists()
    finally:
        records.remove_run(live)
    assert not _exists(live.namespaces[0]) and not live.path.exists()


def _one_line_exit_2(res: subprocess.CompletedProcess[str], expected: str) -> None:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], res.stderr


def test_without_root_exits_2_with_one_line(topo_file: Path) -> None:
    if os.geteuid() != 0:  # already unprivileged: the real thing
        res = subprocess.run([str(FLOWTRACER), "sim", "--topology", str(topo_file), "--dataplane", "kernel"],
                             capture_output=True, text=True, timeout=60)
    else:  # drop to nobody for the run (setpriv, util-linux)
        with tempfile.TemporaryDirectory() as d:  # pytest's tmp_path is not readable by nobody
            readable = Path(d) / "fabric.yaml"
            readable.write_text(topo_file.read_text())
            Path(d).chmod(0o755)
            readable.chmod(0o644)
            cmd = as_nobody([str(FLOWTRACER), "sim", "--topology", str(readable), "--dataplane", "kernel"])
            if isinstance(cmd, str):
                pytest.skip(cmd)
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": "/tmp"})
    _one_line_exit_2(res, "--dataplane kernel: the kernel data plane needs root")


@needs_netns
def test_without_the_ip_command_exits_2_with_one_line(topo_file: Path, tmp_path: Path) -> None:
    res = subprocess.run([str(FLOWTRACER), "sim", "--topology", str(topo_file), "--dataplane", "kernel"],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": str(tmp_path)})
    _one_line_exit_2(res, "needs the `ip` command (iproute2), not found on PATH")
