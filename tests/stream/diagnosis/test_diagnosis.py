"""The diagnosis without servers: symptoms from hand-built windows, the set cover's pick, and hysteresis."""

from __future__ import annotations

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.diagnosis.incidents import Diagnoser, Hysteresis, State
from flowtracer.stream.diagnosis.localize import IncidentKind
from flowtracer.stream.diagnosis.symptoms import Kind
from flowtracer.stream.diagnosis.window import CongestionObs, FabricModel, LinkObs, PathObs, WindowView, cable_of

S = 1_000_000_000
T0 = 1_800_000_000 * S
MODEL = FabricModel(Fabric(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="t"))))
UP = "leaf03:Ethernet5>spine01:Ethernet3"
DOWN = "spine01:Ethernet3>leaf03:Ethernet5"
GB = 10**9


def _view(k: int, load: dict[str, int | None] | None = None, congestion: dict[str, CongestionObs] | None = None,
          fim: dict[str, float] | None = None, senders: tuple[str, ...] = ("host01", "host09")) -> WindowView:
    """Window k: every switch link carries 10 GB (8 bit/s x 10 GB = 80 Gbit/s on 400G: 20%) unless ``load`` says."""
    view = WindowView(T0 + k * S, S)
    for lk, dl in MODEL.fabric.links.items():
        b = (load or {}).get(lk, 10 * GB)
        view.links[lk] = LinkObs(lk, dl.src_node, dl.dst_node, dl.speed_bps, b)
    view.congestion = congestion or {}
    view.group_fim = fim or {}
    view.paths = [PathObs(f"{h}:mlx5_0", "host13:mlx5_0", h, "host13", (UP,), 10 * GB, (f"job-{h}",)) for h in senders]
    view.paths.append(PathObs("host02:mlx5_0", "host03:mlx5_0", "host02", "host03", (), 10 * GB, ("elsewhere",)))
    return view


def _run(views: list[WindowView]) -> tuple[Diagnoser, list]:
    d = Diagnoser(MODEL)
    seen = {}
    for v in views:
        for inc in d.window(v):
            seen[inc.id] = inc
    return d, list(seen.values())


QUEUED = CongestionObs(ecn_marked_pkts=700, queue_watermark_bytes=1_250_000)


@pytest.mark.parametrize("name, views, kind, top", [
    ("degraded: a queue at 20% of nominal",
     [_view(k) for k in range(1, 6)] + [_view(k, congestion={DOWN: QUEUED}) for k in range(6, 10)],
     IncidentKind.DEGRADED_LINK, cable_of(DOWN)),
    ("failed: both directions go quiet while the fabric moves",
     [_view(k) for k in range(1, 6)] + [_view(k, {UP: 0, DOWN: 0}) for k in range(6, 10)],
     IncidentKind.FAILED_LINK, cable_of(UP)),
    ("switch silent: no trusted delta on any link it measures",
     [_view(k) for k in range(1, 6)]
     + [_view(k, {lk: None for lk, dl in MODEL.fabric.links.items() if dl.src_node == "spine02"})
        for k in range(6, 10)],
     IncidentKind.SWITCH_SILENT, "switch:spine02"),
    ("agent missing: a host's flows stop being reported",
     [_view(k) for k in range(1, 6)] + [_view(k, senders=("host09",)) for k in range(6, 10)],
     IncidentKind.AGENT_MISSING, "agent:host01"),
    ("hot spot: a queue at line rate",
     [_view(k) for k in range(1, 6)] + [_view(k, {DOWN: 50 * GB}, {DOWN: QUEUED}) for k in range(6, 10)],
     IncidentKind.CONGESTION_HOTSPOT, f"port:{DOWN}"),
    ("persistent imbalance: a group's FIM stays high",
     [_view(k, fim={"leaf01:spine01|spine02": 0.9}) for k in range(1, 12)],
     IncidentKind.PERSISTENT_IMBALANCE, "group:leaf01:spine01|spine02"),
])
def test_each_fault_is_one_incident_with_its_component_on_top(name: str, views: list[WindowView], kind: str,
                                                               top: str) -> None:
    _, incidents = _run(views)
    assert [(i.kind, i.top) for i in incidents] == [(kind, top)], name
    [inc] = incidents
    need = Hysteresis().opening(kind)[0]
    assert inc.state is State.OPEN and inc.detected_ns - inc.start_ns == (need - 1) * S  # opened on its need-th window


def test_a_healthy_fabric_has_no_symptom() -> None:
    d, incidents = _run([_view(k) for k in range(1, 30)])
    assert incidents == [] and d.last_symptoms == []


def test_capacity_loss_carries_its_rate_and_the_flows_it_affects() -> None:
    d, [inc] = _run([_view(k, congestion={UP: QUEUED}) for k in range(1, 4)])
    [s] = d.last_symptoms
    assert (s.kind, s.subject, s.value) == (Kind.CAPACITY_LOSS, UP, pytest.approx(0.2))
    assert s.rate_bps == pytest.approx(80e9)
    assert inc.flows == {"host01:mlx5_0>host13:mlx5_0", "host09:mlx5_0>host13:mlx5_0"}
    assert inc.hosts == {"host01", "host09", "host13"}
    assert inc.jobs == {"job-host01", "job-host09"}  # the jobs of the paths crossing it, not of the others
    assert "capacity_loss" in inc.evidence[inc.top][0]


def test_a_host_link_that_loses_capacity_suspects_the_cable_then_its_nic() -> None:
    """A PCIe-limited NIC queues its host link like a degraded cable: the cable first, the NIC second; a switch
    cable has no NIC among its suspects."""
    host = "leaf04:Ethernet1>host13:mlx5_0"
    _, [inc] = _run([_view(k, congestion={host: QUEUED}) for k in range(1, 4)])
    assert inc.kind == IncidentKind.DEGRADED_LINK
    assert [c for c, _ in inc.ranked()[:2]] == [cable_of(host), "nic:host13:mlx5_0"]
    _, [inc] = _run([_view(k, congestion={UP: QUEUED}) for k in range(1, 4)])
    assert not [c for c in inc.suspects if c.startswith("nic:")], inc.suspects


def test_an_incident_names_the_collectives_its_jobs_ran_while_it_showed() -> None:
    """The collectives of the jobs whose paths cross the suspect, with calls in a window the incident showed in; not
    another job's, and not the job's collectives of windows before the fault."""
    def view(k: int, faulty: bool) -> WindowView:
        v = _view(k, congestion={UP: QUEUED} if faulty else None)
        v.collectives = {"job-host01": {f"job-host01/0xa/{'AllGather' if faulty else 'Broadcast'}"},
                         "elsewhere": {"elsewhere/0xb/AllReduce"}}
        return v

    _, [inc] = _run([view(k, k >= 4) for k in range(1, 8)])
    assert inc.collectives == {"job-host01/0xa/AllGather"}


def test_a_flapping_signal_is_one_incident_and_it_closes_after_the_clear_windows() -> None:
    views = []
    for k in range(1, 21):  # queue on for 2 windows, off for 2, ...
        views.append(_view(k, congestion={DOWN: QUEUED} if k % 4 in (1, 2) else None))
    views += [_view(k) for k in range(21, 21 + Hysteresis().clear_windows)]
    _, incidents = _run(views)
    assert len(incidents) == 1
    [inc] = incidents
    assert inc.state is State.CLOSED and inc.end_ns == T0 + 18 * S


def test_an_imbalance_shorter_than_its_duration_opens_nothing() -> None:
    views = [_view(k, fim={"leaf01:spine01|spine02": 0.9} if k < 9 else None) for k in range(1, 30)]
    assert _run(views)[1] == []


def test_an_imbalance_its_flows_explain_is_no_incident_unless_they_collide() -> None:
    """Two flows over a 2-member group: FIM high either way. When the agents' flows account for the group's bytes,
    only a collision (both flows on one member) makes it an incident; flows that cover too little of the measured
    bytes leave the FIM to stand alone."""
    g = "leaf01:spine01|spine02"

    def views(attributed: int, collided: bool) -> list[WindowView]:
        out = []
        for k in range(1, 14):
            v = _view(k, fim={g: 0.9})
            v.group_measured_bytes[g], v.group_attributed_bytes[g] = 20 * GB, attributed
            if collided:
                v.collisions.add((g, "leaf01:Ethernet5>spine01:Ethernet1"))
            out.append(v)
        return out

    assert _run(views(19 * GB, collided=False))[1] == []  # as even as two flows allow
    for attributed, collided in ((19 * GB, True), (10 * GB, False)):  # a collision; or traffic the agents miss
        assert [(i.kind, i.top) for i in _run(views(attributed, collided))[1]] == \
            [(IncidentKind.PERSISTENT_IMBALANCE, f"group:{g}")], (attributed, collided)


def test_one_window_of_noise_opens_nothing() -> None:
    views = [_view(k) for k in range(1, 5)] + [_view(5, congestion={DOWN: QUEUED})] + [_view(k) for k in range(6, 12)]
    assert _run(views)[1] == []


def test_two_simultaneous_faults_are_two_incidents() -> None:
    # leaf01 measures what it sends and what its hosts send it
    silent = {lk: None for lk, dl in MODEL.fabric.links.items()
              if dl.src_node == "leaf01" or (dl.host_link and dl.dst_node == "leaf01")}
    views = [_view(k) for k in range(1, 6)] + [_view(k, silent, {DOWN: QUEUED}) for k in range(6, 10)]
    _, incidents = _run(views)
    assert sorted((i.kind, i.top) for i in incidents) == [(IncidentKind.DEGRADED_LINK, cable_of(DOWN)),
                                                          (IncidentKind.SWITCH_SILENT, "switch:leaf01")]
