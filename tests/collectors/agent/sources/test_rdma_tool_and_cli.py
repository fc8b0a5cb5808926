"""The rdma subprocess wrapper and `flowtracer agent`'s exit codes, run for real (no fake rdma)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from flowtracer.cmd_agent import EXIT_BAD_INPUT, EXIT_NO_RDMA, agent
from flowtracer.collectors.agent.sources.rdma_json import parse_res_qp
from flowtracer.collectors.agent.sources.rdma_tool import RdmaToolError, RdmaUnavailable, run_rdma


def test_missing_program_is_unavailable_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(RdmaUnavailable, match=r"not found\. Install iproute2"):
        run_rdma([str(tmp_path / "rdma")], ["resource", "show", "qp"])


def test_the_real_rdma_tool_here_either_answers_or_says_why() -> None:
    rdma = shutil.which("rdma")
    if rdma is None:
        pytest.skip("iproute2's rdma is not installed on this machine")
    try:
        out = run_rdma([rdma], ["resource", "show", "qp"])
    except RdmaUnavailable as e:  # a host (or sandbox) without RDMA netlink
        assert "NETLINK_RDMA" in str(e) and "--sysfs-only" in str(e)
    else:
        assert parse_res_qp(out).malformed == 0


def test_timeout_and_failure_are_errors_not_hangs() -> None:
    with pytest.raises(RdmaToolError, match=r"did not finish within 0\.2 s"):
        run_rdma(["sh", "-c", "sleep 5", "sh"], [], timeout_s=0.2)
    with pytest.raises(RdmaToolError, match="failed: boom"):
        run_rdma(["sh", "-c", "echo boom >&2; exit 3", "sh"], [])


def test_cli_exit_codes(fixtures: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    sysfs = str(fixtures / "sysfs" / "class" / "infiniband")
    r = runner.invoke(agent, ["--source", "linux", "--sysfs-root", str(tmp_path / "none")])
    assert r.exit_code == EXIT_NO_RDMA and "no RDMA devices" in r.output
    r = runner.invoke(agent, ["--source", "linux", "--sysfs-root", sysfs, "--rdma-command", str(tmp_path / "rdma")])
    assert r.exit_code == EXIT_NO_RDMA and "not found" in r.output
    r = runner.invoke(agent, ["--source", "linux", "--interval", "7ms"])
    assert r.exit_code == EXIT_BAD_INPUT and "interval" in r.output
    r = runner.invoke(agent, ["--source", "nccl-log", "--sysfs-root", sysfs])
    assert r.exit_code == EXIT_BAD_INPUT and "nccl_log" in r.output
    r = runner.invoke(agent, ["--source", "sim", "--sim-endpoints", str(tmp_path / "ready.json")])
    assert r.exit_code == EXIT_BAD_INPUT


def test_sysfs_only_mode_sends_port_totals(fixtures: Path) -> None:
    r = CliRunner().invoke(agent, ["--source", "linux", "--sysfs-only", "--sysfs-root",
                                   str(fixtures / "sysfs" / "class" / "infiniband"), "--host", "node01",
                                   "--interval", "50ms", "--max-windows", "2"])
    assert r.exit_code == 0, r.output
    batches = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(batches) == 2
    assert all(b["key"] == "node01" and not b["value"].get("flows") for b in batches)  # no topology: keyed by host
    assert {p["rdmaDevice"] for p in batches[0]["value"]["ports"]} == {"mlx5_0", "mlx5_1"}
