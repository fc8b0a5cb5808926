"""Congestion causes (stream/analytics/congestion_cause.py), table-driven without servers.

Each case is one window's congested links as the counters partitions report them (signals and local evidence) and
the cause each link must get, with its origin, spread chain or sibling. The link names follow the 16-host demo
fabric (leafNN:Ethernet1..4 to hosts, Ethernet5/6 to spine01/02; spineNN:EthernetN to leafNN).
"""

from __future__ import annotations

from typing import Any

import pytest

from flowtracer.schemas.v1 import analytics_pb2, internal_pb2
from flowtracer.stream.analytics.attribution import Attribution, link_ends
from flowtracer.stream.analytics.congestion_cause import CAUSES, UNKNOWN, congested_link, congestion_causes

START, END = 9_000_000_000, 10_000_000_000


def lc(link: str, pauses: int = 0, ecn: int = 0, drops: int = 0, valid: bool = True) -> analytics_pb2.LinkCongestion:
    src, dst = link.split(">")
    (sn, sp), (dn, dp) = src.split(":"), dst.split(":")
    return analytics_pb2.LinkCongestion(
        schema_version=1, window_start_ns=START, window_end_ns=END, link=link, src_node=sn, src_port=sp,
        dst_node=dn, dst_port=dp, pfc_pauses_received=pauses, pfc_pauses_received_roce=pauses, pfc_valid=valid,
        ecn_marked_pkts=ecn, ecn_marked_pkts_roce=ecn, ecn_valid=valid, dropped_pkts=drops, dropped_pkts_roce=drops,
        drops_valid=valid)


def cl(link: str, pauses: int = 0, ecn: int = 0, drops: int = 0, util: float = 1.0, prev: float = 1.0,
       flows: int = 2, sources: int = 0, dst: str = "", sibling: str = "",
       sibling_util: float = UNKNOWN, sibling_congested: bool = False, valid: bool = True) -> internal_pb2.CongestedLink:
    return internal_pb2.CongestedLink(
        congestion=lc(link, pauses, ecn, drops, valid), utilization=util, previous_utilization=prev, flow_count=flows,
        sources=sources, destination=dst, sibling=sibling, sibling_utilization=sibling_util,
        sibling_congested=sibling_congested, to_host=link.split(">")[1].startswith("host"))


UP5, UP6 = "leaf01:Ethernet5>spine01:Ethernet1", "leaf01:Ethernet6>spine02:Ethernet1"
STALL = "leaf02:Ethernet1>host05:mlx5_0"
S1_L2, S2_L2 = "spine01:Ethernet2>leaf02:Ethernet5", "spine02:Ethernet2>leaf02:Ethernet6"
L1_S1, L3_S2 = "leaf01:Ethernet5>spine01:Ethernet1", "leaf03:Ethernet6>spine02:Ethernet3"
H10_L3 = "host10:mlx5_0>leaf03:Ethernet2"
INCAST = "leaf04:Ethernet4>host16:mlx5_0"
S1_L4 = "spine01:Ethernet4>leaf04:Ethernet5"
H13_L4 = "host13:mlx5_0>leaf04:Ethernet1"
PAUSE_TREE = [cl(STALL, pauses=23842, flows=3), cl(S1_L2, pauses=23842), cl(S2_L2, pauses=23842),
              cl(L1_S1, pauses=23842), cl(L3_S2, pauses=23842), cl(H10_L3, pauses=23842)]

# case -> (the window's congested links, {link: expected fields}); links absent from the expectation get none.
CASES: dict[str, tuple[list[internal_pb2.CongestedLink], dict[str, dict[str, Any]]]] = {
    "two flows on one uplink while the sibling idles: collision naming the sibling": (
        [cl(UP5, ecn=770, sibling=UP6, sibling_util=0.0)],
        {UP5: {"cause": "collision", "sibling": UP6, "sibling_utilization": 0.0, "ecn_marked_pkts": 770}}),
    "the sibling is busy too: no collision, unknown": (
        [cl(UP5, ecn=770, sibling=UP6, sibling_util=0.95)], {UP5: {"cause": "unknown"}}),
    "the sibling is congested itself: unknown": (
        [cl(UP5, ecn=770, sibling=UP6, sibling_util=0.5, sibling_congested=True),
         cl(UP6, ecn=10, sibling=UP5, sibling_util=1.0)],
        {UP5: {"cause": "unknown"}, UP6: {"cause": "unknown"}}),
    "one flow cannot collide": ([cl(UP5, ecn=770, flows=1, sibling=UP6, sibling_util=0.0)], {UP5: {"cause": "unknown"}}),
    "a host downlink queueing with six flows: incast on its NIC": (
        [cl(INCAST, ecn=4000, flows=6)],
        {INCAST: {"cause": "incast", "origin": "host16:mlx5_0", "flow_count": 6, "sources": 0}}),
    "a host downlink with one flow is not incast": ([cl(INCAST, ecn=40, flows=1)], {INCAST: {"cause": "unknown"}}),
    "a host downlink whose two flows come from one NIC is not incast": (
        [cl(INCAST, ecn=40, flows=2, sources=1, dst="host16:mlx5_0")], {INCAST: {"cause": "unknown"}}),
    "a spine downlink whose flows converge on one NIC from three: incast": (
        [cl(S1_L4, ecn=300, flows=3, sources=3, dst="host16:mlx5_0")],
        {S1_L4: {"cause": "incast", "origin": "host16:mlx5_0", "sources": 3}}),
    "an uplink whose flows converge on one NIC from two: incast, not collision": (
        [cl(UP5, ecn=500, sources=2, dst="host16:mlx5_0", sibling=UP6, sibling_util=0.0)],
        {UP5: {"cause": "incast", "origin": "host16:mlx5_0", "sources": 2}}),
    "an uplink whose two flows go to two NICs: collision": (
        [cl(UP5, ecn=500, sources=2, sibling=UP6, sibling_util=0.0)], {UP5: {"cause": "collision"}}),
    "a queue at a plateau of 25% of nominal: degraded link": (
        [cl(L3_S2, ecn=900, util=0.25, prev=0.26, sibling="leaf03:Ethernet5>spine01:Ethernet3", sibling_util=0.3)],
        {L3_S2: {"cause": "degraded_link", "utilization": 0.25, "previous_utilization": 0.26}}),
    "traffic starting in the window is no plateau": (
        [cl(UP5, ecn=900, util=0.5, prev=0.0, sibling=UP6, sibling_util=0.0)], {UP5: {"cause": "collision"}}),
    "previous window unmeasured: no plateau": (
        [cl(UP5, ecn=900, util=0.25, prev=UNKNOWN, flows=1)], {UP5: {"cause": "unknown"}}),
    "a queue at nominal speed is not degraded": (
        [cl(UP5, ecn=900, util=1.0, prev=1.0, sibling=UP6, sibling_util=0.1)], {UP5: {"cause": "collision"}}),
    "a pause storm: every paused link names the stalled NIC and its chain down to it": (
        PAUSE_TREE,
        {STALL: {"cause": "pause_spread", "origin": "host05:mlx5_0", "spread_links": [STALL]},
         S1_L2: {"cause": "pause_spread", "origin": "host05:mlx5_0", "spread_links": [S1_L2, STALL]},
         L1_S1: {"cause": "pause_spread", "origin": "host05:mlx5_0", "spread_links": [L1_S1, S1_L2, STALL]},
         H10_L3: {"cause": "pause_spread", "origin": "host05:mlx5_0", "spread_links": [H10_L3, L3_S2, S2_L2, STALL]}}),
    "an incast onset: the paused feeders name the queued port, which is incast": (
        [cl(INCAST, ecn=4000, flows=6), cl(S1_L4, pauses=12, ecn=3), cl(H13_L4, pauses=12)],
        {INCAST: {"cause": "incast"},
         S1_L4: {"cause": "pause_spread", "origin": "leaf04:Ethernet4", "spread_links": [S1_L4, INCAST]},
         H13_L4: {"cause": "pause_spread", "origin": "leaf04:Ethernet4", "spread_links": [H13_L4, INCAST]}}),
    "a branch with a paused and a queued way on: the paused one is followed": (
        [cl(S1_L2, pauses=100), cl(STALL, pauses=100), cl("leaf02:Ethernet2>host06:mlx5_0", ecn=5, flows=3)],
        {S1_L2: {"cause": "pause_spread", "origin": "host05:mlx5_0"}}),
    "a pause with nothing congested downstream: unknown": (
        [cl(S1_L2, pauses=100)], {S1_L2: {"cause": "unknown", "origin": "", "spread_links": []}}),
    "a pause is not followed back over the same cable": (
        [cl(S1_L2, pauses=100), cl("leaf02:Ethernet5>spine01:Ethernet2", ecn=5, flows=3)],
        {S1_L2: {"cause": "unknown"}}),
    "signals that are not valid are not congestion": ([cl(UP5, ecn=770, valid=False)], {}),
}


@pytest.mark.parametrize("name", CASES)
def test_cause(name: str) -> None:
    links, expected = CASES[name]
    out = {c.link: c for c in congestion_causes(links, START, END)}
    assert set(expected) <= set(out), name
    if not expected:
        assert out == {}
    for link, fields in expected.items():
        c = out[link]
        assert c.cause in CAUSES and (c.window_start_ns, c.window_end_ns) == (START, END)
        assert c.evidence  # a person can read why
        for f, v in fields.items():
            got = list(getattr(c, f)) if f == "spread_links" else getattr(c, f)
            assert got == pytest.approx(v) if isinstance(v, float) else got == v, (name, link, f, got)


def test_causes_are_sorted_and_one_per_congested_link() -> None:
    out = congestion_causes(list(reversed(PAUSE_TREE)), START, END)
    assert [c.link for c in out] == sorted(cl_.congestion.link for cl_ in PAUSE_TREE)


def test_congested_link_picks_the_sibling_with_most_room() -> None:
    util = {UP5: 1.0, UP6: 0.4, "leaf01:Ethernet7>spine03:Ethernet1": 0.1}
    out = congested_link(lc(UP5, ecn=5), util, {UP5: 0.9}, 2, 12, "host05:mlx5_0",
                         [UP5, UP6, "leaf01:Ethernet7>spine03:Ethernet1"], {UP5, "leaf01:Ethernet7>spine03:Ethernet1"},
                         to_host=False)
    assert (out.sibling, out.sibling_utilization, out.sibling_congested) == (
        "leaf01:Ethernet7>spine03:Ethernet1", 0.1, True)
    assert (out.utilization, out.previous_utilization, out.flow_count) == (1.0, 0.9, 2)
    assert (out.sources, out.destination) == (12, "host05:mlx5_0")
    unmeasured = congested_link(lc(UP5, ecn=5), {}, {}, 0, 0, "", [UP6], set(), to_host=False)
    assert (unmeasured.sibling, unmeasured.utilization, unmeasured.previous_utilization) == ("", UNKNOWN, UNKNOWN)


def test_link_ends_count_each_links_senders_and_name_its_one_receiver() -> None:
    att = Attribution()
    for i in range(1, 11):  # ten senders to host16 over one spine downlink, host01 twice
        att.path_src_nic.append(f"host{i:02d}:mlx5_0")
        att.path_dst_nic.append("host16:mlx5_0")
        att.path_links.append((f"host{i:02d}:mlx5_0>leaf01:Ethernet1", S1_L4, INCAST))
    att.path_src_nic.append("host01:mlx5_0")
    att.path_dst_nic.append("host15:mlx5_0")
    att.path_links.append(("host01:mlx5_0>leaf01:Ethernet1", S1_L4))
    ends = link_ends(att)
    assert ends[S1_L4] == (10, "") and ends[INCAST] == (10, "host16:mlx5_0")
    assert ends["host03:mlx5_0>leaf01:Ethernet1"] == (1, "host16:mlx5_0")
    assert ends["host01:mlx5_0>leaf01:Ethernet1"] == (1, "")
