"""stream/analytics/collision_harm.py: whether a collision caused congestion, case by case (pure, no servers)."""

from __future__ import annotations

import pytest

from flowtracer.schemas.v1 import analytics_pb2, common_pb2
from flowtracer.stream.analytics.collision_harm import (
    LinkSignals,
    assess,
    cnp_shares,
    cnps_by_nic,
    judge,
    link_signals,
    receiver_cnps,
)

UP, IDLE = "leaf01:Ethernet5>spine01:Ethernet1", "leaf01:Ethernet6>spine02:Ethernet1"
NIC_OF_IP = {"10.0.0.5": "host05:mlx5_0", "10.0.0.16": "host16:mlx5_0", "10.0.0.9": "host09:mlx5_0"}


def _lc(link: str, ecn: int | None = 0, drops: int | None = 0, pauses: int | None = 0,
        other_priorities: int = 0) -> analytics_pb2.LinkCongestion:
    """A LinkCongestion; None = that group not trusted. ``other_priorities`` adds marks/pauses of other classes."""
    return analytics_pb2.LinkCongestion(
        link=link, ecn_valid=ecn is not None, ecn_marked_pkts_roce=ecn or 0,
        ecn_marked_pkts=(ecn or 0) + other_priorities, drops_valid=drops is not None, dropped_pkts_roce=drops or 0,
        dropped_pkts=(drops or 0) + other_priorities, pfc_valid=pauses is not None,
        pfc_pauses_received_roce=pauses or 0, pfc_pauses_received=(pauses or 0) + other_priorities)


CLEAN = LinkSignals(known=True)
UNKNOWN = LinkSignals()


@pytest.mark.parametrize(("member", "idle", "cnps", "harmful", "basis"), [
    # switch evidence
    (LinkSignals(ecn=886, known=True), CLEAN, None, True, "switch"),
    (LinkSignals(drops=12, known=True), CLEAN, 0, True, "switch"),  # a lossy priority drops instead of marking
    (LinkSignals(pauses=40, known=True), CLEAN, None, True, "switch"),  # paused by its receiver
    (LinkSignals(ecn=886, known=True), LinkSignals(ecn=5, known=True), 797, False, "switch"),  # whole group congested
    (CLEAN, CLEAN, 797, False, "switch"),  # CNPs from elsewhere on the paths: the member itself is clean
    (CLEAN, UNKNOWN, None, False, "switch"),  # a clean member is harmless whatever the sibling
    (LinkSignals(ecn=886, known=True), UNKNOWN, 797, False, ""),  # the sibling cannot be said clean: unknown
    # NIC evidence, only without switch evidence for the member
    (UNKNOWN, UNKNOWN, 797, True, "nic"),
    (UNKNOWN, CLEAN, 0, False, "nic"),
    (UNKNOWN, UNKNOWN, None, False, ""),
])
def test_the_rule(member: LinkSignals, idle: LinkSignals, cnps: int | None, harmful: bool, basis: str) -> None:
    h = judge(member, idle, cnps)
    assert (h.harmful, h.basis) == (harmful, basis)


@pytest.mark.parametrize(("lc", "signals"), [
    (None, UNKNOWN),
    (_lc(UP, ecn=None, drops=None, pauses=None), UNKNOWN),
    (_lc(UP, ecn=7, drops=None, pauses=None), LinkSignals(ecn=7, known=True)),
    (_lc(UP, ecn=None, drops=None, pauses=3), LinkSignals(pauses=3, known=True)),
    (_lc(UP), CLEAN),
    # other traffic classes' marks, drops and pauses say nothing about RoCE flows
    (_lc(UP, other_priorities=50), CLEAN),
])
def test_link_signals_read_the_roce_priority_of_trusted_groups(lc: analytics_pb2.LinkCongestion | None,
                                                               signals: LinkSignals) -> None:
    assert link_signals(lc) == signals
    assert link_signals(lc).congested == (signals.ecn + signals.drops + signals.pauses > 0)


def _flow(dst_ip: str) -> common_pb2.FlowRef:
    return common_pb2.FlowRef(key=common_pb2.FlowKey(src_ip="10.0.0.1", dst_ip=dst_ip, udp_src_port=50000))


def test_receiver_cnps_count_each_receiving_nic_once() -> None:
    flows = [_flow("10.0.0.5"), _flow("10.0.0.5"), _flow("10.0.0.16")]
    assert receiver_cnps(flows, {"host05:mlx5_0": 797, "host16:mlx5_0": 265, "host09:mlx5_0": 1}, NIC_OF_IP) == 1062
    assert receiver_cnps(flows, {"host16:mlx5_0": 0}, NIC_OF_IP) == 0  # one reported, none sent
    assert receiver_cnps(flows, {"host09:mlx5_0": 5}, NIC_OF_IP) is None  # no receiver reported
    assert receiver_cnps([_flow("192.0.2.1")], {"host05:mlx5_0": 5}, NIC_OF_IP) is None  # unknown receiver


def test_cnps_by_nic_sums_ports_and_drops_a_nic_with_an_untrusted_port() -> None:
    s = analytics_pb2.NicCongestionSample
    samples = [s(nic="host05:mlx5_0", port=1, cnp_sent=700, cnp_valid=True),
               s(nic="host05:mlx5_0", port=2, cnp_sent=97, cnp_valid=True),
               s(nic="host16:mlx5_0", port=1, cnp_sent=0, cnp_valid=True),
               s(nic="host09:mlx5_0", port=1, cnp_sent=3, cnp_valid=True),
               s(nic="host09:mlx5_0", port=2, cnp_valid=False)]
    assert cnps_by_nic(samples) == {"host05:mlx5_0": 797, "host16:mlx5_0": 0}


def test_assess_writes_the_verdict_and_its_evidence_into_the_collision() -> None:
    c = analytics_pb2.Collision(link=UP, idle_link=IDLE, flows=[_flow("10.0.0.5"), _flow("10.0.0.16")])
    congestion = {UP: _lc(UP, ecn=886, pauses=2), IDLE: _lc(IDLE)}
    h = assess(c, congestion, {"host05:mlx5_0": 797, "host16:mlx5_0": 265}, NIC_OF_IP)
    assert h.harmful and c.harmful and c.harm_basis == "switch"
    assert (c.link_ecn_marked_pkts, c.link_dropped_pkts, c.link_pfc_pauses) == (886, 0, 2)
    assert (c.idle_ecn_marked_pkts, c.idle_dropped_pkts, c.idle_pfc_pauses, c.receiver_cnps) == (0, 0, 0, 1062)
    unknown = analytics_pb2.Collision(link=UP, idle_link=IDLE, flows=[_flow("10.0.0.5")])
    assess(unknown, {}, {}, NIC_OF_IP)
    assert (unknown.harmful, unknown.harm_basis, unknown.receiver_cnps) == (False, "", 0)


def test_cnp_shares_split_each_receivers_cnps_by_bytes_on_congested_links() -> None:
    a, b, c = _flow("10.0.0.5"), _flow("10.0.0.5"), _flow("10.0.0.16")
    a.bytes, b.bytes, c.bytes = 300, 100, 200
    quiet = _flow("10.0.0.9")
    quiet.bytes = 500
    cnp_shares({UP: [a, b, c], "other": [quiet]}, {"host05:mlx5_0": 800, "host16:mlx5_0": 266, "host09:mlx5_0": 0},
               NIC_OF_IP)
    assert (a.cnp_share, b.cnp_share, c.cnp_share, quiet.cnp_share) == (600.0, 200.0, 266.0, 0.0)
    unknown = _flow("10.0.0.5")
    cnp_shares({UP: [unknown]}, {}, NIC_OF_IP)  # the receiver reported no CNP count
    assert unknown.cnp_share == 0.0
