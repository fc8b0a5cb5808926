"""docs/operations.md documents every environment variable the stages read and every self-metric
they define. Both lists are found in the code (tests/deploy/deploy_helpers.py), not kept by hand. Every row of its
Bounds table names a test that exists."""

from __future__ import annotations

import re

import yaml
from deploy_helpers import DEPLOY, DOCS, ROOT, env_reads, metric_names

OPS = DOCS / "operations.md"


def _ops() -> str:
    return OPS.read_text()


def test_the_scanners_find_what_is_known_to_be_there() -> None:
    env = env_reads()
    assert {"FLOWTRACER_KAFKA", "FLOWTRACER_LOG_LEVEL", "INFLUX_TOKEN", "FLOWTRACER_INFLUX_TOKEN"} <= set(env.names)
    assert {"password_env", "username_env", "token_env"} <= set(env.config_fields)
    metrics, problems = metric_names()
    names = {m.name for m in metrics}
    assert {"flowtracer_gnmi_target_up", "flowtracer_kafka_sent_ok_total", "flowtracer_agent_window_seconds",
            "flowtracer_processor_records_total"} <= names
    assert not problems, "metric constructors whose name the scanner cannot read:\n" + "\n".join(problems)
    assert not env.problems, "environment reads the scanner cannot follow:\n" + "\n".join(env.problems)


def test_every_environment_variable_read_is_documented() -> None:
    ops = _ops()
    env = env_reads()
    missing = [f"{n} (read at {', '.join(w)})" for n, w in sorted(env.names.items())
               if not re.search(rf"`{re.escape(n)}`", ops)]
    missing += [f"config field {f} (names a variable; {', '.join(w)})" for f, w in sorted(env.config_fields.items())
                if not re.search(rf"`{re.escape(f)}`", ops)]
    assert not missing, "docs/operations.md does not document:\n" + "\n".join(missing)


def test_every_self_metric_is_documented() -> None:
    ops = _ops()
    metrics, _ = metric_names()
    missing = sorted({f"{m.name} ({m.where})" for m in metrics if not re.search(rf"`{re.escape(m.name)}`", ops)})
    assert not missing, "docs/operations.md does not document:\n" + "\n".join(missing)


def test_documented_metric_names_exist() -> None:
    series = {s for m in metric_names()[0] for s in m.series}
    named = set(re.findall(r"\bflowtracer_[a-z0-9_]+\b", _ops()))
    assert not named - series, f"docs/operations.md names metrics no code defines: {sorted(named - series)}"


def test_alert_rules_use_only_defined_metrics() -> None:
    series = {s for m in metric_names()[0] for s in m.series}
    rules = yaml.safe_load((DEPLOY / "prometheus" / "flowtracer-alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            names = set(re.findall(r"\bflowtracer_[a-z0-9_]+", rule["expr"]))
            assert names <= series, f"{rule['alert']}: {sorted(names - series)}"
            assert rule["alert"] in _ops(), f"docs/operations.md does not list alert {rule['alert']}"


def bounds_tests(ops: str) -> list[tuple[str, list[str]]]:
    """Each row of the Bounds table (its structure) with the tests its last cell names, as ``path::name``.
    ``::name`` is in the file named last before it; "same test" is the previous row's test."""
    table = ops.split("\n## Bounds\n", 1)[1].split("\n### The embedded broker's memory", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith(("| structure", "| ---"))]
    out: list[tuple[str, list[str]]] = []
    path = ""
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        tests = []
        for file, name in re.findall(r"(tests/[\w/]+\.py)?::(\w+)", cells[-1]):
            path = file or path
            tests.append(f"{path}::{name}")
        if not tests and "same test" in cells[-1] and out:
            tests = out[-1][1][-1:]
        out.append((cells[0], tests))
    return out


def test_every_bound_names_a_test_that_exists() -> None:
    rows = bounds_tests(_ops())
    assert len(rows) >= 30, f"the Bounds table was not found whole: {len(rows)} rows"
    missing = [structure for structure, tests in rows if not tests]
    assert not missing, "Bounds rows naming no test:\n" + "\n".join(missing)
    gone = [t for _, tests in rows for t in tests
            if not (ROOT / t.split("::")[0]).is_file()
            or not re.search(rf"^def {t.split('::')[1]}\(", (ROOT / t.split("::")[0]).read_text(), re.M)]
    assert not gone, "Bounds rows name tests that do not exist:\n" + "\n".join(gone)
