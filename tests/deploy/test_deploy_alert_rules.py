"""deploy/prometheus/flowtracer-alerts.yml is valid for Prometheus and every alert in it is unit-tested.

``promtool`` (Debian package ``prometheus``, installed by ``make test``) checks the rules and runs
flowtracer-alerts.test.yml in its virtual time, so the shipped ``for:`` durations are tested as they are. Each
alert must have a case where it fires and one where it stays quiet, and the test's input series must be metrics
the stages export (the scanner of tests/deploy/deploy_helpers.py), or the tests would prove rules on made-up data.
tests/e2e/test_alerts_e2e.py fires some of them against a running pipeline.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from deploy_helpers import DEPLOY, metric_names

RULES = DEPLOY / "prometheus" / "flowtracer-alerts.yml"
UNIT_TESTS = DEPLOY / "prometheus" / "flowtracer-alerts.test.yml"
# Series Prometheus makes itself for every scrape target.
SCRAPE_SERIES = {"up"}


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not found: it comes from the Debian package 'prometheus' (make system-deps)")
    return found


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *map(str, args)], capture_output=True, text=True, timeout=120,
                          cwd=RULES.parent)


def alert_names() -> list[str]:
    rules = yaml.safe_load(RULES.read_text())
    return [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]


def test_promtool_accepts_the_rules() -> None:
    out = _run("check", "rules", RULES)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in out.stdout, out.stdout


def test_promtool_unit_tests_pass() -> None:
    out = _run("test", "rules", UNIT_TESTS)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout, out.stdout


def test_a_wrong_expectation_fails_promtool(tmp_path: Path) -> None:
    """The unit tests can fail: one expected summary changed makes promtool report that alert."""
    broken = tmp_path / "broken.test.yml"
    text = UNIT_TESTS.read_text().replace("for 125 s", "for 126 s", 1)
    assert text != UNIT_TESTS.read_text()
    broken.write_text(text.replace("  - flowtracer-alerts.yml", f"  - {RULES}", 1))
    out = _run("test", "rules", broken)
    assert out.returncode != 0 and "alertname: FlowtracerGnmiTargetSilent" in out.stdout + out.stderr, out.stdout


def _cases() -> dict[str, tuple[int, int]]:
    """alert -> (cases where it fires, cases where it is expected quiet) in the unit tests."""
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    assert doc["rule_files"] == [RULES.name]
    out: dict[str, tuple[int, int]] = {}
    for test in doc["tests"]:
        for case in test.get("alert_rule_test", []):
            firing, quiet = out.get(case["alertname"], (0, 0))
            out[case["alertname"]] = (firing + 1, quiet) if case.get("exp_alerts") else (firing, quiet + 1)
    return out


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases = _cases()
    names = alert_names()
    assert len(names) >= 15
    missing = [f"{a}: {cases.get(a, (0, 0))[0]} firing, {cases.get(a, (0, 0))[1]} quiet"
               for a in names if min(cases.get(a, (0, 0))) == 0]
    assert not missing, "alerts without both a firing and a quiet promtool case:\n" + "\n".join(missing)
    assert not set(cases) - set(names), f"cases for alerts the rules do not define: {sorted(set(cases) - set(names))}"


def test_unit_test_series_are_metrics_the_stages_export() -> None:
    series = {s for m in metric_names()[0] for s in m.series} | SCRAPE_SERIES
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    used = {re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s["series"]).group(0)  # type: ignore[union-attr]
            for test in doc["tests"] for s in test["input_series"]}
    assert used - SCRAPE_SERIES, "no flowtracer series found"
    assert used <= series, f"input series no code exports: {sorted(used - series)}"
