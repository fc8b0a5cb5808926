"""ECMP groups from the streamed AFT state, the topology fallback, and drift between them (table-driven, pure)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import parse_topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2, common_pb2, counters_pb2
from flowtracer.stream.analytics.aft_groups import (
    GROUP_SOURCE_AFT,
    GROUP_SOURCE_TOPOLOGY,
    aft_forwarding,
    read_aft,
    switch_groups,
    topology_groups,
)
from flowtracer.stream.analytics.group_drift import Drift, drift_change, drift_records, group_drift
from flowtracer.stream.analytics.link_index import LinkIndex

SEC = 1_000_000_000
TOPO = generate(FabricSpec(hosts=8, leaves=2, spines=4))
FABRIC = Fabric(TOPO)
LINKS = LinkIndex(FABRIC)
GROUP = next(g for g in FABRIC.ecmp_groups.values() if g.switch == "leaf01")  # 4 uplinks, one per spine
PORTS = [m.src_port for m in GROUP.members]
TOPO_GROUPS = topology_groups(FABRIC, ["leaf01"])["leaf01"]
OK = common_pb2.DELTA_STATUS_OK

W = analytics_pb2
WITHDRAWN, ADDED, WEIGHT = W.DRIFT_KIND_MEMBER_WITHDRAWN, W.DRIFT_KIND_MEMBER_ADDED, W.DRIFT_KIND_WEIGHT_CHANGED
MISSING, NEW_GROUP = W.DRIFT_KIND_GROUP_MISSING, W.DRIFT_KIND_GROUP_ADDED


def nh(port: str, groups: Sequence[tuple[str, int]], octets: int = 1000,
       status: int = OK, legacy: bool = False) -> counters_pb2.NextHopCounters:
    """A next hop out of ``port`` in ``groups`` ((AFT id, weight)...); ``legacy``: no group_weights (older collector)."""
    out = counters_pb2.NextHopCounters(
        group=",".join(g for g, _ in groups), egress_interface=port, next_hop_ip="10.1.0.1",
        weight=groups[0][1] if groups else 1, interval_ns=SEC,
        octets_forwarded=common_pb2.Counter(value=octets, delta=octets, status=status))
    if not legacy:
        out.group_weights.extend(w for _, w in groups)
    return out


def batch(*next_hops: counters_pb2.NextHopCounters) -> counters_pb2.CounterBatch:
    return counters_pb2.CounterBatch(schema_version=1, switch="leaf01", timestamp_ns=5 * SEC,
                                     next_hops=list(next_hops))


def groups_of(b: counters_pb2.CounterBatch) -> list[tuple[str, tuple[str, ...], tuple[int, ...], str]]:
    view = read_aft(b, LINKS, SEC)
    return [(wg.group.id, tuple(m.src_port for m in wg.group.members), wg.weights, wg.source)
            for wg in switch_groups(view, TOPO_GROUPS, LINKS)]


P0, P1, P2, P3 = PORTS
ALL = tuple(PORTS)

# Each case: the batch's next hops as (port, [(AFT group id, weight)]) -> (member ports, weights, source) of the one
# group the processor uses, and the drift (kind, port, topology weight, network weight).
CASES: dict[str, tuple[list[tuple[str, list[tuple[str, int]]]], tuple[tuple[str, ...], tuple[int, ...], str],
                       list[tuple[int, str, int, int]]]] = {
    "AFT agrees with the topology": (
        [(p, [("7", 1)]) for p in PORTS], (ALL, (1, 1, 1, 1), GROUP_SOURCE_AFT), []),
    "a next hop withdrawn (still counted, in no group)": (
        [(P0, [("7", 1)]), (P1, []), (P2, [("7", 1)]), (P3, [("7", 1)])],
        ((P0, P2, P3), (1, 1, 1), GROUP_SOURCE_AFT), [(WITHDRAWN, P1, 1, 0)]),
    "a next hop gone from the AFT altogether": (
        [(P0, [("7", 1)]), (P2, [("7", 1)]), (P3, [("7", 1)])],
        ((P0, P2, P3), (1, 1, 1), GROUP_SOURCE_AFT), [(WITHDRAWN, P1, 1, 0)]),
    "a weight changed": (
        [(P0, [("7", 2)]), (P1, [("7", 1)]), (P2, [("7", 1)]), (P3, [("7", 1)])],
        (ALL, (2, 1, 1, 1), GROUP_SOURCE_AFT), [(WEIGHT, P0, 1, 2)]),
    "per-prefix copies of one group are one group": (
        [(p, [("7", 1), ("8", 1)]) for p in PORTS], (ALL, (1, 1, 1, 1), GROUP_SOURCE_AFT), []),
    "an older collector: first group's weight for every group": (
        [(p, [("7", 3)]) for p in PORTS[:2]] + [(p, [("7", 3)]) for p in PORTS[2:]],
        (ALL, (3, 3, 3, 3), GROUP_SOURCE_AFT), [(WEIGHT, p, 1, 3) for p in PORTS]),
    "a member on a port the topology has no switch link on": (
        [(p, [("7", 1)]) for p in PORTS] + [("Ethernet99", [("7", 1)])],
        (ALL, (1, 1, 1, 1), GROUP_SOURCE_AFT), [(ADDED, "Ethernet99", 0, 1)]),
    "next hops in no group: the switch streams no group state, keep the topology's": (
        [(p, []) for p in PORTS], (ALL, (1, 1, 1, 1), GROUP_SOURCE_TOPOLOGY), []),
}


@pytest.mark.parametrize("name", list(CASES))
def test_groups_and_drift_from_the_aft(name: str) -> None:
    hops, (ports, weights, source), drifts = CASES[name]
    legacy = name.startswith("an older collector")
    b = batch(*(nh(p, g, legacy=legacy) for p, g in hops))
    (gid, got_ports, got_weights, got_source), = groups_of(b)
    assert (got_ports, got_weights, got_source) == (ports, weights, source)
    neighbors = "|".join(FABRIC.links[LINKS.out_link[("leaf01", p)]].dst_node for p in ports)
    assert gid == f"leaf01:{neighbors}"  # the topology's naming rule: an unchanged group keeps its id
    view = read_aft(b, LINKS, SEC)
    assert view is not None
    got = group_drift(view, TOPO_GROUPS, LINKS)
    assert [(d.kind, d.port, d.topology_weight, d.network_weight) for d in got] == sorted(drifts)
    assert all(d.group == GROUP.id for d in got)
    assert all(d.link == LINKS.out_link.get(("leaf01", d.port), "") for d in got)


def test_a_switch_without_aft_keeps_the_topology_groups_and_is_not_compared() -> None:
    assert read_aft(batch(), LINKS, SEC) is None
    assert switch_groups(None, TOPO_GROUPS, LINKS) == TOPO_GROUPS
    assert all(wg.source == GROUP_SOURCE_TOPOLOGY and wg.weights == (1, 1, 1, 1) for wg in TOPO_GROUPS)


def test_members_withdrawn_down_to_none() -> None:
    b = batch(nh(P0, []), nh(P1, []), nh(P2, [("9", 1)]), nh(P3, [("9", 1)]))
    view = read_aft(b, LINKS, SEC)
    assert view is not None
    # P2 and P3 still form a group: the best match of the topology group, which lost P0 and P1.
    assert [(d.kind, d.port) for d in group_drift(view, TOPO_GROUPS, LINKS)] == [(WITHDRAWN, P0), (WITHDRAWN, P1)]
    empty = read_aft(batch(nh(P0, [("x", 1)]), nh(P1, [("y", 1)])), LINKS, SEC)
    assert empty is not None and len(empty.groups) == 2
    kinds = [(d.kind, d.port) for d in group_drift(empty, TOPO_GROUPS, LINKS)]
    # The topology group matches the first AFT group (P0); P1's one-member group is no new group (one member).
    assert kinds == [(WITHDRAWN, P1), (WITHDRAWN, P2), (WITHDRAWN, P3)]
    # What is left of a topology group stays a group, even of one member: its shrinking is the news.
    assert [(ports, src) for _, ports, _, src in groups_of(batch(nh(P0, [("x", 1)]), nh(P1, [("y", 1)])))] == [
        ((P0,), GROUP_SOURCE_AFT)]
    # No AFT group shares a port with the topology's: it is missing, and the AFT's group is new.
    gone = read_aft(batch(*(nh(p, []) for p in PORTS), nh("Ethernet98", [("z", 1)]), nh("Ethernet99", [("z", 1)])),
                    LINKS, SEC)
    assert gone is not None
    assert sorted(d.kind for d in group_drift(gone, TOPO_GROUPS, LINKS)) == [MISSING, NEW_GROUP]
    assert switch_groups(gone, TOPO_GROUPS, LINKS) == []  # nothing of it is a link the topology knows


def test_a_group_the_topology_does_not_have() -> None:
    # Two AFT groups: the topology's, and one over two of its ports with other weights (another destination).
    b = batch(*(nh(p, [("7", 1)]) for p in (P0, P1)), *(nh(p, [("7", 1), ("8", 2)]) for p in (P2, P3)))
    view = read_aft(b, LINKS, SEC)
    assert view is not None
    drifts = group_drift(view, TOPO_GROUPS, LINKS)
    assert [d.kind for d in drifts] == [NEW_GROUP]
    assert drifts[0].group.startswith("leaf01:") and not drifts[0].port


def test_topology_weights_come_from_its_ecmp_groups() -> None:
    text = TOPO.to_yaml() + (f"ecmp_groups:\n  - switch: leaf01\n    destinations: [leaf02]\n"
                             f"    members: {{{P0}: 2, {P1}: 1, {P2}: 1, {P3}: 1}}\n")
    fabric = Fabric(parse_topology(text, "weighted.yaml"))
    (wg,) = topology_groups(fabric, ["leaf01"])["leaf01"]
    assert wg.weights == (2, 1, 1, 1) and wg.source == GROUP_SOURCE_TOPOLOGY
    view = read_aft(batch(*(nh(p, [("7", 1)]) for p in PORTS)), LINKS, SEC)
    assert view is not None
    assert [(d.kind, d.port) for d in group_drift(view, [wg], LinkIndex(fabric))] == [(WEIGHT, P0)]


def test_next_hop_loads_only_where_trusted_over_one_hop() -> None:
    b = batch(nh(P0, [("7", 1)], 100), nh(P1, [("7", 1)], 200, status=common_pb2.DELTA_STATUS_BASELINE),
              nh(P2, [("7", 1)], 300), nh(P3, [("7", 1)], 400))
    b.next_hops[3].interval_ns = 3 * SEC  # a gap: not one window's
    view = read_aft(b, LINKS, SEC)
    assert view is not None
    assert dict(view.nh_bytes) == {LINKS.out_link[("leaf01", P0)]: 100, LINKS.out_link[("leaf01", P2)]: 300}


def test_drift_records_and_the_log_line_once_per_change() -> None:
    a = (Drift("leaf01", GROUP.id, WITHDRAWN, P1, "l1", 1, 0),)
    b = (*a, Drift("leaf01", GROUP.id, WEIGHT, P0, "l0", 1, 2))
    assert drift_change("leaf01", (), ()) is None
    first = drift_change("leaf01", (), a)
    assert first is not None and "withdrawn" in first and P1 in first
    assert drift_change("leaf01", a, a) is None  # unchanged: no line
    more = drift_change("leaf01", a, b)
    assert more is not None and "weight changed" in more and P1 not in more
    back = drift_change("leaf01", b, ())
    assert back is not None and "agrees again" in back
    (rec, _) = drift_records(b, 4 * SEC, 5 * SEC)
    assert (rec.switch, rec.kind, rec.port, rec.link, rec.window_end_ns) == ("leaf01", WITHDRAWN, P1, "l1", 5 * SEC)


L0, L1, L2, L3 = (m.id for m in GROUP.members)


@pytest.mark.parametrize(("groups", "withdrawn", "weights"), [
    ([dict.fromkeys(PORTS, 1)], set(), {}),  # as the topology says: hash as it does
    ([{P0: 1, P2: 1, P3: 1}], {L1}, {}),
    ([{P0: 2, P1: 1, P2: 1, P3: 1}], set(), {L0: 2}),
    ([{P0: 2, P1: 1}, {P0: 1, P1: 1, P2: 1}], {L3}, {L0: 2}),  # per-prefix groups: the first weight, union of ports
    ([{"Ethernet99": 1}], {L0, L1, L2, L3}, {}),  # a port the topology does not know routes nothing
])
def test_the_forwarding_the_aft_gives_a_switch(groups: list[dict[str, int]], withdrawn: set[str],
                                               weights: dict[str, int]) -> None:
    fwd = aft_forwarding("leaf01", groups, FABRIC)
    assert (set(fwd.withdrawn), dict(fwd.weights)) == (withdrawn, weights)
