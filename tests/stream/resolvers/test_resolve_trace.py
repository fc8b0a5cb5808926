"""The ``trace`` resolver on PathTraces built from a fabric's true paths (a hash seed it is not told)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from path_traces import make_trace
from test_resolve_infer import SEC, Synth, routed, run, synth

from flowtracer.fabric.topology_generate import FabricSpec
from flowtracer.schemas.v1 import traces_pb2
from flowtracer.stream.resolvers.contract import TRACE_METHOD, Placement
from flowtracer.stream.resolvers.trace import TraceConfig, TraceResolver
from flowtracer.stream.resolvers.trace_path import ingress_index, traced_path

COMPLETE, PARTIAL, FAILED = (traces_pb2.TRACE_STATUS_COMPLETE, traces_pb2.TRACE_STATUS_PARTIAL,
                             traces_pb2.TRACE_STATUS_FAILED)


def traced(sy: Synth, res: TraceResolver, which: list[int], finished_ns: int) -> None:
    for i in which:
        f = sy.flows[i]
        res.observe_trace(f.flow_id, make_trace(sy.fabric, f, sy.truth[f.flow_id], finished_ns))


SPEC = FabricSpec(hosts=16, leaves=4, spines=4)


def test_traced_flows_are_placed_on_their_path_with_confidence_one() -> None:
    sy = synth(SPEC, qps_per_nic=2)
    res = TraceResolver(sy.fabric)
    traced(sy, res, list(range(len(sy.flows))), finished_ns=SEC // 2)
    obs, out = run(res, sy, 3)
    for f, p in zip(obs, out, strict=True):
        assert p == Placement.single(sy.truth[f.flow_id], 1.0, TRACE_METHOD)
    assert not res.fallback_reason and res.disagreements == 0


def test_untraced_stale_partial_and_inconsistent_fall_back_to_infer_and_say_so() -> None:
    sy = synth(SPEC, qps_per_nic=2)
    fab = sy.fabric
    res = TraceResolver(fab, TraceConfig(unstamped_valid_ns=60 * SEC))
    which = routed(sy)
    a, b, c, d, e, g = (sy.flows[i] for i in which[:6])
    truth = sy.truth
    res.observe_trace(a.flow_id, make_trace(fab, a, truth[a.flow_id], SEC))  # fresh, complete: traced
    res.observe_trace(b.flow_id, make_trace(fab, b, truth[b.flow_id], -100 * SEC))  # stale
    # Partial: the spine (TTL 2) did not answer; the destination leaf's ingress still names the spine: unique.
    res.observe_trace(c.flow_id, make_trace(fab, c, truth[c.flow_id], SEC, PARTIAL, lost=(2,)))
    # Partial with the spine and the destination leaf lost: 4 paths fit.
    res.observe_trace(d.flow_id, make_trace(fab, d, truth[d.flow_id], SEC, PARTIAL, lost=(2, 3)))
    # Inconsistent: the spine says the probe came in from another leaf than the flow's.
    te = truth[e.flow_id]
    spine, src_leaf = fab.links[te[1]].dst_node, fab.links[te[1]].src_node
    stray = next(lid for lid, lk in fab.links.items() if lk.dst_node == spine and lk.src_node != src_leaf)
    res.observe_trace(e.flow_id, make_trace(fab, e, (te[0], stray, *te[2:]), SEC))
    res.observe_trace(g.flow_id, make_trace(fab, g, truth[g.flow_id], SEC, FAILED))
    end, obs, measured = sy.window()
    out = res.resolve(end, obs, measured)
    by_id = {f.flow_id: p for f, p in zip(obs, out, strict=True)}
    assert by_id[a.flow_id] == Placement.single(truth[a.flow_id], 1.0, TRACE_METHOD)
    assert by_id[c.flow_id] == Placement.single(truth[c.flow_id], 1.0, TRACE_METHOD)
    for f in (b, d, e, g):
        p = by_id[f.flow_id]
        assert p is not None and p.method == "infer" and p.confidence < 1.0
    why = res.fallback_reason
    assert why[b.flow_id].startswith("stale")
    assert why[d.flow_id] == "partial: 4 equal-cost paths fit the hops that answered"
    assert why[e.flow_id].startswith("inconsistent")
    assert why[g.flow_id] == "failed trace"
    untraced = next(f for f in obs if f.flow_id not in {a.flow_id, b.flow_id, c.flow_id, d.flow_id, e.flow_id,
                                                         g.flow_id})
    assert why[untraced.flow_id] == "no trace"


def test_another_five_tuple_and_tombstones() -> None:
    sy = synth(SPEC, qps_per_nic=1)
    res = TraceResolver(sy.fabric)
    f = sy.flows[routed(sy)[0]]
    res.observe_trace(f.flow_id, make_trace(sy.fabric, f, sy.truth[f.flow_id], SEC))
    moved = replace(f, udp_src_port=f.udp_src_port + 1)  # a new source port: the trace is of the old path
    p = res.resolve(2 * SEC, [moved], {})[0]
    assert p is not None and p.method == "infer"
    assert res.fallback_reason[f.flow_id].startswith("another 5-tuple")
    assert res.resolve(3 * SEC, [f], {})[0] == Placement.single(sy.truth[f.flow_id], 1.0, TRACE_METHOD)
    res.observe_trace(f.flow_id, None)  # the flow ended
    assert res.resolve(4 * SEC, [f], {})[0].method == "infer"  # type: ignore[union-attr]
    assert res.fallback_reason[f.flow_id] == "no trace"
    older = make_trace(sy.fabric, f, sy.truth[f.flow_id], SEC)
    res.observe_trace(f.flow_id, make_trace(sy.fabric, f, sy.truth[f.flow_id], 5 * SEC))
    res.observe_trace(f.flow_id, older)  # late and older: ignored
    assert res.state()["traces"][f.flow_id][7] is not None and res.state()["traces"][f.flow_id][8] == ""
    assert res._traces[f.flow_id].finished_ns == 5 * SEC


def test_a_trace_that_contradicts_the_counters_is_counted_and_untrusted(caplog: pytest.LogCaptureFixture) -> None:
    sy = synth(SPEC, qps_per_nic=1, idle=0.0)
    fab = sy.fabric
    res = TraceResolver(fab, TraceConfig(disagree_windows=3))
    which = routed(sy)
    traced(sy, res, which, SEC)
    f = sy.flows[which[0]]
    true = sy.truth[f.flow_id]
    wrong = next(p for p in fab.equal_cost_paths(f.src_nic, f.dst_nic) if p[1] != true[1])
    res.observe_trace(f.flow_id, make_trace(fab, f, wrong, SEC))  # a wrong trace (a bug, a rehash since)
    for _ in range(2):
        end, obs, measured = sy.window()
        out = res.resolve(end, obs, measured)
        assert out[which[0]].method == TRACE_METHOD  # type: ignore[union-attr]  # not yet K windows
    end, obs, measured = sy.window()
    out = res.resolve(end, obs, measured)
    assert res.disagreements >= 1
    assert out[which[0]].method == "infer"  # type: ignore[union-attr]
    assert res.fallback_reason[f.flow_id].startswith("untrusted")
    assert sum("disagrees with the counters" in r.message and f.flow_id in r.message for r in caplog.records) == 1
    asked = res.take_retrace_requests()  # its agent is asked to trace it again (trace-requests topic), once
    assert (f.flow_id, f.src_nic) in asked and len(asked) == len(set(asked))
    res.resolve(*sy.window())  # still untrusted: no second count, log line or request for this trace
    assert sum(f.flow_id in r.message for r in caplog.records) == 1
    assert res.take_retrace_requests() == []
    res.observe_trace(f.flow_id, make_trace(fab, f, true, 2 * SEC))  # a newer trace is trusted again
    out = res.resolve(*sy.window())
    assert out[which[0]] == Placement.single(true, 1.0, TRACE_METHOD)


def test_state_round_trips() -> None:
    sy = synth(SPEC, qps_per_nic=2)
    res = TraceResolver(sy.fabric)
    which = routed(sy)
    traced(sy, res, which[: len(which) // 2], SEC)
    run(res, sy, 5)
    again = TraceResolver(sy.fabric)
    again.restore(res.state())
    window = sy.window()
    assert again.resolve(*window) == res.resolve(*window)
    with pytest.raises(ValueError, match="version"):
        again.restore({"version": 99})


def test_traced_path_reads_hops_as_ingress_links() -> None:
    sy = synth(SPEC, qps_per_nic=1)
    fab = sy.fabric
    f = sy.flows[routed(sy)[0]]
    tp = traced_path(fab, ingress_index(fab), make_trace(fab, f, sy.truth[f.flow_id], SEC))
    assert tp.path == sy.truth[f.flow_id] and tp.why == ""
    bad = make_trace(fab, f, sy.truth[f.flow_id], SEC)
    bad.hops[1].port = "Ethernet999"
    assert traced_path(fab, ingress_index(fab), bad).why.startswith("inconsistent: hop ttl 2")


def stamped(sy: Synth, f: object, finished_ns: int, valid_until_ns: int) -> traces_pb2.PathTrace:
    t = make_trace(sy.fabric, f, sy.truth[f.flow_id], finished_ns)  # type: ignore[arg-type, attr-defined]
    t.valid_until_ns = valid_until_ns
    return t


def test_a_stamped_trace_holds_until_its_valid_until_whatever_its_age() -> None:
    """The agent's ``valid_until_ns`` decides, not a processor-side age: a trace an hour old still places its flow
    while the agent vouches for it, and stops the window after; an unstamped trace holds ``unstamped_valid_ns``."""
    sy = synth(SPEC, qps_per_nic=1)
    res = TraceResolver(sy.fabric, TraceConfig(unstamped_valid_ns=60 * SEC))
    f, g = (sy.flows[i] for i in routed(sy)[:2])
    res.observe_trace(f.flow_id, stamped(sy, f, SEC, 4000 * SEC))
    res.observe_trace(g.flow_id, make_trace(sy.fabric, g, sy.truth[g.flow_id], SEC))  # an older agent's
    placed = res.resolve(3600 * SEC, [f, g], {})
    assert placed[0] == Placement.single(sy.truth[f.flow_id], 1.0, TRACE_METHOD)
    assert placed[1].method == "infer" and res.fallback_reason[g.flow_id].startswith("stale")  # type: ignore[union-attr]
    assert res.resolve(61 * SEC, [g], {})[0].method == TRACE_METHOD  # type: ignore[union-attr]  # finished + 60 s
    assert res.resolve(62 * SEC, [g], {})[0].method == "infer"  # type: ignore[union-attr]
    assert res.resolve(4000 * SEC, [f], {})[0].method == TRACE_METHOD  # type: ignore[union-attr]
    assert res.resolve(4001 * SEC, [f], {})[0].method == "infer"  # type: ignore[union-attr]
    assert res.fallback_reason[f.flow_id].startswith("stale: valid until")


def test_a_group_change_on_the_path_ends_older_traces_until_a_newer_one() -> None:
    """A leaf's AFT groups change (a next hop withdrawn): every trace through the leaf that finished before the
    sample showing it falls back; traces of other leaves stay; a trace after the change places again. The first
    groups seen are a baseline, and the same groups again are no change."""
    sy = synth(SPEC, qps_per_nic=1)
    fab = sy.fabric
    res = TraceResolver(fab)
    which = routed(sy)
    f = sy.flows[which[0]]
    leaf = fab.nics[f.src_nic].leaf
    other = next(sy.flows[i] for i in which  # a flow ``leaf`` does not forward (it may end there)
                 if leaf not in {fab.links[lid].src_node for lid in sy.truth[sy.flows[i].flow_id][1:-1]})
    for x in (f, other):
        res.observe_trace(x.flow_id, stamped(sy, x, SEC, 1000 * SEC))
    ports = sorted({lk.src_port for lk in fab.out_links[leaf] if lk.dst_node in fab.switch_names})
    res.observe_groups(leaf, [dict.fromkeys(ports, 1)], at_ns=2 * SEC)  # the baseline
    res.observe_groups(leaf, [dict.fromkeys(reversed(ports), 1)] * 2, at_ns=3 * SEC)  # the same, twice: no change
    assert [p.method for p in res.resolve(4 * SEC, [f, other], {})] == [TRACE_METHOD, TRACE_METHOD]  # type: ignore[union-attr]
    res.observe_groups(leaf, [dict.fromkeys(ports[1:], 1)], at_ns=5 * SEC)  # a member withdrawn
    out = res.resolve(5 * SEC, [f, other], {})
    assert out[0].method == "infer" and out[1].method == TRACE_METHOD  # type: ignore[union-attr]
    assert res.fallback_reason[f.flow_id] == f"stale: the ECMP groups of {leaf} changed after the trace"
    # The state carries the groups and the change: a restarted processor does not trust the old trace either.
    again = TraceResolver(fab)
    again.restore(res.state())
    assert again.resolve(6 * SEC, [f], {})[0].method == "infer"  # type: ignore[union-attr]
    res.observe_trace(f.flow_id, stamped(sy, f, 6 * SEC, 1000 * SEC))  # re-traced after the change
    assert res.resolve(7 * SEC, [f], {})[0] == Placement.single(sy.truth[f.flow_id], 1.0, TRACE_METHOD)


def test_a_state_saved_before_valid_until_reads_as_unstamped() -> None:
    sy = synth(SPEC, qps_per_nic=1)
    f = sy.flows[routed(sy)[0]]
    res = TraceResolver(sy.fabric)
    res.observe_trace(f.flow_id, make_trace(sy.fabric, f, sy.truth[f.flow_id], SEC))
    state = res.state()
    state["traces"] = {fid: v[:9] for fid, v in state["traces"].items()}  # the 9-item form of older processors
    state.pop("groups")
    state.pop("groups_changed")
    again = TraceResolver(sy.fabric, TraceConfig(unstamped_valid_ns=60 * SEC))
    again.restore(state)
    assert again._traces[f.flow_id].valid_until_ns == 0
    assert again.resolve(61 * SEC, [f], {})[0].method == TRACE_METHOD  # type: ignore[union-attr]
    assert again.resolve(62 * SEC, [f], {})[0].method == "infer"  # type: ignore[union-attr]

