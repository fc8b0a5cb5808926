"""Grafana alert rules (deploy/grafana/alerting): each Flux query reads only what the sink writes (outputs
MEASUREMENTS), each rule has a threshold and a duration an operator can tune, the compose demo provisions the file,
and docs/operations.md lists every rule."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from deploy_helpers import DEPLOY, DOCS, check_flux

from flowtracer.stream.sinks.line_protocol import _BASIS
from flowtracer.stream.stages.outputs import MEASUREMENTS

RULES_FILE = DEPLOY / "grafana" / "alerting" / "flowtracer-alerts.yaml"
COMPOSE = DEPLOY / "compose"


def _rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES_FILE.read_text())["groups"] for r in g["rules"]]


RULES = _rules()


@pytest.mark.parametrize("rule", RULES, ids=[r["title"] for r in RULES])
def test_rule_queries_what_the_sink_writes_and_has_a_threshold_and_a_duration(rule: dict[str, Any]) -> None:
    uids = {d["uid"] for d in yaml.safe_load((COMPOSE / "grafana" / "datasources.yaml").read_text())["datasources"]}
    data = {d["refId"]: d for d in rule["data"]}
    assert rule["condition"] in data
    queries = [d for d in rule["data"] if d["datasourceUid"] != "__expr__"]
    assert queries, "a rule needs a query"
    for q in queries:
        assert q["datasourceUid"] in uids
        problems = check_flux(q["model"]["query"], MEASUREMENTS, {"basis": set(_BASIS.values())})
        assert not problems, "\n".join(problems)
    cond = data[rule["condition"]]["model"]
    assert cond["type"] == "threshold" and cond["expression"] in data
    [c] = cond["conditions"]
    assert c["evaluator"]["type"] in {"gt", "lt"} and len(c["evaluator"]["params"]) == 1
    assert isinstance(c["evaluator"]["params"][0], int | float)
    assert "for" in rule and rule["for"][-1] in "sm"


def test_rules_are_unique_provisioned_by_compose_and_documented() -> None:
    assert len({r["uid"] for r in RULES}) == len(RULES)
    compose = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    mounts = {c["target"]: c["source"] for c in compose["services"]["grafana"]["configs"]}
    source = mounts["/etc/grafana/provisioning/alerting/flowtracer.yaml"]
    assert (COMPOSE / compose["configs"][source]["file"]).resolve() == RULES_FILE
    ops = (DOCS / "operations.md").read_text()
    missing = [r["title"] for r in RULES if f"`{r['title']}`" not in ops]
    assert not missing, f"docs/operations.md does not list {missing}"
    assert {"incident", "fim", "collision"} <= {m for r in RULES for d in r["data"] if "query" in d["model"]
                                                for m in MEASUREMENTS if f'"{m}"' in d["model"]["query"]}
