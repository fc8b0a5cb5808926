"""The demo's final summary: what the pipeline reported, set against the simulator's ground truth.

The pipeline never reads ground truth; the demo does, only to report how close the pipeline came.
``build_summary`` is pure apart from reading the ground-truth directory; ``summary_lines`` renders
it for the terminal. docs/demo.md documents every field.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowtracer.demo.incidents import IncidentWatch, incidents_section
from flowtracer.demo.node_groups import node_groups_section
from flowtracer.demo.scoring import DEFAULT_WARMUP_S, flow_section, link_section, path_section
from flowtracer.demo.status import Observed
from flowtracer.fabric.topology import Topology
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import Workload
from flowtracer.stream.analytics.fim import fabric_fim, fim
from flowtracer.whatif.reproductions.slow_group import report_lines

S = 1_000_000_000
SUMMARY_VERSION = 1
WARMUP_HOPS = 4
"""Hops after the simulator's start that are not fully measured (collector baselines, first windows)."""
STEADY_AFTER_HOPS = 5
"""Latency statistics start this many hops after the first fully measured window."""
TOLERANCE = 0.02
"""Largest |pipeline - ground truth| fabric FIM still called consistent (the end-to-end test's bound)."""
PATH_LOAD_TOLERANCE = 0.05
"""Largest per-path load error (scores.paths.path_load_error: sum |placed - true| / sum true) still consistent."""
LINK_LOAD_TOLERANCE = 0.001
"""Largest link load error (scores.links.error: LinkLoad measured vs the switches' counter deltas) still consistent:
the pipeline passes counter deltas through, so only rounding may remain."""


def ground_truth_fabric_fim(gt: GroundTruth, end_ns: int, rolling_ns: int) -> float:
    """Fabric FIM the processor should report for the rolling window ending at ``end_ns`` (docs/fim.md)."""
    loads = gt.group_loads(end_ns - rolling_ns, end_ns)
    fims = {g: fim(v) for g, v in loads.items()}
    return fabric_fim(list(fims.values()), [sum(loads[g]) for g in fims])


def fim_section(obs: Observed, gt: GroundTruth | None, rolling_s: float) -> dict[str, Any]:
    """The fabric FIM over time (both bases), with ground truth for every rolling window that lies
    after :func:`fully_measured_from` (and after the simulator's first ``WARMUP_HOPS``)."""
    rolling_ns = round(rolling_s * S)
    start = gt.start_ns if gt is not None else min(obs.fabric_fim, default=0) - rolling_ns
    last_tick = gt.tick_ends[-1] if gt is not None and gt.tick_ends else 0
    measured_from = fully_measured_from(obs)
    if gt is not None:
        measured_from = max(measured_from or 0, gt.start_ns + WARMUP_HOPS * S)
    series = []
    errors: dict[str, list[float]] = {"measured": [], "attributed": []}
    for end in sorted(obs.fabric_fim):
        v = obs.fabric_fim[end]
        truth = None
        if gt is not None and end - rolling_ns >= (measured_from or 0) and end <= last_tick:
            truth = ground_truth_fabric_fim(gt, end, rolling_ns)
            for basis in errors:
                if basis in v:
                    errors[basis].append(abs(v[basis] - truth))
        series.append({"t_s": round((end - start) / S, 3), "window_end_ns": end,
                       "measured": _r(v.get("measured")), "attributed": _r(v.get("attributed")),
                       "ground_truth": _r(truth)})
    compared = len(errors["measured"])
    first_compared = next((x["window_end_ns"] for x in series if x["ground_truth"] is not None), None)
    failed = [basis for basis, errs in errors.items() if errs and max(errs) > TOLERANCE]
    out: dict[str, Any] = {
        "rolling_window_s": rolling_s,
        "final": series[-1] if series else None,
        "mean_measured": _r(statistics.fmean(x["measured"] for x in series if x["measured"] is not None))
        if any(x["measured"] is not None for x in series) else None,
        "vs_ground_truth": {
            "windows_compared": compared,
            "fully_measured_from_ns": measured_from,
            "first_compared_window_end_ns": first_compared,
            "max_abs_error_measured": _r(max(errors["measured"], default=None)),
            "max_abs_error_attributed": _r(max(errors["attributed"], default=None)),
            "tolerance": TOLERANCE,
            # every basis the summary prints is judged: measured and attributed each within tolerance everywhere
            "consistent": bool(compared) and not failed,
            "failed": failed,
        },
        "series": series,
    }
    return out


def ground_truth_checks(summary: dict[str, Any]) -> dict[str, Any]:
    """Every figure the summary sets against ground truth, each with its tolerance and verdict: the fabric FIM on
    both bases (max |error| over the compared windows), the per-path load error, the link loads vs the switches'
    counters, and the node groups' iteration time when there are node groups. ``consistent``: at least one figure
    was compared and none failed; ``failed``: the figures that did not hold (``checks`` says by how much)."""
    checks: list[dict[str, Any]] = []

    def check(figure: str, value: float | None, tolerance: float, what: str) -> None:
        if value is not None:
            checks.append({"figure": figure, "value": value, "tolerance": tolerance, "ok": value <= tolerance,
                           "what": what})

    vs = summary["fabric_fim"]["vs_ground_truth"]
    if vs["windows_compared"]:
        for basis in ("measured", "attributed"):
            check(f"fabric_fim_{basis}", vs[f"max_abs_error_{basis}"], vs["tolerance"],
                  f"max |{basis} fabric FIM - ground truth| over {vs['windows_compared']} windows")
    scores = summary.get("scores") or {}
    paths, links = scores.get("paths") or {}, scores.get("links") or {}
    if paths.get("windows_scored"):
        check("path_loads", paths.get("path_load_error"), PATH_LOAD_TOLERANCE,
              f"per-path load error over {paths['windows_scored']} windows")
    if links.get("link_windows"):
        check("link_loads", links.get("error"), LINK_LOAD_TOLERANCE,
              f"link loads vs switch counters over {links['link_windows']} link-windows")
    ng = summary.get("node_groups") or {}
    if ng.get("iteration_error") is not None:
        check("iteration_time", ng["iteration_error"], ng["tolerance"], "measured job iteration time")
    failed = [c["figure"] for c in checks if not c["ok"]]
    return {"consistent": bool(checks) and not failed, "failed": failed, "checks": checks}


def fully_measured_from(obs: Observed) -> int | None:
    """End of the first window in which every switch's counters measured its links (None: never).

    Before it, collectors were still taking baselines: the measured basis covered only some
    groups, so rolling windows reaching back before it are not comparable with ground truth.
    """
    if not obs.switch_names:
        return None
    return next((e for e in sorted(obs.switches) if obs.switches[e] >= obs.switch_names), None)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def collisions_section(obs: Observed, gt: GroundTruth | None) -> list[dict[str, Any]]:
    """Every collision seen, with its flows; ``job_ground_truth`` names the simulator's job of each flow."""
    jobs: dict[tuple[str, str, int], str] = {}
    if gt is not None:
        jobs = {(f.src_ip, f.dst_ip, f.udp_src_port): f.job for f in gt.flows.values()}
    start = gt.start_ns if gt is not None else 0
    out = []
    for c in sorted(obs.collisions.values(), key=lambda c: (-c.windows, c.group)):
        flows = []
        for key, f in sorted(c.flows.items(), key=lambda kv: -kv[1]["max_bytes_per_hop"]):
            flows.append({**f, "job_ground_truth": jobs.get(key)})
        out.append({"group": c.group, "switch": c.switch, "link": c.link, "idle_link": c.idle_link,
                    "windows": c.windows,
                    "first_s": round((c.first_end_ns - start) / S, 3) if start else None,
                    "last_s": round((c.last_end_ns - start) / S, 3) if start else None,
                    "first_window_end_ns": c.first_end_ns, "last_window_end_ns": c.last_end_ns,
                    "max_link_utilization": round(c.max_link_utilization, 4),
                    "min_idle_utilization": round(c.min_idle_utilization, 4),
                    "judged_windows": c.judged_windows, "harmful_windows": c.harmful_windows, "flows": flows})
    return out


def _gbps(byte_counts: Sequence[int], hop_s: float) -> float | None:
    return round(statistics.median(byte_counts) * 8 / hop_s / 1e9, 1) if byte_counts else None


def faults_section(obs: Observed, gt: GroundTruth | None, hop_s: float = 1.0) -> list[dict[str, Any]]:
    """Each fault the simulator applied, with the measured traffic before and after it.

    ``fabric_gbps_*``: median over windows of the bytes on all switch-to-switch links (both
    directions), as Gbit/s; ``link_gbps_*``: the same for each direction of the faulty cable.
    Before = the up to 15 hops before the fault (after warm-up); after = from 3 hops after it.
    """
    if gt is None:
        return []
    out = []
    ends = sorted(obs.fabric_bytes)
    warm = gt.start_ns + WARMUP_HOPS * S
    for ev in gt.events:
        t = ev["t_ns"]
        before = [e for e in ends if max(warm, t - 15 * S) < e <= t]
        after = [e for e in ends if e > t + 3 * S]
        target = str(ev.get("target", ""))
        item: dict[str, Any] = {"at_s": round((t - gt.start_ns) / S, 3), "kind": ev.get("kind"), "target": target}
        if "capacity" in ev:
            item["capacity"] = ev["capacity"]
        item["fabric_gbps_before"] = _gbps([obs.fabric_bytes[e] for e in before], hop_s)
        item["fabric_gbps_after"] = _gbps([obs.fabric_bytes[e] for e in after], hop_s)
        links: dict[str, dict[str, float | None]] = {}
        names = {lk for e in ends for lk in obs.link_bytes[e]
                 if lk.startswith(target + ">") or lk.endswith(">" + target)} if target else set()
        for lk in sorted(names):
            links[lk] = {"gbps_before": _gbps([obs.link_bytes[e].get(lk, 0) for e in before], hop_s),
                         "gbps_after": _gbps([obs.link_bytes[e].get(lk, 0) for e in after], hop_s)}
        item["links"] = links
        out.append(item)
    return out


def scores_section(obs: Observed, gt: GroundTruth | None, hop_s: float, warmup_s: float,
                   resolver: str | None) -> dict[str, Any]:
    """The resolver's placements and the measured link loads scored against ground truth (demo/scoring.py)."""
    out: dict[str, Any] = {"resolver": resolver, "resolvers_in_outputs": sorted(obs.resolvers),
                           "collision_flow_methods": dict(sorted(obs.collision_methods.items())),
                           "collision_min_confidence": _r(min(obs.collision_confidence.values(), default=None))}
    if gt is None:
        return {**out, "paths": None, "flows": None, "links": None}
    return {**out, "paths": path_section(obs, gt, hop_s, warmup_s), "flows": flow_section(obs, gt, hop_s, warmup_s),
            "links": link_section(obs, gt, hop_s, warmup_s)}


def build_summary(obs: Observed, *, ground_truth_dir: str | Path | None, rolling_s: float, hop_s: float,
                  extra: dict[str, Any], warmup_s: float = DEFAULT_WARMUP_S,
                  resolver: str | None = None, incidents: IncidentWatch | None = None,
                  node_groups: tuple[Topology, Workload] | None = None) -> dict[str, Any]:
    """The whole summary. ``extra`` carries what only the command knows (run, sink, stages, scenario);
    ``node_groups``: the scenario's topology and workload when it has node groups (demo/node_groups.py)."""
    gt = None
    gt_error = None
    if ground_truth_dir is not None:
        try:
            gt = GroundTruth.load(ground_truth_dir)
        except (OSError, ValueError, KeyError) as e:
            gt_error = f"cannot read the simulator's ground truth in {ground_truth_dir}: {e}"
    summary: dict[str, Any] = {"summary_version": SUMMARY_VERSION,
                               **{k: v for k, v in extra.items() if k != "sim_lag_at_stop_s"}}
    summary["fabric_fim"] = fim_section(obs, gt, rolling_s)
    summary["collisions"] = collisions_section(obs, gt)
    summary["faults"] = faults_section(obs, gt, hop_s)
    summary["incidents"] = incidents_section(incidents, gt) if incidents is not None else []
    summary["scores"] = scores_section(obs, gt, hop_s, warmup_s, resolver)
    if node_groups is not None:
        summary["node_groups"] = node_groups_section(obs, *node_groups, gt, warmup_s, summary["fabric_fim"]["series"])
    # Steady state: from a few hops after every switch was measured (start-up windows wait out the grace).
    steady_from = (fully_measured_from(obs) or 0) + STEADY_AFTER_HOPS * S
    summary["pipeline"] = {
        "fabric_windows": len(obs.fabric_fim), "output_records": obs.records,
        "dead_letters": obs.dead_letters, "dead_letter_reasons": obs.dead_letter_reasons,
        "latency_window_end_to_kafka": obs.latency_stats(steady_from),
        "latency_window_end_to_kafka_from_start": obs.latency_stats(), "undecodable_outputs": obs.undecodable,
        "incidents_read_back": obs.incidents_read,
    }
    if gt is not None:
        summary["pipeline"]["sim_ticks"] = len(gt.tick_ends)
    # The simulator runs in real time: how far its newest tick lagged the wall clock when the run ended.
    summary["pipeline"]["sim_lag_at_stop_s"] = extra.get("sim_lag_at_stop_s")
    summary["ground_truth"] = {"dir": str(ground_truth_dir) if ground_truth_dir else None, "error": gt_error}
    summary["vs_ground_truth"] = ground_truth_checks(summary)
    return summary


def summary_lines(s: dict[str, Any]) -> list[str]:
    """The summary for the terminal: a few lines a person reads."""
    lines = []
    f = s["fabric_fim"]
    fin = f["final"]
    vs = f["vs_ground_truth"]
    if fin:
        gt = "n/a" if fin["ground_truth"] is None else f"{fin['ground_truth']:.3f}"
        lines.append(f"fabric FIM (rolling {f['rolling_window_s']:g} s), last window: measured {_f(fin['measured'])}, "
                     f"attributed {_f(fin['attributed'])}, ground truth {gt}")
        if vs["windows_compared"]:
            verdict = "consistent with" if vs["consistent"] else "NOT consistent with"
            lines.append(f"  {verdict} ground truth over {vs['windows_compared']} windows: max |error| measured "
                         f"{vs['max_abs_error_measured']:.4f}, attributed {_f(vs['max_abs_error_attributed'], 4)} "
                         f"(tolerance {vs['tolerance']})"
                         + (f"; over tolerance: {', '.join(vs['failed'])}" if vs.get("failed") else ""))
        else:
            lines.append("  not compared with ground truth: no rolling window lay inside fully measured time "
                         "(run longer than ~15 s)")
    else:
        lines.append("fabric FIM: no window was finalized (run longer, or see the processor's log)")
    if not s["collisions"]:
        lines.append("collisions: none seen")
    for c in s["collisions"][:4]:
        jobs = sorted({fl["job_id"] or fl["job_ground_truth"] or fl["comm_id"][:8] for fl in c["flows"]} - {""})
        lines.append(f"collision {c['group']}: {len(c['flows'])} flows share {c['link']} "
                     f"(up to {c['max_link_utilization']:.0%}) while {c['idle_link']} idles, {c['windows']} windows"
                     + (f", harmful in {c['harmful_windows']} of {c['judged_windows']} judged"
                        if c["judged_windows"] else "")
                     + (f"; job {', '.join(jobs)}" if jobs else ""))
    for fl in s["faults"]:
        what = f"{fl['kind']} {fl['target']}" + (f" to {fl['capacity']:.0%}" if "capacity" in fl else "")
        lines.append(f"fault at {fl['at_s']:.0f} s: {what}; switch-to-switch traffic "
                     f"{_g(fl['fabric_gbps_before'])} -> {_g(fl['fabric_gbps_after'])} Gbit/s")
    lines += node_group_lines(s.get("node_groups"))
    lines += incident_summary_lines(s.get("incidents") or [])
    lines += score_lines(s.get("scores"))
    lines += check_lines(s.get("vs_ground_truth"))
    p = s["pipeline"]
    lat = p["latency_window_end_to_kafka"]
    lines.append(f"pipeline: {p['fabric_windows']} fabric windows, latency sample->output p50 {_f(lat['p50_s'], 1)} s "
                 f"p99 {_f(lat['p99_s'], 1)} s, dead letters {p['dead_letters']}"
                 + (f"; simulator {p.get('sim_ticks')} ticks, newest {p['sim_lag_at_stop_s']:.1f} s behind the "
                    "clock at stop" if p.get("sim_lag_at_stop_s") is not None else ""))
    cpu = s.get("cpu") or {}
    if cpu.get("machine_busy") is not None:
        lines.append(f"cpu: machine {cpu['machine_busy']:.0%} busy over {cpu['cores']} cores; stages used "
                     f"{cpu['stages_cpu_s']:.0f} CPU-s in {s.get('ran_s', 0):.0f} s")
    lines += broker_lines(s.get("broker"))
    return lines


def broker_lines(b: dict[str, Any] | None) -> list[str]:
    """Where the embedded broker kept records and what its retention freed."""
    if not b:
        return []
    rss = b.get("broker_resident_bytes")
    resident = f"; broker resident {rss / 1e6:.0f} MB" if rss is not None else ""
    if b.get("storage") != "objects":
        return [f"broker: records in its memory, none ever freed{resident}"]
    return [f"broker: records in the object store, retention {b['retention_s']:g} s: {b['objects_kept']:,} batch "
            f"objects kept ({b['bytes_kept'] / 1e6:.1f} MB), {b['objects_deleted']:,} deleted "
            f"({b['bytes_deleted'] / 1e6:.1f} MB) in {b['sweeps']} sweeps, {b['sweep_errors']} errors; store holds "
            f"{b['store_bytes'] / 1e6:.0f} MB{resident}"]


def node_group_lines(ng: dict[str, Any] | None) -> list[str]:
    """The job over node groups: measured iteration time per group, the all-fast counterfactual, the FIM."""
    if not ng:
        return []
    sp = ng["span"]
    lines = [f"job {ng['job']} over node groups ({len(ng['hosts'])} hosts; measured from the agents' NCCL opCounts "
             f"and port bytes, {sp['from_s']:g}-{sp['to_s']:g} s, {ng['hosts_measured']} hosts): iteration "
             f"{_ms(ng['iteration_s'])}, ground truth {_ms(ng['iteration_s_ground_truth'])}"
             + (f" (error {_pct(ng['iteration_error'])}, tolerance {_pct(ng['tolerance'], 0)})"
                if ng["iteration_error"] is not None else "")]
    lines += ["  " + line for line in report_lines(ng)]
    fm = ng["fim"]
    lines.append(f"  all nodes fast, counterfactual simulator run (ground truth): iteration "
                 f"{_ms(ng['all_fast_iteration_s_ground_truth'])}; fabric FIM with the slow group: processor "
                 f"{_f(fm['with_slow_group_measured'])} over {fm['windows']} windows, ground truth "
                 f"{_f(fm['with_slow_group_ground_truth'])}")
    return lines


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:.1f} ms"


def incident_summary_lines(incidents: list[dict[str, Any]]) -> list[str]:
    """One line per incident: kind, top suspects, when (s after the simulator's start), affected jobs; its
    consequences (a pause storm's paused links and stopped hosts) indented under it."""
    if not incidents:
        return ["incidents: none"]
    out = []
    for i in incidents:
        when = (f"from {i['start_s']:g} s (reported at {i['detected_s']:g} s)" if i["start_s"] is not None
                else "")
        when += f" to {i['end_s']:g} s" if i["end_s"] is not None else (", still open" if when else "still open")
        jobs = ", ".join(i.get("jobs") or i["jobs_ground_truth"]) or f"{len(i['flows'])} flows"
        colls = i.get("collectives") or []
        slowed = f"; slowed {', '.join(colls[:4])}{'...' if len(colls) > 4 else ''}" if colls else ""
        out.append(f"incident {i['kind']} {when}: suspects {', '.join(x['component'] for x in i['suspects'][:3])}; "
                   f"affects {jobs}{slowed}")
        out += consequence_lines(i.get("consequences") or {})
    return out


def consequence_lines(c: dict[str, Any], shown: int = 4) -> list[str]:
    """A cause's consequences, indented under its incident: the links its pauses reached, the hosts that stopped."""
    out = []
    for key, what in (("paused_links", "paused"), ("stopped_hosts", "stopped sending")):
        items = c.get(key) or []
        if items:
            out.append(f"  consequence: {len(items)} {'links' if key == 'paused_links' else 'hosts'} {what}: "
                       f"{', '.join(items[:shown])}{', ...' if len(items) > shown else ''}")
    return out


def score_lines(sc: dict[str, Any] | None) -> list[str]:
    """The placement and link scores in a few lines (none without ground truth)."""
    if not sc or not sc.get("paths"):
        return []
    p, lk = sc["paths"], sc["links"]
    lines = [f"resolver {sc['resolver'] or ', '.join(sc['resolvers_in_outputs'])} vs ground truth over "
             f"{p['windows_scored']} windows after {p['warmup_s']:g} s: bytes on their true path "
             f"{_pct(p['path_overlap'])} (path level), {_pct((sc.get('flows') or {}).get('flow_true_path_share'))} "
             f"(per flow), per-path load error {_pct(p['path_load_error'])}, "
             f"placed by traces {_pct(p['traced_share'])}, confidence {_f(p['confidence'], 2)}"]
    methods = ", ".join(f"{m} {n}" for m, n in sc["collision_flow_methods"].items())
    lines.append(f"  link loads vs switch counters: error {_pct(lk['error'], 3)} over {lk['link_windows']} "
                 f"link-windows ({lk['exact']} exact); unexplained {_pct(lk['unexplained_share'])} of "
                 "switch-to-switch bytes"
                 + (f"; collision flows by method: {methods}, lowest collision confidence "
                    f"{_f(sc['collision_min_confidence'], 2)}" if methods else ""))
    return lines


def check_lines(v: dict[str, Any] | None) -> list[str]:
    """One line: whether every figure compared with ground truth held, else which did not and by how much."""
    if not v or not v["checks"]:
        return []
    if v["consistent"]:
        return [f"consistent with ground truth in every figure compared: {', '.join(c['figure'] for c in v['checks'])}"]
    bad = [c for c in v["checks"] if not c["ok"]]
    return ["NOT consistent with ground truth: " + "; ".join(
        f"{c['figure']} {c['value']:.4f} > {c['tolerance']:g} ({c['what']})" for c in bad)]


def _pct(x: float | None, nd: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{nd}f}%"


def _f(x: float | None, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def _g(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f}"
