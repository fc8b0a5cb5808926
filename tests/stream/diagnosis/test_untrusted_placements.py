"""No hash or placement verdict from bytes the resolver did not place with a trusted method (issue 27, item 2).

A flow placed by infer (or a trace resolver's fallback for a flow without a fresh trace) may really be on a sibling
member: the counters disagreeing with that guess say nothing about the fabric. Only trusted placements (a trace, the
configured hash of the flow itself) are compared with the counters.
"""

from __future__ import annotations

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.diagnosis.incidents import Diagnoser
from flowtracer.stream.diagnosis.localize import IncidentKind
from flowtracer.stream.diagnosis.symptoms import Kind, SymptomDetector, unexplained_evidence
from flowtracer.stream.diagnosis.window import FabricModel, LinkObs, PathObs, WindowView

S = 1_000_000_000
T0 = 1_800_000_000 * S
GB = 10**9
MODEL = FabricModel(Fabric(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="t"))))
SRC, DST = "host09:mlx5_0", "host01:mlx5_0"
VIA1, VIA2 = MODEL.fabric.equal_cost_paths(SRC, DST)  # leaf03 -> spine01 / spine02 -> leaf01


def _view(k: int, untrusted: int, placed_via2: int = 2 * GB, measured_via1: int = 12 * GB) -> WindowView:
    """Window k: every switch link carries 10 GB placed by trusted methods, and host09 -> host01 moves 2 GB more
    that really crossed spine01 (``VIA1``, counters ``measured_via1``) but were placed on spine02 (``VIA2``,
    ``placed_via2`` bytes), ``untrusted`` of them by an untrusted method."""
    view = WindowView(T0 + k * S, S)
    for lk, dl in MODEL.fabric.links.items():
        measured = measured_via1 if lk in VIA1 and not dl.host_link else 10 * GB
        attributed = 10 * GB + (placed_via2 if lk in VIA2 and not dl.host_link else 0)
        if dl.host_link and lk in VIA1:
            measured = attributed = 10 * GB + placed_via2
        view.links[lk] = LinkObs(lk, dl.src_node, dl.dst_node, dl.speed_bps, measured, attributed,
                                 measured - attributed)
    view.paths = [PathObs(SRC, DST, "host09", "host01", VIA2, placed_via2, (), untrusted),
                  PathObs("host02:mlx5_0", "host06:mlx5_0", "host02", "host06", (), 10 * GB)]
    return view


def _incidents(views: list[WindowView]) -> list[tuple[str, str]]:
    d = Diagnoser(MODEL)
    seen = {}
    for v in views:
        for inc in d.window(v):
            seen[inc.id] = (inc.kind, inc.top)
    return sorted(seen.values())


def test_unexplained_bytes_an_untrusted_placement_can_account_for_are_no_evidence() -> None:
    views = [_view(k, untrusted=2 * GB) for k in range(1, 30)]
    det = SymptomDetector(MODEL)
    assert not [s for v in views for s in det.detect(v) if s.kind is Kind.UNEXPLAINED]
    assert not [i for i in _incidents(views) if i[0] == IncidentKind.HASH_MISCONFIGURATION]


def test_the_same_disagreement_with_trusted_placements_is_a_hash_misconfiguration() -> None:
    # the control: placed by a trace or the hash model, the same bytes on the wrong spine are evidence
    incidents = _incidents([_view(k, untrusted=0) for k in range(1, 30)])
    assert IncidentKind.HASH_MISCONFIGURATION in {kind for kind, _top in incidents}


def test_counters_below_the_trusted_bytes_stay_evidence_whatever_is_untrusted() -> None:
    # spine01's side sees 2 GB less than the trusted placements alone put there: no untrusted flow explains that
    views = [_view(k, untrusted=2 * GB, measured_via1=8 * GB) for k in range(1, 5)]
    det = SymptomDetector(MODEL)
    sick = {s.subject for v in views for s in det.detect(v) if s.kind is Kind.UNEXPLAINED}
    assert {lk for lk in VIA1 if not MODEL.fabric.links[lk].host_link} <= sick


def test_unexplained_evidence() -> None:
    assert unexplained_evidence(5, 0, 0) == 5 and unexplained_evidence(-5, 0, 0) == -5  # all trusted: as measured
    assert unexplained_evidence(5, 0, 3) == 2  # 3 untrusted bytes could be here: 2 left
    assert unexplained_evidence(5, 0, 9) == 0
    assert unexplained_evidence(-4, 4, 4) == 0  # the surplus was an untrusted placement on this link
    assert unexplained_evidence(-6, 4, 4) == -2  # trusted bytes alone exceed the counters by 2
