"""Lasting failures, without servers: an incident stays open while its fault lasts, and the quiet period after a
failure covers the groups it affects once, not for as long as the failure lasts (stream/diagnosis/quiet.py)."""

from __future__ import annotations

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.diagnosis.incidents import Diagnoser, Incident, State
from flowtracer.stream.diagnosis.localize import IncidentKind
from flowtracer.stream.diagnosis.symptoms import Thresholds
from flowtracer.stream.diagnosis.window import FabricModel, LinkObs, PathObs, WindowView, cable_of

S = 1_000_000_000
T0 = 1_800_000_000 * S
GB = 10**9
MODEL = FabricModel(Fabric(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="t"))))
GROUP = "leaf01:spine01|spine02"
SHARED = "leaf01:Ethernet5>spine01:Ethernet1"
FAILED = "leaf03:Ethernet6>spine02:Ethernet3"  # a cable on another leaf: leaf01's group is not its business
QUIET = Thresholds().after_failure_windows


def _view(k: int, down: str | None = None, collided: bool = False, dead: str | None = None,
          moved: bool = False) -> WindowView:
    """Window k: every link carries 10 GB and reports oper status up, except ``down`` (both directions down) and
    ``dead`` (one direction up and empty: a withdrawn next hop); ``collided``: the processor publishes a Collision
    on leaf01's group; ``moved``: host09's flow left ``dead``."""
    v = WindowView(T0 + k * S, S)
    for lk, dl in MODEL.fabric.links.items():
        off = down is not None and cable_of(lk) == cable_of(down)
        v.links[lk] = LinkObs(lk, dl.src_node, dl.dst_node, dl.speed_bps, 0 if off or lk == dead else 10 * GB,
                              oper_up=not off)
    if collided:
        v.collisions.add((GROUP, SHARED))
    before = (FAILED, "spine02:Ethernet4>leaf04:Ethernet6")
    after = ("leaf03:Ethernet5>spine01:Ethernet3", "spine01:Ethernet4>leaf04:Ethernet5")
    v.paths = [PathObs("host09:mlx5_0", "host13:mlx5_0", "host09", "host13", after if moved else before, 10 * GB)]
    return v


def _run(views: list[WindowView]) -> list[Incident]:
    d = Diagnoser(MODEL)
    seen: dict[str, Incident] = {}
    for v in views:
        for inc in d.window(v):
            seen[inc.id] = inc
    return list(seen.values())


def _imbalance(incidents: list[Incident]) -> list[Incident]:
    return [i for i in incidents if i.kind == IncidentKind.PERSISTENT_IMBALANCE]


def test_a_collision_that_goes_on_while_a_cable_stays_down_stays_one_open_incident() -> None:
    views = [_view(k, collided=True) for k in range(1, 15)]
    views += [_view(k, down=FAILED, collided=True) for k in range(15, 60)]
    incidents = _run(views)
    [inc] = _imbalance(incidents)
    assert inc.state is State.OPEN and inc.last_seen_ns == T0 + 59 * S
    [failed] = [i for i in incidents if i.kind == IncidentKind.FAILED_LINK]
    assert failed.top == cable_of(FAILED) and failed.state is State.OPEN and failed.last_seen_ns == T0 + 59 * S


def test_a_collision_after_a_failure_on_its_own_leaf_is_an_incident_once_the_quiet_period_ends() -> None:
    """The collision starts with the failure of one of its group's members and lasts: held back for the quiet
    period (the rehash's transient: the window it starts in and QUIET more), which a cable that stays down does not
    renew, then an incident like any other."""
    down = "leaf01:Ethernet6>spine02:Ethernet1"
    views = [_view(k) for k in range(1, 15)] + [_view(k, down=down, collided=True) for k in range(15, 60)]
    [inc] = _imbalance(_run(views))
    need = 10  # persistent_imbalance: 10 of 12 windows
    assert inc.start_ns == T0 + (15 + QUIET + 1) * S and inc.detected_ns == inc.start_ns + (need - 1) * S
    assert inc.state is State.OPEN


def test_a_failure_elsewhere_does_not_hold_back_a_new_collision() -> None:
    views = [_view(k) for k in range(1, 15)] + [_view(k, down=FAILED, collided=k >= 16) for k in range(15, 40)]
    [inc] = _imbalance(_run(views))
    assert inc.start_ns == T0 + 16 * S


def test_a_withdrawn_next_hop_stays_an_open_incident_while_its_link_stays_dead() -> None:
    """One direction carries nothing, the cable up: the flows that left it elect its cable; when they are old news
    (the path_moved memory ends) the dead link alone still keeps the incident open."""
    views = [_view(k) for k in range(1, 15)] + [_view(k, dead=FAILED, moved=True) for k in range(15, 60)]
    [inc] = [i for i in _run(views) if i.kind == IncidentKind.FAILED_LINK]
    assert inc.top == cable_of(FAILED) and inc.state is State.OPEN and inc.last_seen_ns == T0 + 59 * S


def test_a_high_fim_the_failure_forces_is_the_failures_while_it_lasts_a_collision_is_not() -> None:
    """leaf03's flows toward leaf04 have one member left while FAILED is down: its group's FIM is high without a
    collision, and the down cable explains it. The same group with a collision is an imbalance of its own."""
    group = "leaf03:spine01|spine02"

    def view(k: int, collided: bool) -> WindowView:
        v = _view(k, down=FAILED if k >= 15 else None)
        if k >= 15:
            v.group_fim[group] = 0.9
            if collided:
                v.collisions.add((group, "leaf03:Ethernet5>spine01:Ethernet3"))
        return v

    incidents = _run([view(k, collided=False) for k in range(1, 60)])
    assert [(i.kind, i.top) for i in incidents] == [(IncidentKind.FAILED_LINK, cable_of(FAILED))]
    [inc] = _imbalance(_run([view(k, collided=True) for k in range(1, 60)]))
    assert inc.top == f"group:{group}" and inc.state is State.OPEN
