"""``flowtracer config check``: every shipped sample is valid; a bad value is exit 2 naming file, line and field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from config_samples import SAMPLES, spoiled

from flowtracer.main import cli

COMPONENTS = ("collector", "agent", "processor", "diagnose")


def check(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["config", "check", *args], env=env)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.output


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_sample_is_a_valid_configuration_of_its_component(component: str) -> None:
    assert check(str(SAMPLES / f"{component}.yaml")) == (
        0, f"{SAMPLES / f'{component}.yaml'}: a valid {component} configuration\n")


@pytest.mark.parametrize(("component", "line", "bad", "problem"), [
    ("collector", "  linger: 20ms", "  linger: never", "kafka.linger: 'never' is not a duration (e.g. 250ms, 1s, 2m)"),
    ("agent", "interval: 1s", "interval: 300ms",
     "interval: must divide a second or be a whole number of seconds, so windows align across hosts"),
    ("processor", "resolver: hash", "resolver: ecmp", "resolver: 'ecmp' is not one of: hash, infer, trace"),
    ("diagnose", "start: latest", "start: newest", "start: Input should be 'latest' or 'earliest'"),
])
def test_a_bad_value_is_named_by_file_line_and_field(tmp_path: Path, component: str, line: str, bad: str,
                                                     problem: str) -> None:
    path, n = spoiled(component, line, bad, tmp_path / f"{component}.yaml")
    assert check(str(path)) == (2, f"flowtracer config check: {path}:{n}: {problem}\n")


def test_every_error_is_reported_and_the_environment_is_applied(tmp_path: Path) -> None:
    path, n = spoiled("processor", "partitions: 8", "partitions: 0", tmp_path / "p.yaml")
    code, out = check(str(path), env={"FLOWTRACER_PROCESSOR_HOP_S": "soon"})
    assert code == 2 and out.splitlines() == [
        f"flowtracer config check: {path}:{n}: partitions: Input should be greater than or equal to 1",
        "flowtracer config check: FLOWTRACER_PROCESSOR_HOP_S: hop_s: 'soon' is not a duration (e.g. 250ms, 1s, 2m)",
    ]


def test_the_component_comes_from_the_file_or_the_option(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("interval: 500ms\n")
    code, out = check(str(plain))
    assert code == 2 and "which component does it configure?" in out and "--component" in out
    assert check(str(plain), "--component", "agent") == (0, f"{plain}: a valid agent configuration\n")
    code, out = check(str(plain), "--component", "processor")
    assert code == 2 and f"{plain}:1: interval: unknown field 'interval'" in out
    code, out = check(str(SAMPLES / "agent.yaml"), "--component", "collector")
    assert code == 2 and "component: this file configures the agent, not the collector" in out


def test_bad_files_exit_2_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("component: agent\ninterval: [1s\n")
    for path, problem in ((tmp_path / "missing.yaml", "no such file"), (tmp_path / "broken.yaml", "YAML syntax")):
        r = subprocess.run([sys.executable, "-m", "flowtracer", "config", "check", str(path)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and problem in r.stderr and str(path) in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
