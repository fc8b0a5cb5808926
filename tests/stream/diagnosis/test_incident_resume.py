"""A restarted diagnosis takes over the open incidents its predecessor published (resume.py), without servers."""

from __future__ import annotations

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.diagnosis.incidents import Diagnoser, State
from flowtracer.stream.diagnosis.records import incident_record
from flowtracer.stream.diagnosis.resume import open_incidents
from flowtracer.stream.diagnosis.window import CongestionObs, FabricModel, LinkObs, PathObs, WindowView, cable_of

S = 1_000_000_000
T0 = 1_800_000_000 * S
MODEL = FabricModel(Fabric(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="t"))))
DOWN = "spine01:Ethernet3>leaf03:Ethernet5"
QUEUED = CongestionObs(ecn_marked_pkts=700, queue_watermark_bytes=1_250_000)


def _view(k: int, degraded: bool) -> WindowView:
    """Window k: every link at 10 GB (20% of 400G); a queue on DOWN when ``degraded`` (a degraded cable)."""
    view = WindowView(T0 + k * S, S)
    for lk, dl in MODEL.fabric.links.items():
        view.links[lk] = LinkObs(lk, dl.src_node, dl.dst_node, dl.speed_bps, 10**10)
    view.congestion = {DOWN: QUEUED} if degraded else {}
    view.paths = [PathObs("host09:mlx5_0", "host12:mlx5_0", "host09", "host12", (DOWN,), 10**10, ("j1",))]
    return view


def _published(d: Diagnoser, ks: range, degraded: bool) -> list[analytics_pb2.Incident]:
    """What the service would publish for windows ``ks`` (the records, through their bytes)."""
    out = []
    for k in ks:
        for inc in d.window(_view(k, degraded)):
            out.append(analytics_pb2.Incident.FromString(incident_record(inc, T0 + k * S).SerializeToString()))
    return out


def test_a_restart_continues_the_open_incident_under_its_id_and_closes_it() -> None:
    first = Diagnoser(MODEL)
    before = _published(first, range(1, 8), degraded=True)
    [inc_id] = {r.id for r in before}
    assert before[-1].state == "open"
    # a new process: it adopts what the topic's newest snapshots say is open
    second = Diagnoser(MODEL)
    adopted = open_incidents(before)
    assert [(i.id, i.state, i.top) for i in adopted] == [(inc_id, State.OPEN, cable_of(DOWN))]
    assert adopted[0].flows == set(before[-1].flows) and adopted[0].jobs == {"j1"}
    second.adopt(adopted)
    during = _published(second, range(10, 14), degraded=True)  # the fault goes on after a 2-window gap
    assert {r.id for r in during} == {inc_id} and all(r.state == "open" for r in during)
    assert during[-1].windows == before[-1].windows + 4 and during[-1].start_ns == before[-1].start_ns
    after = _published(second, range(14, 30), degraded=False)  # repaired: closed under the same id
    closed = [r for r in after if r.state == "closed"]
    assert [(r.id, r.end_ns) for r in closed] == [(inc_id, T0 + 13 * S)]
    assert {r.id for r in after} == {inc_id}


def test_an_incident_gone_during_the_restart_closes_and_closed_ones_stay_closed() -> None:
    first = Diagnoser(MODEL)
    before = _published(first, range(1, 8), degraded=True) + _published(first, range(8, 20), degraded=False)
    assert before[-1].state == "closed"
    assert open_incidents(before) == []  # the newest snapshot says closed: nothing to take over
    second = Diagnoser(MODEL)
    second.adopt(open_incidents(before[:6]))  # the predecessor died while it was open
    after = _published(second, range(8, 30), degraded=False)
    assert [(r.state, r.end_ns) for r in after if r.state == "closed"] == [("closed", before[5].window_end_ns)]
