"""Causes before symptoms, without servers: a PFC pause storm is one incident with its origin on top, the paused links
and the hosts whose traffic stopped as its consequences; a host that sends nothing is no missing agent."""

from __future__ import annotations

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.diagnosis.incidents import Diagnoser, Incident, State
from flowtracer.stream.diagnosis.localize import IncidentKind
from flowtracer.stream.diagnosis.symptoms import Kind
from flowtracer.stream.diagnosis.window import CauseObs, CongestionObs, FabricModel, LinkObs, PathObs, WindowView

S = 1_000_000_000
T0 = 1_800_000_000 * S
GB = 10**9
MODEL = FabricModel(Fabric(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="t"))))
NIC = "host13:mlx5_0"
# host05 (leaf02) sends to host13 (leaf04) over spine01: the storm's tree from the stalled NIC back to the sender
TREE = ("leaf04:Ethernet1>host13:mlx5_0", "spine01:Ethernet4>leaf04:Ethernet5", "leaf02:Ethernet5>spine01:Ethernet2",
        "host05:mlx5_0>leaf02:Ethernet1")
RING = [("host05", "host13", TREE[::-1]), ("host13", "host01", ("host13:mlx5_0>leaf04:Ethernet1",
                                                                 "leaf04:Ethernet5>spine01:Ethernet4",
                                                                 "spine01:Ethernet1>leaf01:Ethernet5",
                                                                 "leaf01:Ethernet1>host01:mlx5_0")),
        ("host01", "host05", ("host01:mlx5_0>leaf01:Ethernet1", "leaf01:Ethernet6>spine02:Ethernet1",
                              "spine02:Ethernet2>leaf02:Ethernet6", "leaf02:Ethernet1>host05:mlx5_0"))]
PAUSED = CongestionObs(queue_watermark_bytes=3_000_000, pauses_received=23_842)


def _view(k: int, stalled: bool, agents: bool = True) -> WindowView:
    """Window k of a 3-host ring (one job); ``stalled``: host13's NIC stopped draining, the tree is paused and the
    ring hung; ``agents``: every agent reports (a NIC sample each)."""
    v = WindowView(T0 + k * S, S)
    used = {lk for _, _, links in RING for lk in links}
    for lk, dl in MODEL.fabric.links.items():
        b = 0 if stalled else (40 * GB if lk in used else 0)
        v.links[lk] = LinkObs(lk, dl.src_node, dl.dst_node, dl.speed_bps, b, oper_up=True)
    if stalled:
        for i, lk in enumerate(TREE):
            v.congestion[lk] = PAUSED
            v.causes[lk] = CauseObs("pause_spread", NIC, TREE[i::-1])
    else:
        v.paths = [PathObs(f"{s}:mlx5_0", f"{d}:mlx5_0", s, d, links, 40 * GB, ("ring",)) for s, d, links in RING]
        v.collectives = {"ring": {"ring/0xa/AllReduce"}}
    if agents:
        v.agents_reporting = {"host01", "host05", "host13"}
    return v


def _run(views: list[WindowView]) -> tuple[Diagnoser, list[Incident]]:
    d = Diagnoser(MODEL)
    seen: dict[str, Incident] = {}
    for v in views:
        for inc in d.window(v):
            seen[inc.id] = inc
    return d, list(seen.values())


def test_a_stalled_nic_is_one_pause_storm_with_the_nic_on_top_and_its_consequences_attached() -> None:
    d, incidents = _run([_view(k, stalled=k >= 6) for k in range(1, 12)])
    assert [(i.kind, i.top) for i in incidents] == [(IncidentKind.PAUSE_STORM, f"nic:{NIC}")]
    [inc] = incidents
    assert inc.state is State.OPEN and inc.detected_ns == T0 + 7 * S  # 2 of 3 windows
    assert inc.ranked()[1][0] == "cable:host13:mlx5_0~leaf04:Ethernet1"
    assert inc.paused_links == set(TREE)
    assert inc.stopped_hosts == {"host01", "host05", "host13"} and inc.jobs == {"ring"}
    assert inc.collectives == {"ring/0xa/AllReduce"}  # the last ones the hung job ran
    # no degraded cable, no dead link, no missing agent among the window's symptoms
    assert {s.kind for s in d.last_symptoms} == {Kind.PAUSED, Kind.TRAFFIC_STOPPED}


def test_a_host_that_sends_nothing_is_no_missing_agent_even_without_nic_samples() -> None:
    """The job stops (no pause): the agents send no NIC samples here, but the switches count nothing on the hosts'
    uplinks either, so the hosts stopped sending; their agents are not missing."""
    views = [_view(k, stalled=False, agents=False) for k in range(1, 6)]
    for k in range(6, 12):
        v = _view(k, stalled=False, agents=False)
        v.paths, v.links = [], {lk: LinkObs(lk, o.src_node, o.dst_node, o.speed_bps, 0, oper_up=True)
                                for lk, o in v.links.items()}
        views.append(v)
    d, incidents = _run(views)
    assert incidents == [] and {s.kind for s in d.last_symptoms} == {Kind.TRAFFIC_STOPPED}


def test_an_agent_that_stops_reporting_while_its_nic_sends_is_missing() -> None:
    views = [_view(k, stalled=False, agents=False) for k in range(1, 6)]
    for k in range(6, 10):
        v = _view(k, stalled=False, agents=False)
        v.paths = [p for p in v.paths if p.src_host != "host01"]  # the switches still count host01's bytes
        views.append(v)
    _, incidents = _run(views)
    assert [(i.kind, i.top) for i in incidents] == [(IncidentKind.AGENT_MISSING, "agent:host01")]
