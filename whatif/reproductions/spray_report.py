"""The report of a run of PRIME's scenarios on the packet-level spraying model (pure: results in, JSON and
Markdown out).

The JSON document holds, per scenario and spraying kind, the mean over seeds of every metric and each seed's
own figures; the comparison with the paper is computed from those means (``compare``), and the Markdown is
rendered from the document, so the page, the JSON and the comparison always show the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from flowtracer.whatif.reproductions.spray_scenarios import PAPER_ROWS, PAPER_SOURCE, Runs
from flowtracer.whatif.reproductions.spray_sim import SprayResult

JSON_VERSION = 1
#: Metrics per run: throughput (fraction of line rate), FCT percentiles (us), the deepest queue (packets),
#: reordering (share of packets that arrived below the highest sequence seen; displacement p99 and max, packets),
#: FIM of the leaves' uplink groups, packets lost to a failed link, flows not finished.
METRICS = ("throughput", "fct_p50_us", "fct_p99_us", "max_queue", "reorder_fraction", "reorder_p99", "reorder_max",
           "fim", "lost", "unfinished")
#: Metrics where higher is better (every other compared metric: lower is better).
HIGHER_IS_BETTER = frozenset({"throughput"})
LABELS = {"throughput": "throughput", "fct_p99_us": "FCT p99", "fct_p50_us": "FCT p50"}


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def run_metrics(r: SprayResult) -> dict[str, float | None]:
    """One run's metrics (``METRICS``); an FCT percentile is None when no flow finished."""
    return {"throughput": r.throughput, "fct_p50_us": _finite(r.fct_us(50)), "fct_p99_us": _finite(r.fct_us(99)),
            "max_queue": float(r.max_queue), "reorder_fraction": r.reorder_fraction, "reorder_p99": r.reorder_p99,
            "reorder_max": float(r.reorder_max), "fim": r.fim, "lost": float(r.lost), "unfinished": float(r.unfinished)}


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean, None when a seed has no value (a run in which no flow finished has no FCT)."""
    if not values or any(v is None for v in values):
        return None
    return math.fsum(v for v in values if v is not None) / len(values)


def compare(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The paper comparison from the per-scenario, per-kind means of ``results`` (the document's rows): for each
    row of ``PAPER_ROWS`` whose scenario ran with ``prime`` and another kind, PRIME's mean against the best and
    the worst other kind's (``vs_best`` = prime / best - 1; None when a value is missing)."""
    by = {(r["scenario"], r["kind"]): r for r in results}
    rows = []
    for scenario, metric, paper in PAPER_ROWS:
        prime = by.get((scenario, "prime"))
        others = {k: r[metric] for (s, k), r in by.items() if s == scenario and k != "prime"}
        if prime is None or not others:
            continue
        row: dict[str, Any] = {"scenario": scenario, "metric": metric, "paper": paper, "prime": prime[metric]}
        known = {k: v for k, v in others.items() if v is not None}
        if prime[metric] is None or len(known) < len(others):
            rows.append({**row, "best": None, "vs_best": None, "worst": None, "vs_worst": None,
                         "prime_beats_all": None})
            continue
        up = metric in HIGHER_IS_BETTER
        best = (max if up else min)(known, key=lambda k: known[k])
        worst = (min if up else max)(known, key=lambda k: known[k])
        beats = prime[metric] > known[best] if up else prime[metric] < known[best]
        rows.append({**row, "best": best, "best_value": known[best], "vs_best": prime[metric] / known[best] - 1.0,
                     "worst": worst, "worst_value": known[worst], "vs_worst": prime[metric] / known[worst] - 1.0,
                     "prime_beats_all": beats})
    return rows


def document(runs: Runs, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON document: ``meta`` (fabric, packets, seeds, ...), the paper's figures with their source, one row
    per scenario and kind (means over seeds, and ``seeds``: each seed's metrics), and the comparison."""
    results = []
    for scenario, by_kind in runs.items():
        for kind, rs in by_kind.items():
            per_seed = [run_metrics(r) for r in rs]
            means = {m: _mean([p[m] for p in per_seed]) for m in METRICS}
            results.append({"scenario": scenario, "kind": kind, "conditions": rs[0].label if rs else "",
                            "max_queue_link": [r.max_queue_link for r in rs], **means, "seeds": per_seed})
    return {"version": JSON_VERSION, **meta,
            "paper": {"source": PAPER_SOURCE, "rows": [{"scenario": s, "metric": m, "improvement": p}
                                                       for s, m, p in PAPER_ROWS]},
            "results": results, "comparison": compare(results)}


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def markdown(doc: Mapping[str, Any]) -> str:
    """The report page: setup, per scenario and kind the metrics (means over seeds), the comparison table."""
    seeds = ", ".join(str(s) for s in doc["seeds"])
    out = [f"Packet-level spraying on PRIME's scenarios: fabric {doc['fabric']}, {doc['packets']} packets of "
           f"{doc['packet_bytes']} B per flow, seeds {seeds} (mean over seeds; each seed draws the permutation "
           f"and the random path choices); {doc['elapsed_s']:.1f} s.", "",
           "| scenario | kind | throughput (of line rate) | FCT p50 (us) | FCT p99 (us) | max queue (packets) "
           "| reordered packets | reorder displacement p99 (packets) | FIM (uplinks) | lost | unfinished flows |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["results"]:
        reorder = "-" if r["reorder_fraction"] is None else f"{r['reorder_fraction']:.1%}"
        out.append(f"| {r['scenario']} | {r['kind']} | {_f(r['throughput'], '.3f')} | {_f(r['fct_p50_us'], '.1f')} "
                   f"| {_f(r['fct_p99_us'], '.1f')} | {_f(r['max_queue'], '.0f')} | {reorder} "
                   f"| {_f(r['reorder_p99'], '.1f')} | {_f(r['fim'], '.3f')} | {_f(r['lost'], '.0f')} "
                   f"| {_f(r['unfinished'], '.0f')} |")
    out += ["", f"Paper's figures: {doc['paper']['source']} (\"up to\"; against other spraying schemes). "
            "Ours: PRIME's mean against the best and the worst other kind's mean in this run.", "",
            "| scenario | metric | paper: PRIME vs other spraying | ours: PRIME vs best other | "
            "ours: PRIME vs worst other | PRIME beats every other |", "| --- | --- | --- | --- | --- | --- |"]
    for c in doc["comparison"]:
        paper = "-" if c["paper"] is None else f"{c['paper']:+.0%}"
        best = "-" if c["vs_best"] is None else f"{c['vs_best']:+.1%} ({c['best']})"
        worst = "-" if c["vs_worst"] is None else f"{c['vs_worst']:+.1%} ({c['worst']})"
        beats = "-" if c["prime_beats_all"] is None else ("yes" if c["prime_beats_all"] else "no")
        out.append(f"| {c['scenario']} | {LABELS.get(c['metric'], c['metric'])} | {paper} | {best} | {worst} "
                   f"| {beats} |")
    return "\n".join(out) + "\n"
