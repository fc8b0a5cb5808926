"""The ``link_down`` symptom (a link whose interface reports oper status down) and the explaining-away rule: links
that only lost their traffic while some link went down or came back are not dead. Hand-built windows, no servers."""

from __future__ import annotations

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.diagnosis.assembly import WindowAssembler
from flowtracer.stream.diagnosis.incidents import Diagnoser
from flowtracer.stream.diagnosis.localize import IncidentKind
from flowtracer.stream.diagnosis.symptoms import Kind, SymptomDetector
from flowtracer.stream.diagnosis.window import FabricModel, LinkObs, WindowView, cable_of

S = 1_000_000_000
T0 = 1_800_000_000 * S
GB = 10**9
MODEL = FabricModel(Fabric(generate(FabricSpec(hosts=32, leaves=8, spines=4, name="o"))))
CUT = ("leaf01:Ethernet5>spine01:Ethernet1", "spine01:Ethernet1>leaf01:Ethernet5")  # the cable that goes down
QUIET = ("leaf05:Ethernet6>spine02:Ethernet5", "spine02:Ethernet5>leaf05:Ethernet6")  # rehashed away: no traffic
OTHER = "leaf03:Ethernet7>spine03:Ethernet3"
UNKNOWN = ()  # no link has an unknown oper status


def _view(k: int, down: tuple[str, ...] = (), idle: tuple[str, ...] = (), unknown: tuple[str, ...] = UNKNOWN,
          oper: bool = True, silent: tuple[str, ...] = ()) -> WindowView:
    """Window k: every switch link carries 10 GB and reports up, except ``down`` (oper down, no bytes), ``idle``
    (up, no bytes), ``unknown`` (oper status not reported) and ``silent`` (no batch: neither bytes nor status);
    ``oper`` False: no link reports its status."""
    view = WindowView(T0 + k * S, S)
    for lk, dl in MODEL.fabric.links.items():
        quiet = lk in down or lk in idle
        status = None if not oper or lk in unknown or lk in silent else lk not in down
        view.links[lk] = LinkObs(lk, dl.src_node, dl.dst_node, dl.speed_bps,
                                 None if lk in silent else 0 if quiet else 10 * GB, oper_up=status)
    return view


def _symptoms(views: list[WindowView]) -> list[set[tuple[Kind, str]]]:
    d = SymptomDetector(MODEL)
    return [{(s.kind, s.subject) for s in d.detect(v) if s.kind in (Kind.LINK_DOWN, Kind.LINK_DEAD)} for v in views]


WARM = [_view(k) for k in range(1, 6)]


@pytest.mark.parametrize("name, views, want", [
    ("a link reported down is link_down, both directions",
     [*WARM, _view(6, down=CUT)], {(Kind.LINK_DOWN, lk) for lk in CUT}),
    ("a port down from the start is not news",
     [_view(k, down=CUT) for k in range(1, 7)], set()),
    ("a down link whose counters gave no trusted delta is still down",
     [*WARM, _view(6, down=CUT, unknown=CUT[1:], silent=CUT[1:])], {(Kind.LINK_DOWN, CUT[0])}),
    ("explained away: up links that lost their traffic beside a down link are not dead",
     [*WARM, _view(6, down=CUT, idle=QUIET)], {(Kind.LINK_DOWN, lk) for lk in CUT}),
    ("unless their oper status is unknown: nothing says they are up",
     [*WARM, _view(6, down=CUT, idle=QUIET, unknown=QUIET)],
     {(Kind.LINK_DOWN, lk) for lk in CUT} | {(Kind.LINK_DEAD, lk) for lk in QUIET}),
    ("a link coming back up rehashes flows too",
     [*WARM, _view(6, down=CUT), _view(7, idle=QUIET)], set()),
    ("no oper status at all: lost traffic is still inferred as dead",
     [_view(k, oper=False) for k in range(1, 6)] + [_view(6, idle=CUT, oper=False)],
     {(Kind.LINK_DEAD, lk) for lk in CUT}),
    ("the rule is bounded: long after the last change, an up link losing its traffic is dead again",
     WARM + [_view(6, down=CUT)] + [_view(k, down=CUT, idle=QUIET) for k in range(7, 30)]
     + [_view(30, down=CUT, idle=(*QUIET, OTHER))], {(Kind.LINK_DOWN, lk) for lk in CUT} | {(Kind.LINK_DEAD, OTHER)}),
])
def test_link_down_and_explaining_away(name: str, views: list[WindowView], want: set[tuple[Kind, str]]) -> None:
    assert _symptoms(views)[-1] == want, name


def test_a_down_cable_with_rehashed_siblings_is_one_failed_link_incident_on_that_cable() -> None:
    d = Diagnoser(MODEL)
    seen = {}
    for v in WARM + [_view(k, down=CUT, idle=QUIET) for k in range(6, 12)]:
        for inc in d.window(v):
            seen[inc.id] = inc
    assert [(i.kind, i.top) for i in seen.values()] == [(IncidentKind.FAILED_LINK, cable_of(CUT[0]))]
    [inc] = seen.values()
    assert any("oper status down" in e for e in inc.evidence[cable_of(CUT[0])])


def test_a_rebooting_switch_takes_its_neighbours_ports_down_and_is_the_suspect() -> None:
    """Its own links give no batch (silent); its neighbours report their ports toward it down."""
    toward = tuple(lk for lk, dl in MODEL.fabric.links.items() if dl.dst_node == "spine02")
    gone = tuple(lk for lk, dl in MODEL.fabric.links.items() if dl.src_node == "spine02")
    d = Diagnoser(MODEL)
    seen = {}
    for v in WARM + [_view(k, down=toward, silent=gone) for k in range(6, 10)]:
        for inc in d.window(v):
            seen[inc.id] = inc
    assert [(i.kind, i.top) for i in seen.values()] == [(IncidentKind.SWITCH_SILENT, "switch:spine02")]


@pytest.mark.parametrize("oper_up, oper_valid, want", [(True, True, True), (False, True, False),
                                                      (False, False, None), (True, False, None)])
def test_a_link_loads_oper_status_reaches_the_window(oper_up: bool, oper_valid: bool, want: bool | None) -> None:
    """``oper_valid`` false: unknown (None), whatever ``oper_up`` says."""
    a = WindowAssembler(S, 10 * S)
    ll = analytics_pb2.LinkLoad(schema_version=1, window_end_ns=T0 + S, link=CUT[0], src_node="leaf01",
                                dst_node="spine01", oper_up=oper_up, oper_valid=oper_valid)
    a.add(topics.LINK_LOADS.name, ll.SerializeToString(), 0)
    [(view, _)] = a.complete(0, final=True)
    assert view.links[CUT[0]].oper_up is want
