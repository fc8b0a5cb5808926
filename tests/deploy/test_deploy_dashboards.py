"""Grafana dashboards: every Flux query reads only measurements, tags and fields the processor writes
(stream/stages/outputs.py MEASUREMENTS, the sink's own definition), every PromQL query only metrics the
stages define, the panels the issue asks for exist, and docs/dashboards.md shows every query."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from deploy_helpers import DEPLOY, DOCS, check_flux, metric_names

from flowtracer.stream.sinks.line_protocol import _BASIS
from flowtracer.stream.stages.outputs import MEASUREMENTS

DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
TAG_VALUES = {"basis": set(_BASIS.values())}


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in dash["panels"]:
        out.append(p)
        out += p.get("panels", [])
    return out


def _queries(dash: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(where, language, query) of every panel target and templating query."""
    out = []
    for p in _panels(dash):
        for t in p.get("targets", []):
            ds = t.get("datasource") or p.get("datasource") or {}
            if ds.get("type") == "influxdb":
                out.append((f"{dash['title']} / {p['title']} / {t['refId']}", "flux", t["query"]))
            elif ds.get("type") == "prometheus":
                out.append((f"{dash['title']} / {p['title']} / {t['refId']}", "promql", t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query" and v["datasource"]["type"] == "influxdb":
            out.append((f"{dash['title']} / variable {v['name']}", "flux", v["query"]))
    return out


ALL = [(path, where, lang, q) for path in DASHBOARDS for where, lang, q in _queries(_load(path))]


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_dashboards_parse_with_unique_uids_and_panel_ids() -> None:
    assert {p.name for p in DASHBOARDS} == {"flowtracer-fabric.json", "flowtracer-health.json"}
    uids = [_load(p)["uid"] for p in DASHBOARDS]
    assert len(set(uids)) == len(uids)
    for path in DASHBOARDS:
        dash = _load(path)
        ids = [p["id"] for p in _panels(dash)]
        assert len(set(ids)) == len(ids), path.name
        assert dash["schemaVersion"] >= 39 and dash["id"] is None, "provisioned dashboards carry no database id"


@pytest.mark.parametrize(("path", "where", "lang", "query"), ALL, ids=[w for _, w, _, _ in ALL])
def test_query_references_only_what_the_processor_writes(path: Path, where: str, lang: str, query: str) -> None:
    if lang == "flux":
        problems = check_flux(query, MEASUREMENTS, TAG_VALUES)
        assert not problems, f"{where}:\n" + "\n".join(problems)
    else:
        series = {s for m in metric_names()[0] for s in m.series}
        unknown = set(re.findall(r"\bflowtracer_[a-z0-9_]+", query)) - series
        assert not unknown, f"{where}: no stage defines {sorted(unknown)}"
        assert re.search(r"\bflowtracer_", query), f"{where}: reads no flowtracer metric"


def test_the_panels_the_issue_asks_for_exist() -> None:
    fabric = _load(DEPLOY / "grafana" / "dashboards" / "flowtracer-fabric.json")
    health = _load(DEPLOY / "grafana" / "dashboards" / "flowtracer-health.json")
    by_title = {p["title"]: p for p in _panels(fabric)}

    def find(pattern: str, ptype: str) -> dict[str, Any]:
        hits = [p for t, p in by_title.items() if re.search(pattern, t, re.I) and p["type"] == ptype]
        assert hits, f"no {ptype} panel matching {pattern!r}"
        return hits[0]

    fim = find(r"fabric FIM over time", "timeseries")
    assert 'r.group == "fabric"' in fim["targets"][0]["query"]
    assert 'columnKey: ["group"]' in find(r"FIM per ECMP group", "heatmap")["targets"][0]["query"]
    assert '"utilization"' in find(r"utilization per switch", "heatmap")["targets"][0]["query"]
    assert '"utilization"' in find(r"utilization of \$switch", "heatmap")["targets"][0]["query"]
    collisions = find(r"top collisions", "table")["targets"][0]["query"]
    keep = re.findall(r'keep\(columns: \[([^\]]*)\]', collisions)[-1]
    assert '"flows"' in keep and '"jobs"' in keep, "the collisions table shows flows and jobs"
    assert '"unexplained_bytes"' in find(r"unexplained bytes per link", "table")["targets"][0]["query"]
    causes = find(r"congestion causes", "table")["targets"][0]["query"]
    keep = re.findall(r'keep\(columns: \[([^\]]*)\]', causes)[-1]
    assert all(f'"{c}"' in keep for c in ("cause", "origin", "spread_links", "evidence")), "causes show origin and spread"
    harm = find(r"harmful collisions per link", "timeseries")["targets"][0]["query"]
    assert '"harmful"' in harm and '["link"]' in harm, "harmful collisions are counted per link"
    for field, pattern in (("cnp_sent", r"CNPs sent per NIC"), ("cnp_handled", r"CNPs handled per NIC")):
        query = find(pattern, "timeseries")["targets"][0]["query"]
        assert f'"{field}"' in query and '["nic"]' in query, f"{field} per NIC"
    health_text = json.dumps(health)
    for stage in ("flowtracer_gnmi_", "flowtracer_agent_", "flowtracer_processor_", "flowtracer_kafka_"):
        assert stage in health_text, f"the health dashboard shows nothing of {stage}*"
    note = next(p for p in _panels(health) if p["type"] == "text")["options"]["content"]
    assert "Prometheus" in note and "relay" in note, "the health dashboard says where its data comes from"


def test_every_flux_query_is_documented_in_docs_dashboards() -> None:
    doc = (DOCS / "dashboards.md").read_text()
    blocks = [_normal(b) for b in re.findall(r"```flux\n(.*?)```", doc, re.S)]
    for _, where, lang, query in ALL:
        if lang == "flux":
            assert _normal(query) in blocks, f"docs/dashboards.md lacks the query of {where}"


def test_flux_in_docs_passes_the_same_check() -> None:
    doc = (DOCS / "dashboards.md").read_text()
    blocks = re.findall(r"```flux\n(.*?)```", doc, re.S)
    assert blocks
    for b in blocks:
        assert not check_flux(b, MEASUREMENTS, TAG_VALUES), b


@pytest.mark.parametrize(("query", "problem"), [
    ('from(bucket: "b") |> range(start: -1h) |> filter(fn: (r) => r._measurement == "link_loads")',
     "measurement 'link_loads'"),
    ('from(bucket: "b") |> filter(fn: (r) => r._measurement == "link_load" and r._field == "fim")',
     "field 'fim' is not a field of link_load"),
    ('from(bucket: "b") |> filter(fn: (r) => r._measurement == "fim" and r.leaf == "x")',
     "column 'leaf' is neither a tag nor a field"),
    ('from(bucket: "b") |> filter(fn: (r) => r._measurement == "fim") |> group(columns: ["host"])',
     "column list entry 'host'"),
    ('from(bucket: "b") |> filter(fn: (r) => r._measurement == "link_load" and r.utilization > 0.5)',
     "pivot _field into columns"),
    ('from(bucket: "b") |> filter(fn: (r) => r._measurement == "collision" and r._field == "flows")'
     ' |> aggregateWindow(every: 1m, fn: mean)', "numeric aggregate over string field"),
    ('from(bucket: "b") |> filter(fn: (r) => r._measurement == "fim" and r.basis == "counters")',
     "tag basis is never 'counters'"),
    ('from(bucket: "b") |> range(start: -1h)', "names no measurement"),
])
def test_the_flux_check_catches_what_it_claims_to(query: str, problem: str) -> None:
    problems = check_flux(query, MEASUREMENTS, TAG_VALUES)
    assert any(problem in p for p in problems), problems
