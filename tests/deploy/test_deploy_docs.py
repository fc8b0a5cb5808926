"""docs/operations.md documents every environment variable the stages read and every self-metric
they define. Both lists are found in the code (tests/deploy/deploy_helpers.py), not kept by hand."""

from __future__ import annotations

import re

import yaml
from deploy_helpers import DEPLOY, DOCS, env_reads, metric_names

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
