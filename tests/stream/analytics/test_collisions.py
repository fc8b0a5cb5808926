"""The collision rule, table-driven: only certain placements (confident, whole on one member) collide."""

from __future__ import annotations

from typing import Any

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import common_pb2
from flowtracer.stream.analytics.collisions import CollisionRule, GroupHop, certain, find_collision

SEC = 1_000_000_000
FABRIC = Fabric(generate(FabricSpec(hosts=8, leaves=2, spines=4)))  # 4-member leaf groups, 400G links
GROUP = next(g for g in FABRIC.ecmp_groups.values() if g.switch == "leaf01")
CAP = GROUP.members[0].speed_bps / 8  # bytes per 1 s hop
HEAVY = int(0.3 * CAP)  # well above the default heavy share (0.1)


def ref(i: int, nbytes: int = HEAVY, confidence: float = 1.0, share: float = 1.0) -> common_pb2.FlowRef:
    return common_pb2.FlowRef(key=common_pb2.FlowKey(src_ip=f"10.0.0.{i}", udp_src_port=50000 + i), lqpn=i,
                              bytes=nbytes, confidence=confidence, link_share=share, method="infer")


DEFAULT = CollisionRule()


def collide(per_member: list[list[common_pb2.FlowRef]], rule: CollisionRule = DEFAULT) -> object:
    loads = tuple(sum(f.bytes for f in fl) for fl in per_member)
    hop = GroupHop(loads, tuple(float(v) for v in loads), tuple(len(fl) for fl in per_member))
    flows = {m.id: fl for m, fl in zip(GROUP.members, per_member, strict=True)}
    return find_collision(GROUP, hop, flows, SEC, rule, 0, SEC, "infer")


# Each case: the flows on members 0..3 as (id, confidence, link share) -> the colliding flow ids or None.
CASES = {
    "two certain on one member, idle sibling": ([[(1, 1.0, 1.0), (2, 1.0, 1.0)], [], [], []], {1, 2}),
    "two lockstep channels split half/half over two members": (
        [[(1, 0.5, 0.5), (2, 0.5, 0.5)], [(1, 0.5, 0.5), (2, 0.5, 0.5)], [], []], None),
    "split flows with full confidence still do not count": (
        [[(1, 1.0, 0.5), (2, 1.0, 0.5)], [(1, 1.0, 0.5), (2, 1.0, 0.5)], [], []], None),
    "one certain and one split on the same member": ([[(1, 1.0, 1.0), (2, 0.95, 0.5)], [(2, 0.95, 0.5)], [], []],
                                                      None),
    "confidence just below the threshold": ([[(1, 0.8999, 1.0), (2, 1.0, 1.0)], [], [], []], None),
    "confidence exactly at the threshold": ([[(1, 0.9, 1.0), (2, 1.0, 1.0)], [], [], []], {1, 2}),
    "link share within rounding of whole": ([[(1, 1.0, 0.9995), (2, 1.0, 1.0)], [], [], []], {1, 2}),
    "no sibling with two fewer": ([[(1, 1.0, 1.0), (2, 1.0, 1.0)], [(3, 1.0, 1.0)], [(4, 1.0, 1.0)],
                                   [(5, 1.0, 1.0)]], None),
    "three certain beside an uncertain crowd": (
        [[(1, 1.0, 1.0), (2, 0.95, 1.0), (3, 0.92, 1.0)], [(4, 0.3, 1.0)], [(5, 0.3, 1.0)], []], {1, 2, 3}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_collision_table(name: str) -> None:
    members, expected = CASES[name]
    c: Any = collide([[ref(i, confidence=conf, share=share) for i, conf, share in fl] for fl in members])
    if expected is None:
        assert c is None
        return
    assert c is not None
    assert {f.lqpn for f in c.flows} == expected
    assert c.link == GROUP.members[0].id
    assert c.confidence == min(f.confidence for f in c.flows)


def test_light_flows_never_collide_and_the_threshold_is_configurable() -> None:
    light = [[ref(1, int(0.05 * CAP)), ref(2, int(0.05 * CAP))], [], [], []]
    assert collide(light) is None
    assert collide(light, CollisionRule(heavy_share=0.04)) is not None
    unsure = [[ref(1, confidence=0.6), ref(2, confidence=0.7)], [], [], []]
    assert collide(unsure) is None
    c: Any = collide(unsure, CollisionRule(min_confidence=0.5))
    assert c is not None and c.confidence == pytest.approx(0.6)


@pytest.mark.parametrize(("confidence", "share", "ok"), [
    (1.0, 1.0, True), (0.9, 1.0, True), (0.89, 1.0, False), (1.0, 0.999, True), (1.0, 0.99, False), (0.0, 0.0, False),
])
def test_certain_edges(confidence: float, share: float, ok: bool) -> None:
    assert certain(ref(1, confidence=confidence, share=share), CollisionRule()) is ok


def test_sprayed_flows_are_never_heavy_on_a_member() -> None:
    # A sprayed flow's packets take every member: however its bytes show on one, it is not a whole flow there.
    heavy = [ref(i) for i in range(3)]
    assert collide([heavy, [], [], []]) is not None
    sprayed = [common_pb2.FlowRef(key=h.key, lqpn=h.lqpn, bytes=h.bytes, confidence=1.0, link_share=1.0,
                                  method="sprayed") for h in heavy]
    assert not certain(sprayed[0], DEFAULT)
    assert collide([sprayed, [], [], []]) is None
