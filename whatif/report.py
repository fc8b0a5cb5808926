"""What ``flowtracer whatif`` prints and writes: the terminal table, the JSON document, the plan CSV,
the self-contained HTML page (pure: strings in, strings out)."""

from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from flowtracer.whatif.replay import Measured, ReplayResult

JSON_VERSION = 1


def _num(v: float | None, fmt: str = ".3f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "unreachable"
    return format(v, fmt)


def _ratio(v: float, base: float) -> str:
    if not (math.isfinite(v) and math.isfinite(base)) or base <= 0:
        return "-"
    return f"{v / base:.2f}x"


def table(results: Sequence[ReplayResult], measured: Mapping[str, Measured] | None = None) -> str:
    """One block per condition: FIM (bytes, flows), busiest fabric link, completion time vs the first row."""
    out = []
    by_cond: dict[str, list[ReplayResult]] = {}
    for r in results:
        by_cond.setdefault(r.conditions, []).append(r)
    for cond, rows in by_cond.items():
        base = rows[0].completion_s
        out.append(f"conditions: {cond}")
        m = (measured or {}).get(cond)
        if m is not None and m.fim is not None:
            out.append(f"  measured by the processor over the same windows: FIM {m.fim:.3f}, busiest fabric link "
                       f"{_num(m.max_util)}")
        width = max(len("strategy"), *(len(r.strategy) for r in rows))
        link_w = max(len("busiest fabric link"), *(len(r.max_util_link) for r in rows))
        out.append(f"  {'strategy':<{width}}  FIM bytes  FIM flows  max util  {'busiest fabric link':<{link_w}}"
                   f"  time (s)  vs {rows[0].strategy}")
        for r in rows:
            out.append(f"  {r.strategy:<{width}}  {r.fim:>9.3f}  {r.fim_flows:>9.3f}  {r.max_util:>8.3f}  "
                       f"{r.max_util_link:<{link_w}}  {_num(r.completion_s, '.2f'):>8}  "
                       f"{_ratio(r.completion_s, base):>6}")
        first = rows[0]
        out.append(f"  replayed {first.recorded_s:.0f} s of recording, {first.total_bytes / 1e9:.1f} GB; time = "
                   "communication time of that volume under max-min fair sharing")
        lost = [r for r in rows if r.unreachable_flows]
        for r in lost:
            out.append(f"  {r.strategy}: {r.unreachable_flows} flows ({r.unreachable_bytes / 1e9:.1f} GB) have no "
                       "path under these conditions")
        out.append("")
    return "\n".join(out)


def document(results: Sequence[ReplayResult], meta: Mapping[str, Any],
             measured: Mapping[str, Measured] | None = None) -> dict[str, Any]:
    """The ``--json`` document: meta, the processor's measured figures, and every result in full."""
    return {
        "version": JSON_VERSION,
        **meta,
        "measured": {c: {"fim": m.fim, "max_util": m.max_util, "group_fim": m.group_fim, "windows": m.windows}
                     for c, m in (measured or {}).items()},
        "results": [{**r.summary(), "group_fim": r.group_fim, "group_member_bytes": r.group_member_bytes,
                     "link_util": r.link_util, "plans": r.plans} for r in results],
    }


PLAN_COLUMNS = ("strategy", "conditions", "flow_id", "src_nic", "dst_nic", "src_ip", "dst_ip", "lqpn", "rqpn",
                "field", "old", "new", "flow_label", "changed", "qp", "switch", "destination", "path")


def plan_csv(results: Sequence[ReplayResult]) -> str:
    """Per-flow plans as CSV: sport-plan rows (old -> new port, flow label), static-dst:by=traffic rows (the
    leaf and destination of the flow's static route) and qp-scale rows (one per QP)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, PLAN_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in results:
        for p in r.plans:
            row = {"strategy": r.strategy, "conditions": r.conditions, **p}
            if "qps" in p:
                for i, qp in enumerate(p["qps"]):
                    w.writerow({**row, "qp": i, "lqpn": qp["lqpn"], "rqpn": qp["rqpn"], "field": "udp_src_port",
                                "new": qp["udp_src_port"]})
                continue
            if row.get("path"):
                row["path"] = "|".join(row["path"])
            w.writerow(row)
    return buf.getvalue()


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}figure{margin:1.5em 0}
figcaption{color:#555;font-size:90%}svg{max-width:100%;height:auto}"""


def html_page(title: str, intro: str, results: Sequence[ReplayResult], figures: Sequence[tuple[str, str]]) -> str:
    """A self-contained page: the results table and inline SVG figures (``(caption, svg text)``); no external links."""
    rows = []
    for r in results:
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in (
            r.conditions, r.strategy, f"{r.fim:.3f}", f"{r.fim_flows:.3f}", f"{r.max_util:.3f}", r.max_util_link,
            _num(r.completion_s, ".2f"))) + "</tr>")
    figs = "\n".join(f"<figure>{svg}<figcaption>{html.escape(cap)}</figcaption></figure>" for cap, svg in figures)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_CSS}</style></head>
<body><h1>{html.escape(title)}</h1><p>{html.escape(intro)}</p>
<table><tr><th>conditions</th><th>strategy</th><th>FIM bytes</th><th>FIM flows</th><th>max util</th>
<th>busiest fabric link</th><th>time (s)</th></tr>
{chr(10).join(rows)}
</table>
{figs}
</body></html>
"""
