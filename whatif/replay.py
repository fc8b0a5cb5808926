"""Replay: recorded per-window flow bytes placed by a strategy's routes -> loads, FIM, utilization, time (pure).

Definitions (docs/whatif.md has the reasoning):

- **Loads.** A flow's bytes in a window go to every link of its sub-flows' paths in proportion to
  sub-flow share x path weight. Member loads of an ECMP group are summed over the replayed range,
  as the processor sums a rolling window's hops.
- **FIM** (bytes) per group over its members in service, with ``stream/fim.py``; the fabric figure is
  the byte-weighted mean over groups with two or more members in service that carried traffic
  (docs/fim.md). **FIM (flows)** is the FIM of the mean number of flows (QPs) per member per window,
  a sub-flow counting once on every member it has weight on, weighted like the bytes figure.
- **Max link utilization**: the busiest switch-to-switch link's bytes x 8 over (its capacity under
  the conditions x the range's seconds). Above 1 means the strategy offers a link more than it can
  carry in the time the recording took: the traffic would take longer.
- **Completion time**: for every window, the traffic of the window is a demand; flows that progress
  together (one NCCL ring channel: a step waits for its slowest edge) form a coupled group, and the
  max-min fair rates of the groups over the links' capacities (``flowtracer.fabric.maxmin``, a
  flow's load on a link weighted by its bytes relative to its group's biggest flow and by its
  share on the link) give each group's time to move its bytes. The window's time is its slowest
  group's; the range's is the sum over windows: the communication time of the recorded volume.
  Bytes are wire bytes (RoCEv2 frames), so capacities are line rates.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from flowtracer.fabric.maxmin import max_min_rates
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.analytics.fim import fabric_fim, fim, imbalance
from flowtracer.whatif.fabric import ReplayFabric
from flowtracer.whatif.record import Recording, Window
from flowtracer.whatif.routes import Route, demands
from flowtracer.whatif.strategies import StrategySpec, route_all


@dataclass
class ReplayResult:
    """What one strategy under one set of conditions does to the recorded traffic. Units in field names."""

    strategy: str
    conditions: str
    fim: float
    fim_flows: float
    max_util: float
    max_util_link: str
    completion_s: float
    recorded_s: float
    total_bytes: float
    unreachable_flows: int = 0
    unreachable_bytes: float = 0.0
    cv: float = 0.0  # byte-weighted coefficient of variation of member bytes, as the processor's fabric sample
    max_mean_ratio: float = 0.0  # the worst group's max/mean of member bytes
    group_fim: dict[str, float] = field(default_factory=dict)
    group_member_bytes: dict[str, dict[str, float]] = field(default_factory=dict)
    link_bytes: dict[str, float] = field(default_factory=dict)
    link_util: dict[str, float] = field(default_factory=dict)
    plans: list[Mapping[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The headline numbers, JSON-able."""
        return {"strategy": self.strategy, "conditions": self.conditions, "fim": self.fim,
                "fim_flows": self.fim_flows, "max_util": self.max_util, "max_util_link": self.max_util_link,
                "completion_s": self.completion_s if np.isfinite(self.completion_s) else None,
                "recorded_s": self.recorded_s, "total_bytes": self.total_bytes,
                "unreachable_flows": self.unreachable_flows, "unreachable_bytes": self.unreachable_bytes,
                "cv": self.cv, "max_mean_ratio": self.max_mean_ratio}


@dataclass
class Traffic:
    """Recorded windows as arrays: ``bytes[w, f]`` for window w and flow f; coupled group index per flow."""

    windows: Sequence[Window]
    flow_ids: list[str]
    bytes: npt.NDArray[np.float64]
    group: npt.NDArray[np.intp]
    n_groups: int

    @classmethod
    def of(cls, windows: Sequence[Window]) -> Traffic:
        ids = sorted({f.flow_id for w in windows for f in w.flows})
        index = {k: i for i, k in enumerate(ids)}
        b = np.zeros((len(windows), len(ids)))
        coupling: dict[str, str] = {}
        for wi, w in enumerate(windows):
            for f in w.flows:
                b[wi, index[f.flow_id]] += f.bytes
                coupling[f.flow_id] = f.coupling
        names = sorted(set(coupling.values()))
        gidx = {g: i for i, g in enumerate(names)}
        group = np.array([gidx[coupling[k]] for k in ids], dtype=np.intp)
        return cls(windows, ids, b, group, len(names))

    @property
    def seconds(self) -> float:
        return float(sum(w.seconds for w in self.windows))


def incidence(traffic: Traffic, routes: Mapping[str, Route], rf: ReplayFabric
              ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """(share[f, l], flows[f, l], reachable[f]): each flow's share of bytes on each link, the number of
    its sub-flows with weight on the link, and whether every sub-flow has a path."""
    n_f, n_l = len(traffic.flow_ids), len(rf.link_ids)
    share = np.zeros((n_f, n_l))
    count = np.zeros((n_f, n_l))
    ok = np.ones(n_f, dtype=bool)
    for fi, fid in enumerate(traffic.flow_ids):
        route = routes[fid]
        if not route.reachable:
            ok[fi] = False
            continue
        for sub in route.subflows:
            touched: set[int] = set()
            for path, weight in sub.paths:
                for lid in path:
                    li = rf.index[lid]
                    share[fi, li] += sub.share * weight
                    if weight > 0:
                        touched.add(li)
            for li in touched:
                count[fi, li] += 1
    return share, count, ok


def replay(traffic: Traffic, routes: Mapping[str, Route], rf: ReplayFabric, strategy: str,
           with_time: bool = True, time_cache: dict[bytes, float] | None = None) -> ReplayResult:
    """Loads, FIM, utilization and completion time of ``routes`` on ``traffic`` (module docstring).

    ``time_cache``: completion times by placement, for callers replaying many variants of one
    traffic under one set of conditions (ECMP draws often land flows identically).
    """
    share, count, ok = incidence(traffic, routes, rf)
    seconds_needed = float("nan")
    if with_time:
        key = hashlib.blake2b(share.tobytes() + ok.tobytes(), digest_size=16).digest()
        if time_cache is not None and key in time_cache:
            seconds_needed = time_cache[key]
        else:
            seconds_needed = completion_time(traffic, share, ok, rf)
            if time_cache is not None:
                time_cache[key] = seconds_needed
    b = traffic.bytes
    per_window = b @ share  # bytes per window and link
    total = per_window.sum(axis=0)
    active = (b > 0).astype(np.float64)
    mean_flows = (active @ count).mean(axis=0) if len(traffic.windows) else np.zeros(len(rf.link_ids))
    g_fim, g_flows, g_bytes, g_cv, g_members = [], [], [], [], {}
    group_fim = {}
    worst_ratio = 0.0
    for lg in rf.groups:
        gid = lg.group.id
        g_members[gid] = {rf.link_ids[i]: float(total[i]) for i in lg.members}
        if len(lg.members) < 2:
            continue  # a group shrunk to one member has no choice to be uneven about
        x = total[list(lg.members)]
        group_fim[gid] = fim(x)
        if x.sum() > 0:
            im = imbalance(x)
            g_fim.append(group_fim[gid])
            g_flows.append(fim(mean_flows[list(lg.members)]))
            g_bytes.append(float(x.sum()))
            g_cv.append(im.cv)
            worst_ratio = max(worst_ratio, im.max_mean_ratio)
    seconds = traffic.seconds
    util = np.zeros(len(rf.link_ids))
    usable = (rf.capacity_bps > 0) & (seconds > 0)
    util[usable] = total[usable] * 8 / (rf.capacity_bps[usable] * seconds)
    fabric_util = np.where(rf.fabric_link, util, -1.0)
    worst = int(np.argmax(fabric_util)) if fabric_util.size else 0
    unreachable = ~ok
    plans = [plan for fid in traffic.flow_ids if (plan := routes[fid].plan) is not None]
    return ReplayResult(
        strategy=strategy, conditions=rf.conditions.label, fim=fabric_fim(g_fim, g_bytes),
        fim_flows=fabric_fim(g_flows, g_bytes), max_util=float(max(fabric_util[worst], 0.0)) if util.size else 0.0,
        max_util_link=rf.link_ids[worst] if util.size else "",
        completion_s=seconds_needed,
        recorded_s=seconds, total_bytes=float(b.sum()), unreachable_flows=int(unreachable.sum()),
        unreachable_bytes=float(b[:, unreachable].sum()), cv=fabric_fim(g_cv, g_bytes), max_mean_ratio=worst_ratio,
        group_fim=group_fim, group_member_bytes=g_members,
        link_bytes={rf.link_ids[i]: float(v) for i, v in enumerate(total) if v > 0},
        link_util={rf.link_ids[i]: float(util[i]) for i in np.flatnonzero(rf.fabric_link)},
        plans=plans)


def replay_all(windows: Sequence[Window], rf_by_condition: Sequence[ReplayFabric], specs: Sequence[StrategySpec],
               with_time: bool = True) -> list[ReplayResult]:
    """Every strategy under every set of conditions, in that order (conditions outermost)."""
    traffic = Traffic.of(windows)
    flows = demands(windows)
    out = []
    for rf in rf_by_condition:
        for spec in specs:
            out.append(replay(traffic, route_all(spec, flows, rf), rf, spec.label, with_time))
    return out


def completion_time(traffic: Traffic, share: npt.NDArray[np.float64], ok: npt.NDArray[np.bool_],
                    rf: ReplayFabric) -> float:
    """Seconds to move every window's bytes at max-min fair rates, summed over windows (inf when a flow
    with bytes has no path). Consecutive windows whose byte vectors are proportional (steady traffic)
    are moved as one demand: the same answer with one fluid run instead of one per window."""
    b = traffic.bytes
    if (b[:, ~ok] > 0).any():
        return float("inf")
    ef, el = np.nonzero(share)
    ea = share[ef, el]
    grp = traffic.group
    total = 0.0
    for bw in steady_runs(b):
        on = bw[ef] > 0
        if not on.any():
            continue
        bmax = np.zeros(traffic.n_groups)
        np.maximum.at(bmax, grp, bw)
        present = np.flatnonzero(bmax > 0)
        compact = np.full(traffic.n_groups, -1, dtype=np.intp)
        compact[present] = np.arange(present.size)
        g_of = grp[ef[on]]
        total += fluid_makespan(compact[g_of], el[on].astype(np.intp), bw[ef[on]] / bmax[g_of] * ea[on],
                                bmax[present] * 8, rf.capacity_bps)
    return total


def steady_runs(b: npt.NDArray[np.float64], tolerance: float = 0.02) -> list[npt.NDArray[np.float64]]:
    """Summed byte vectors of runs of consecutive windows whose flows' shares of the window's bytes
    differ by less than ``tolerance`` (relative, per flow): within a run the windows are scaled copies
    of one demand, so moving them one by one or together takes the same time."""
    runs: list[npt.NDArray[np.float64]] = []
    ref: npt.NDArray[np.float64] | None = None
    for row in b:
        s = row.sum()
        if s <= 0:
            continue
        norm = row / s
        if ref is not None and ((norm > 0) == (ref > 0)).all() and \
                np.all(np.abs(norm - ref) <= tolerance * np.maximum(ref, 1e-300)):
            runs[-1] = runs[-1] + row
            continue
        runs.append(row.copy())
        ref = norm
    return runs


def fluid_makespan(entry_group: npt.NDArray[np.intp], entry_link: npt.NDArray[np.intp],
                   entry_weight: npt.NDArray[np.float64], bits: npt.NDArray[np.float64],
                   capacity_bps: npt.NDArray[np.float64]) -> float:
    """Seconds until every group has moved ``bits[g]`` (its biggest flow's bits), sharing the links max-min
    fairly and re-sharing each time groups finish (a fluid model, as the simulator's). inf if a group
    with bits left gets no rate."""
    left = bits.astype(np.float64).copy()
    alive = left > 0
    t = 0.0
    while alive.any():
        keep = alive[entry_group]
        rates = max_min_rates(entry_group[keep], entry_link[keep], capacity_bps, left.size,
                              entry_weight=entry_weight[keep])
        if (rates[alive] <= 0).any():
            return float("inf")
        need = np.full(left.size, np.inf)
        need[alive] = left[alive] / rates[alive]
        dt = float(need.min())
        t += dt
        done = alive & (need <= dt * (1 + 1e-6))
        left[alive] -= rates[alive] * dt
        left[done] = 0.0
        alive &= ~done
    return t


# -- what the processor measured on the same recording ---------------------------------------------------


@dataclass
class Measured:
    """The processor's own view of a range: FIM of the counters' member bytes, and its attributed paths."""

    fim: float | None
    max_util: float | None
    group_fim: dict[str, float]
    windows: int


def measured(recording: Recording, rf: ReplayFabric) -> Measured:
    """Group and fabric FIM over the range from the processor's LinkLoads, measured basis.

    As the processor does, a group's window counts only when every member's counter delta was
    trusted in it (``measured_valid``); the max utilization is over the valid windows of each link.
    """
    valid: dict[int, dict[str, float]] = {}
    for ll in recording.link_loads:
        if ll.measured_valid:
            valid.setdefault(ll.window_end_ns, {})[ll.link] = float(ll.measured_bytes)
    if not valid:
        return Measured(None, None, {}, 0)
    g_fim, g_bytes, group_fim = [], [], {}
    for lg in rf.groups:
        ids = [rf.link_ids[i] for i in lg.members]
        if len(ids) < 2:
            continue
        x = np.zeros(len(ids))
        for links in valid.values():
            if all(i in links for i in ids):
                x += [links[i] for i in ids]
        group_fim[lg.group.id] = fim(x)
        if x.sum() > 0:
            g_fim.append(group_fim[lg.group.id])
            g_bytes.append(float(x.sum()))
    hop = rf_hop_s(recording) or 1.0
    per_link: dict[str, list[float]] = {}
    for links in valid.values():
        for lid, v in links.items():
            per_link.setdefault(lid, []).append(v)
    utils = [sum(v) * 8 / (rf.capacity_bps[rf.index[lid]] * hop * len(v)) for lid, v in per_link.items()
             if lid in rf.index and rf.fabric_link[rf.index[lid]] and rf.capacity_bps[rf.index[lid]] > 0]
    return Measured(fabric_fim(g_fim, g_bytes), max(utils) if utils else None, group_fim, len(valid))


def rf_hop_s(recording: Recording) -> float | None:
    """The window length of the recording's LinkLoads in seconds, None when there are none."""
    for ll in recording.link_loads:
        return (ll.window_end_ns - ll.window_start_ns) / 1e9
    return None


def processor_fim(recording: Recording, window_end_ns: int, group: str = "fabric",
                  basis: int = analytics_pb2.LOAD_BASIS_MEASURED) -> analytics_pb2.FimSample | None:
    """The FimSample the processor published for ``group`` and ``basis`` at ``window_end_ns``, if any."""
    found = None
    for s in recording.fims:
        if s.window_end_ns == window_end_ns and s.group == group and s.basis == basis:
            found = s  # a replayed window rewrites the same sample: the last one stands
    return found


def rolling_windows(windows: Sequence[Window], window_end_ns: int, span_ns: int) -> list[Window]:
    """The windows a rolling sample ending at ``window_end_ns`` over ``span_ns`` covers: ends in (end - span, end]."""
    return [w for w in windows if window_end_ns - span_ns < w.end_ns <= window_end_ns]
