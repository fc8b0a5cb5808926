"""The ``trace`` resolver and flows without one path: probes of one 5-tuple that went different ways mark the flow
``sprayed``, placed over its equal-cost paths by the counters' shares, never as a whole flow on one path."""

from __future__ import annotations

from dataclasses import replace

import pytest
from path_traces import make_trace
from test_resolve_infer import SEC, Synth, routed, synth

from flowtracer.fabric.topology_generate import FabricSpec
from flowtracer.schemas.v1 import traces_pb2
from flowtracer.stream.resolvers.contract import SPRAYED_METHOD, TRACE_METHOD, FlowObs, Placement
from flowtracer.stream.resolvers.trace import TraceResolver

SPEC = FabricSpec(hosts=16, leaves=4, spines=4)


def two_paths(sy: Synth, f: FlowObs) -> tuple[tuple[str, ...], tuple[str, ...]]:
    true = sy.truth[f.flow_id]
    other = next(p for p in sy.fabric.equal_cost_paths(f.src_nic, f.dst_nic) if p[1] != true[1])
    return true, other


def split_trace(sy: Synth, f: FlowObs, first: tuple[str, ...], second: tuple[str, ...],
                finished_ns: int) -> traces_pb2.PathTrace:
    """A complete trace whose TTL 2 went the ``first`` way and whose TTL 3 the ``second``: a spraying leaf."""
    t = make_trace(sy.fabric, f, first, finished_ns)
    later = make_trace(sy.fabric, f, second, finished_ns)
    t.hops[2].CopyFrom(later.hops[2])
    return t


def test_a_trace_whose_probes_went_different_ways_marks_the_flow_sprayed() -> None:
    sy = synth(SPEC, qps_per_nic=1, idle=0.0)
    res = TraceResolver(sy.fabric)
    f = sy.flows[routed(sy)[0]]
    true, other = two_paths(sy, f)
    res.observe_trace(f.flow_id, split_trace(sy, f, true, other, SEC))
    assert res.spread_found == 1
    end, obs, measured = sy.window()
    p = res.resolve(end, obs, measured)[routed(sy)[0]]
    assert p is not None and p.method == SPRAYED_METHOD and p.confidence < 1
    cands = sy.fabric.equal_cost_paths(f.src_nic, f.dst_nic)
    assert {path for path, _ in p.paths} == set(cands) and sum(w for _, w in p.paths) == pytest.approx(1.0)
    assert max(w for _, w in p.paths) < 1.0
    assert res.fallback_reason[f.flow_id].startswith("sprayed")
    # A later trace that happens to look like one path is no evidence of one path: still sprayed.
    res.observe_trace(f.flow_id, make_trace(sy.fabric, f, true, 2 * SEC))
    assert res.resolve(*sy.window())[routed(sy)[0]].method == SPRAYED_METHOD  # type: ignore[union-attr]
    # The label survives a restart; the switch keeps spraying a new 5-tuple of the flow, until it is let go.
    again = TraceResolver(sy.fabric)
    again.restore(res.state())
    assert again.resolve(*sy.window())[routed(sy)[0]].method == SPRAYED_METHOD  # type: ignore[union-attr]
    moved = replace(f, udp_src_port=f.udp_src_port + 1)
    res.observe_trace(f.flow_id, make_trace(sy.fabric, moved, true, 3 * SEC))
    assert res.resolve(4 * SEC, [moved], {})[0].method == SPRAYED_METHOD  # type: ignore[union-attr]
    hold = res.config.spreader_hold_ns
    for k in range(1, 65):  # the periodic forget runs every 64 windows
        last = res.resolve(4 * SEC + hold + k, [moved], {})[0]
    assert "spreaders" in res.state() and not res.state()["spreaders"]
    assert last is not None and last.method != SPRAYED_METHOD


def test_a_spreading_switch_sprays_every_flow_that_branches_there_and_two_differing_traces_are_no_evidence() -> None:
    sy = synth(SPEC, qps_per_nic=1, idle=0.0)
    fab = sy.fabric
    leaf_of = {n: fab.nics[sy.flows[n].src_nic].leaf for n in routed(sy)}
    i = routed(sy)[0]
    same = next(n for n in routed(sy) if n != i and leaf_of[n] == leaf_of[i])
    elsewhere = next(n for n in routed(sy) if leaf_of[n] != leaf_of[i])
    res = TraceResolver(fab)
    for n in (same, elsewhere):  # consistent traces, one path each
        fl = sy.flows[n]
        res.observe_trace(fl.flow_id, make_trace(fab, fl, sy.truth[fl.flow_id], SEC))
    # A later trace of one 5-tuple on another path, no group change seen: a rehash not yet seen looks the same.
    g = sy.flows[elsewhere]
    res.observe_trace(g.flow_id, make_trace(fab, g, two_paths(sy, g)[1], 2 * SEC))
    f = sy.flows[i]
    true, other = two_paths(sy, f)
    res.observe_trace(f.flow_id, split_trace(sy, f, true, other, 3 * SEC))  # leaf i's probes parted there
    assert res.state()["spreaders"] == {leaf_of[i]: 3 * SEC}
    end, obs, _ = sy.window()
    out = res.resolve(end, obs, {})
    assert out[i].method == SPRAYED_METHOD and out[same].method == SPRAYED_METHOD  # type: ignore[union-attr]
    assert out[elsewhere] == Placement.single(two_paths(sy, g)[1], 1.0, TRACE_METHOD)
    again = TraceResolver(fab)
    again.restore(res.state())
    assert again.resolve(end, obs, {})[same].method == SPRAYED_METHOD  # type: ignore[union-attr]


def test_shares_follow_the_counters_and_sprayed_bytes_fill_no_residual_twice() -> None:
    sy = synth(SPEC, qps_per_nic=1, idle=0.0)
    res = TraceResolver(sy.fabric)
    n = routed(sy)[0]
    f = sy.flows[n]
    true, other = two_paths(sy, f)
    res.observe_trace(f.flow_id, split_trace(sy, f, true, other, SEC))
    end, obs, measured = sy.window()
    # Only the sprayed flow's source leaf's uplinks matter at the branching hop: load one of them 3:1.
    ups = {p[1] for p in sy.fabric.equal_cost_paths(f.src_nic, f.dst_nic)}
    loaded = {lid: (3_000_000 if lid == true[1] else 1_000_000) for lid in ups}
    p = res.resolve(end, obs, {**measured, **loaded})[n]
    assert p is not None
    on_true = sum(w for path, w in p.paths if path[1] == true[1])
    assert on_true == pytest.approx(3 / (3 + len(ups) - 1))
