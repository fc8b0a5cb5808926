"""The links stage follows the switches' AFT: groups, weights and member loads from the next hops, drift reported."""

from __future__ import annotations

import logging

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2, common_pb2, counters_pb2, internal_pb2
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.links import LinksStage

S = 1_000_000_000
GB = 1_000_000_000
FABRIC = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2)))
LINKS = LinkIndex(FABRIC)
UP1, UP2 = "leaf01:Ethernet3>spine01:Ethernet1", "leaf01:Ethernet4>spine02:Ethernet1"
MEASURED = analytics_pb2.LOAD_BASIS_MEASURED


def _counter(delta: int) -> common_pb2.Counter:
    return common_pb2.Counter(value=delta, delta=delta, status=common_pb2.DELTA_STATUS_OK)


def _window(stage: LinksStage, k: int, next_hops: dict[str, tuple[str, int, int]] | None) -> Emitted:
    """Window ``k``: every switch reports; leaf01's uplinks carry 5 GB each on the wire (out-octets) and, when
    ``next_hops`` is given (port -> (AFT group, weight, bytes forwarded)), leaf01 streams those next hops."""
    for sw in sorted(FABRIC.switch_names):
        cb = counters_pb2.CounterBatch(schema_version=1, switch=sw, timestamp_ns=k * S, sequence=k)
        for port in sorted({lk.src_port for lk in FABRIC.out_links[sw]}):
            cb.interfaces.append(counters_pb2.InterfaceCounters(
                name=port, interval_ns=S, out_octets=_counter(5 * GB), in_octets=_counter(0)))
        if sw == "leaf01" and next_hops is not None:
            for port, (group, weight, nbytes) in next_hops.items():
                cb.next_hops.append(counters_pb2.NextHopCounters(
                    group=group, egress_interface=port, weight=weight, group_weights=[weight] if group else [],
                    interval_ns=S, octets_forwarded=_counter(nbytes)))
        stage.add_counters(cb, f"c{k}", now_ns=k * S)
    for q in range(2):
        stage.add_attributions(internal_pb2.AttributionBatch(schema_version=1, window_end_ns=k * S,
                                                             source_partition=q), f"a{k}", now_ns=k * S)
    return stage.finalize(now_ns=k * S)


def _leaf01(e: Emitted) -> analytics_pb2.FimSample:
    (f,) = [f for f in e.fims if f.switch == "leaf01" and f.basis == MEASURED]
    return f


def test_groups_weights_and_loads_follow_the_aft_within_the_window(caplog: pytest.LogCaptureFixture) -> None:
    stage = LinksStage(0, 1, FABRIC, LINKS, S, 5 * S, rolling_hops=1)

    topo = _leaf01(_window(stage, 1, None))  # no AFT streamed: the topology's group, measured on the interfaces
    assert (topo.group, topo.group_source, topo.load_source) == ("leaf01:spine01|spine02", "topology",
                                                                  "interface_counters")
    assert list(topo.member_weights) == [1, 1] and topo.fim == 0.0

    weighted = {"Ethernet3": ("7", 2, 2 * GB), "Ethernet4": ("7", 1, GB)}
    w = _window(stage, 2, weighted)
    f = _leaf01(w)
    assert (f.group, f.group_source, f.load_source) == ("leaf01:spine01|spine02", "aft", "next_hop_counters")
    assert list(f.member_weights) == [2, 1] and list(f.member_bytes) == [2 * GB, GB]
    assert f.fim == 0.0, "2:1 weighted carrying 2:1 is balanced"
    assert [(d.kind, d.port, d.topology_weight, d.network_weight) for d in w.ecmp_drift] == [
        (analytics_pb2.DRIFT_KIND_WEIGHT_CHANGED, "Ethernet3", 1, 2)]

    even = _leaf01(_window(stage, 3, {"Ethernet3": ("7", 2, GB), "Ethernet4": ("7", 1, GB)}))
    assert even.fim == pytest.approx(0.25), "the same group carrying 1:1 is not"

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="flowtracer.stream.stages.links"):
        withdrawn = {"Ethernet3": ("7", 1, GB), "Ethernet4": ("", 1, 0)}
        e4 = _window(stage, 4, withdrawn)
        e5 = _window(stage, 5, withdrawn)
    g4 = _leaf01(e4)
    assert (g4.group, list(g4.member_links), g4.members) == ("leaf01:spine01", [UP1], 1)
    for e in (e4, e5):  # a measurement every window while it lasts ...
        assert [(d.switch, d.group, d.kind, d.link, d.port) for d in e.ecmp_drift] == [
            ("leaf01", "leaf01:spine01|spine02", analytics_pb2.DRIFT_KIND_MEMBER_WITHDRAWN, UP2, "Ethernet4")]
    lines = [r.getMessage() for r in caplog.records if "ECMP drift" in r.getMessage()]
    assert len(lines) == 1 and "Ethernet4 member withdrawn" in lines[0]  # ... and one log line per change

    back = _window(stage, 6, {"Ethernet3": ("7", 1, GB), "Ethernet4": ("7", 1, GB)})
    assert _leaf01(back).group == "leaf01:spine01|spine02" and not back.ecmp_drift
    assert "agrees again on: leaf01:spine01|spine02: Ethernet4 member withdrawn" in caplog.records[-1].getMessage()


def test_a_window_without_next_hops_keeps_the_aft_groups_for_a_rolling_window(caplog: pytest.LogCaptureFixture) -> None:
    stage = LinksStage(0, 1, FABRIC, LINKS, S, 5 * S, rolling_hops=3)
    withdrawn = {"Ethernet3": ("7", 1, GB), "Ethernet4": ("", 1, 0)}
    assert _leaf01(_window(stage, 1, withdrawn)).group == "leaf01:spine01"
    caplog.clear()  # the drift's own line
    with caplog.at_level(logging.WARNING, logger="flowtracer.stream.stages.links"):
        # Batches without next hops (the next-hop part of an instant came late, on its own): no news about the AFT.
        kept = [_window(stage, k, None) for k in (2, 3, 4)]
        assert [_leaf01(e).group for e in kept] == ["leaf01:spine01"] * 3
        assert all(len(e.ecmp_drift) == 1 for e in kept)
        assert not [r for r in caplog.records if "ECMP" in r.getMessage()]
        gone = _window(stage, 5, None)  # a rolling window without any: the switch no longer streams its AFT
    f = _leaf01(gone)
    assert (f.group, f.group_source, f.load_source) == ("leaf01:spine01|spine02", "topology", "interface_counters")
    assert not gone.ecmp_drift
    assert [r.getMessage() for r in caplog.records] == [
        "ECMP groups of leaf01: no AFT next hops for 3 windows, back to the topology's groups"]


def test_a_group_of_one_member_stays_out_of_the_fabric_fim() -> None:
    from flowtracer.stream.stages.fabric import FabricStage

    def sample(group: str, members: int, fim: float) -> analytics_pb2.FimSample:
        return analytics_pb2.FimSample(schema_version=1, window_end_ns=S, group=group, switch=group.split(":")[0],
                                       basis=MEASURED, members=members, fim=fim, total_bytes=GB)

    c = FabricStage(S, 5 * S, rolling_hops=1)
    c.add(internal_pb2.GroupFimBatch(schema_version=1, window_end_ns=S, groups=[
        sample("leaf01:spine02", 1, 0.0), sample("leaf02:spine01|spine02", 2, 0.5)]), "g", now_ns=S)
    (fabric,) = c.finalize(now_ns=100 * S).fims
    assert (fabric.group, fabric.fim, fabric.members) == ("fabric", 0.5, 1)  # not diluted to 0.25


def test_each_switch_s_groups_go_out_once_after_a_start_and_again_when_they_change() -> None:
    """The ecmp-groups topic (what the tracing agents follow): every owned switch once, then only a switch whose
    members or weights changed, in the window that shows it; the AFT agreeing with the topology is no change."""
    stage = LinksStage(0, 1, FABRIC, LINKS, S, 5 * S, rolling_hops=1)
    first = _window(stage, 1, None)
    assert sorted(g.switch for g in first.ecmp_groups) == sorted(FABRIC.switch_names)
    (leaf01,) = [g for g in first.ecmp_groups if g.switch == "leaf01"]
    assert (leaf01.group_source, leaf01.window_end_ns) == ("topology", S)
    assert [(g.group, list(g.links), list(g.weights)) for g in leaf01.groups] == [
        ("leaf01:spine01|spine02", [UP1, UP2], [1, 1])]
    same = {"Ethernet3": ("7", 1, GB), "Ethernet4": ("7", 1, GB)}
    assert not _window(stage, 2, same).ecmp_groups  # the AFT says what the topology said
    withdrawn = _window(stage, 3, {"Ethernet3": ("7", 1, GB), "Ethernet4": ("", 1, 0)})
    assert [(g.switch, g.group_source, [(x.group, list(x.links)) for x in g.groups], g.window_end_ns)
            for g in withdrawn.ecmp_groups] == [("leaf01", "aft", [("leaf01:spine01", [UP1])], 3 * S)]
    assert not _window(stage, 4, {"Ethernet3": ("7", 1, GB), "Ethernet4": ("", 1, 0)}).ecmp_groups
    back = _window(stage, 5, same)
    assert [(g.switch, [list(x.weights) for x in g.groups]) for g in back.ecmp_groups] == [("leaf01", [[1, 1]])]
    weighted = _window(stage, 6, {"Ethernet3": ("7", 2, GB), "Ethernet4": ("7", 1, GB)})
    assert [[list(x.weights) for x in g.groups] for g in weighted.ecmp_groups] == [[[2, 1]]]


def test_live_groups_and_drift_are_those_of_the_plain_rules_window_after_window() -> None:
    """The stage works a switch's groups out again only when its AFT groups change (``LinksStage._groups``): over
    the same, withdrawn, back, weighted and back again, they must be what ``switch_groups`` and ``group_drift``
    give for each window's view."""
    from flowtracer.stream.analytics.aft_groups import read_aft, switch_groups
    from flowtracer.stream.analytics.group_drift import drift_records, group_drift

    stage = LinksStage(0, 1, FABRIC, LINKS, S, 5 * S, rolling_hops=1)
    same = {"Ethernet3": ("7", 1, GB), "Ethernet4": ("7", 1, GB)}
    withdrawn = {"Ethernet3": ("7", 1, GB), "Ethernet4": ("", 1, 0)}
    weighted = {"Ethernet3": ("7", 2, GB), "Ethernet4": ("7", 1, GB)}
    topo = stage.topology_groups["leaf01"]
    drifted = []
    for k, hops in enumerate([same, withdrawn, withdrawn, same, weighted, weighted, same], start=1):
        cb = counters_pb2.CounterBatch(switch="leaf01", timestamp_ns=k * S)
        for port, (group, weight, nbytes) in hops.items():
            cb.next_hops.append(counters_pb2.NextHopCounters(
                group=group, egress_interface=port, weight=weight, group_weights=[weight] if group else [],
                interval_ns=S, octets_forwarded=_counter(nbytes)))
        view = read_aft(cb, LINKS, S)
        e = _window(stage, k, hops)
        assert stage.live_groups["leaf01"] == switch_groups(view, topo, LINKS), k
        expected = drift_records(group_drift(view, topo, LINKS), (k - 1) * S, k * S)
        assert [d for d in e.ecmp_drift if d.switch == "leaf01"] == expected, k
        drifted.append(bool(expected))
    assert drifted == [False, True, True, False, True, True, False]  # the AFT's changes are drift while they last
