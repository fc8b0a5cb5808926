"""Score the resolver's placements and the measured link loads against the simulator's ground truth.

Only the demo's report reads ground truth; the pipeline never does. Every number is over the
*scored windows*: the processor's windows ending at least ``warmup_s`` after the simulator started
and no later than the last tick the simulator wrote. A window ``(end - hop, end]`` covers exactly the
simulator's ticks inside it (``GroundTruth.ticks_in``).

- ``path_overlap``: Σ_windows Σ_paths min(est_p, truth_p) / Σ truth_p, with est_p = PathLoad bytes
  the processor placed on path p and truth_p = the bytes the simulator's flows really sent over p.
  The outputs name paths, not flows (PathLoad carries no flow list), so this is the *path-level*
  share of bytes on their true path: it equals the per-flow share unless two flows between the same
  pair of NICs swap paths, and it is never below it.
- ``path_load_error``: Σ_windows Σ_paths |est_p - truth_p| / Σ truth_p (0 = exact; 2 = all bytes on
  wrong paths).
- ``traced_share``: PathLoad traced_bytes / bytes (placed by a fresh path trace; the rest by the
  resolver's own method or trace's fallback), ``confidence``: byte-weighted mean PathLoad confidence.
- ``flow_true_path_share`` (``flow_section``): Σ_windows Σ_flows bytes the flow sent on the path its FlowPath
  records published for that window / Σ flow bytes. The path in effect in a window is the flow's newest FlowPath
  at or before it (records come on a change and at a heartbeat, not every window; demo/flow_path_table.py); a flow
  with none counts wholly wrong, and a flow split over paths (a fault mid-window) counts only the bytes on the
  published one. This is the per-flow figure the path-level ``path_overlap`` bounds from above.
- link counters: the processor's LinkLoad measured bytes vs the switches' own counters in ground
  truth (``counters.jsonl``: on the kernel data plane the kernel's veth counters x scale): the
  transmitting switch's out-octets delta over the window, else the receiving switch's in-octets.
  ``unexplained_share``: |LinkLoad unexplained bytes| / measured bytes over switch-to-switch links
  (host links are on every path of their NIC, so placements cannot be wrong there).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from flowtracer.demo.status import Observed
from flowtracer.sim.fabric.ground_truth import GroundTruth

S = 1_000_000_000
DEFAULT_WARMUP_S = 20.0
"""Windows ending earlier than this after the simulator started are not scored (agents and traces settle)."""


def scored_windows(ends: list[int], gt: GroundTruth, warmup_s: float) -> list[int]:
    """Window ends (ns) at least ``warmup_s`` after the simulator's start and covered by written ticks."""
    last = gt.tick_ends[-1] if gt.tick_ends else 0
    first = gt.start_ns + round(warmup_s * S)
    return [e for e in sorted(ends) if first <= e <= last]


def truth_path_bytes(gt: GroundTruth, start_ns: int, end_ns: int) -> dict[str, int]:
    """Bytes per path id (links joined by ``|``) that the simulator's flows sent in the window; a flow
    that changed path within the window (a fault) is split evenly over the paths it used."""
    out: dict[str, int] = defaultdict(int)
    for fw in gt.flows_in(start_ns, end_ns):
        for path in fw.paths:
            out["|".join(path)] += fw.bytes // len(fw.paths)
    return out


def path_section(obs: Observed, gt: GroundTruth, hop_s: float, warmup_s: float) -> dict[str, Any]:
    """Placement scores of the resolver over the scored windows (module docstring); bytes are frame bytes."""
    hop = round(hop_s * S)
    ends = scored_windows(list(obs.path_loads), gt, warmup_s)
    overlap = err = truth_total = placed = traced = 0
    conf_weighted = 0.0
    worst_window = 0.0
    for end in ends:
        est = obs.path_loads[end]
        truth = truth_path_bytes(gt, end - hop, end)
        w_err = 0
        for pid in est.keys() | truth.keys():
            e = est[pid][0] if pid in est else 0
            t = truth.get(pid, 0)
            overlap += min(e, t)
            w_err += abs(e - t)
        err += w_err
        w_truth = sum(truth.values())
        truth_total += w_truth
        if w_truth:
            worst_window = max(worst_window, w_err / w_truth)
        for b, tb, c in est.values():
            placed += b
            traced += tb
            conf_weighted += b * c
    return {
        "windows_scored": len(ends),
        "warmup_s": warmup_s,
        "first_scored_window_end_ns": ends[0] if ends else None,
        "truth_bytes": truth_total,
        "placed_bytes": placed,
        "path_overlap": _ratio(overlap, truth_total),
        "path_overlap_definition": "sum over windows and paths of min(placed, true) / sum of true bytes "
                                   "(path level: PathLoad names paths, not flows)",
        "path_load_error": _ratio(err, truth_total),
        "path_load_error_worst_window": round(worst_window, 4) if ends else None,
        "traced_share": _ratio(traced, placed),
        "confidence": round(conf_weighted / placed, 4) if placed else None,
    }


FLOW_SHARE_WANTED = 0.98
"""A flow whose true-path share is below this is listed among the worst flows."""


def flow_section(obs: Observed, gt: GroundTruth, hop_s: float, warmup_s: float) -> dict[str, Any]:
    """Per-flow placement score from the published FlowPaths over the scored windows (module docstring)."""
    hop = round(hop_s * S)
    ends = scored_windows(list(obs.path_loads), gt, warmup_s)
    per_flow: dict[int, list[int]] = defaultdict(lambda: [0, 0])  # flow id -> [bytes on published path, bytes]
    for end in ends:
        for fid, by_path in gt.path_bytes(end - hop, end).items():
            info = gt.flows[fid]
            published = obs.paths.path_at((info.src_ip, info.dst_ip, info.udp_src_port), end)
            acc = per_flow[fid]
            acc[0] += by_path.get(published, 0)
            acc[1] += sum(by_path.values())
    right = sum(a for a, _ in per_flow.values())
    total = sum(b for _, b in per_flow.values())
    shares = {fid: a / b for fid, (a, b) in per_flow.items() if b}
    worst = sorted(shares.items(), key=lambda kv: (kv[1], kv[0]))
    return {
        "windows_scored": len(ends),
        "flows_scored": len(shares),
        "flow_true_path_share": _ratio(right, total),
        "flow_true_path_share_definition": "sum over windows and flows of the flow's bytes on the path its FlowPath "
                                           "records published for the window / sum of flow bytes (per flow)",
        "lowest_flow_share": round(worst[0][1], 4) if worst else None,
        "flows_below": sum(1 for v in shares.values() if v < FLOW_SHARE_WANTED),
        "flows_below_threshold": FLOW_SHARE_WANTED,
        "worst_flows": [_flow_name(gt, fid, v) for fid, v in worst[:5] if v < FLOW_SHARE_WANTED],
    }


def _flow_name(gt: GroundTruth, fid: int, share: float) -> dict[str, Any]:
    f = gt.flows[fid]
    return {"src": f.src_nic, "dst": f.dst_nic, "udp_src_port": f.udp_src_port, "job": f.job, "share": round(share, 4)}


def link_section(obs: Observed, gt: GroundTruth, hop_s: float, warmup_s: float) -> dict[str, Any]:
    """Measured link loads vs the switches' own counters, and the bytes no placed flow explains."""
    hop = round(hop_s * S)
    ends = scored_windows(list(obs.link_loads), gt, warmup_s)
    abs_err = truth_total = links = exact = unexplained = measured = 0
    worst = 0.0
    for end in ends:
        for link, (meas, _attr, unexp) in obs.link_loads[end].items():
            truth = _counter_bytes(gt, link, end - hop, end)
            if truth is None:
                continue
            links += 1
            exact += meas == truth
            abs_err += abs(meas - truth)
            truth_total += truth
            if _switch_to_switch(link, obs.switch_names):  # where placements can be wrong (host links cannot)
                measured += meas
                unexplained += abs(unexp)
            if truth > 0:
                worst = max(worst, abs(meas - truth) / truth)
    return {
        "windows_scored": len(ends), "link_windows": links, "exact": exact,
        "error": _ratio(abs_err, truth_total),
        "error_definition": "sum |LinkLoad measured - switch counter delta| / sum counter delta",
        "worst_link_window_error": round(worst, 6) if links else None,
        "unexplained_share": _ratio(unexplained, measured),
        "unexplained_definition": "switch-to-switch links: sum |LinkLoad unexplained bytes| / sum measured bytes",
    }


def _switch_to_switch(link: str, switches: frozenset[str]) -> bool:
    tx, _, rx = link.partition(">")
    return tx.split(":", 1)[0] in switches and rx.split(":", 1)[0] in switches


def _counter_bytes(gt: GroundTruth, link: str, start_ns: int, end_ns: int) -> int | None:
    """The counter delta of a directed link "a:pa>b:pb" between two samples (None: no switch counts it)."""
    tx, _, rx = link.partition(">")
    for (node, port), counter in ((tx.split(":", 1), "out-octets"), (rx.split(":", 1), "in-octets")):
        try:
            a = gt.counters_at(node, start_ns)
            b = gt.counters_at(node, end_ns)
        except KeyError:  # a host, or before the first sample
            continue
        if a.t_ns != start_ns or b.t_ns != end_ns or port not in b.interfaces or port not in a.interfaces:
            return None
        return b.interfaces[port][counter] - a.interfaces[port][counter]
    return None


def _ratio(num: float, den: float) -> float | None:
    return round(num / den, 4) if den else None
