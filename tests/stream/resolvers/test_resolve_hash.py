"""The ``hash`` resolver doubts itself when the leaf uplink counters contradict its model: right model ->
confidence 1; a fabric that hashes with another seed -> the wrongly placed bytes carry low confidence."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fluid import ENGINE_SEED, START, windows

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import Workload
from flowtracer.stream.resolvers.contract import FlowObs
from flowtracer.stream.resolvers.hash import (
    MISMATCH_TOLERANCE,
    HashResolver,
    confidence_from_mismatch,
    group_mismatch,
)


@pytest.mark.parametrize(("predicted", "measured", "expected"), [
    ({"a": 5e6, "b": 5e6}, {"a": 5_000_000, "b": 5_000_000}, 0.0),  # the model explains every byte
    ({"a": 10e6}, {"a": 0, "b": 10_000_000}, 2.0),  # every byte predicted on the wrong member
    ({"a": 6e6, "b": 4e6}, {"a": 5_000_000, "b": 5_000_000}, 0.2),
    ({"a": 1.0}, {"a": 10, "b": 10}, None),  # too few bytes to judge
    ({"a": 5e6}, {"a": 5_000_000}, None),  # a member's counter is missing
])
def test_group_mismatch(predicted: dict, measured: dict, expected: float | None) -> None:
    got = group_mismatch(predicted, measured, ("a", "b"))
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_confidence_is_one_within_the_tolerance_then_falls_to_zero() -> None:
    assert confidence_from_mismatch(0.0) == confidence_from_mismatch(MISMATCH_TOLERANCE) == 1.0
    assert 0.0 < confidence_from_mismatch(0.5) < 1.0
    assert confidence_from_mismatch(1.0) == confidence_from_mismatch(2.0) == 0.0


@pytest.fixture(scope="module")
def ring() -> tuple[Fabric, list]:
    return windows("ring-allreduce", 2, 20)


def run(resolver: HashResolver, data: list) -> tuple[float, float, float]:
    """(bytes on the true path at confidence >= 0.9, bytes off it at confidence >= 0.9, all bytes) after warm-up."""
    on = off = total = 0.0
    for n, (end, obs, measured, truth) in enumerate(data):
        placed = resolver.resolve(end, obs, measured)
        if n < 8:
            continue
        for f, p in zip(obs, placed, strict=True):
            total += f.bytes
            if p is None or p.confidence < 0.9:
                continue
            if p.paths[0][0] == truth[f.flow_id]:
                on += f.bytes
            else:
                off += f.bytes
    return on, off, total


def test_right_model_keeps_full_confidence(ring: tuple[Fabric, list]) -> None:
    _, data = ring
    fabric = Fabric(generate(replace(FabricSpec(hosts=16, leaves=4, spines=2), hash_seed=ENGINE_SEED)))
    resolver = HashResolver(fabric)
    on, off, total = run(resolver, data)
    assert off == 0 and on == pytest.approx(total)
    assert max(resolver.mismatch.values()) <= MISMATCH_TOLERANCE


def test_wrong_model_is_doubted_not_confidently_wrong(ring: tuple[Fabric, list]) -> None:
    fabric, data = ring  # the resolver's topology claims a seed the fabric does not hash with
    resolver = HashResolver(fabric)
    _, off, total = run(resolver, data)
    # Without the counters' check every misplaced byte would be claimed with confidence 1.
    unchecked_off = 0.0
    plain = HashResolver(fabric)
    for end, obs, _, truth in data[8:]:
        for f, p in zip(obs, plain.resolve(end, obs, {}), strict=True):
            unchecked_off += f.bytes if p is not None and p.paths[0][0] != truth[f.flow_id] else 0.0
    assert unchecked_off > 0.2 * total, "the seeds agree too often for this test to say anything"
    # Counters see a wrong model only where it changes a member's total: equal ring flows hashed onto each
    # other's members are invisible to them (and leave no unexplained bytes either), so only part goes.
    assert off < 0.7 * unchecked_off
    assert max(resolver.mismatch.values()) > 0.5
    doubted = {gid for gid, m in resolver.mismatch.items() if m > 0.5}
    end, obs, measured, _ = data[-1]
    for f, p in zip(obs, resolver.resolve(end, obs, measured), strict=True):
        crossed = {g for link in p.paths[0][0] for g in [resolver.group_of_link.get(link)] if g} if p else set()
        if crossed & doubted:
            assert p is not None and p.confidence < 0.9, f.flow_id


@pytest.mark.parametrize("seeded", [True, False], ids=["model right: every group within tolerance",
                                                    "model wrong: some groups doubted"])
def test_resolve_places_each_flow_as_the_plain_per_path_rule(ring: tuple[Fabric, list], seeded: bool) -> None:
    """``resolve`` skips the per-link pass while every group is within tolerance; its placements must be those of
    ``_placement`` (the worst group on each path) window after window, in both regimes."""
    fabric, data = ring
    if seeded:
        fabric = Fabric(generate(replace(FabricSpec(hosts=16, leaves=4, spines=2), hash_seed=ENGINE_SEED)))
    resolver = HashResolver(fabric)
    regimes = set()
    for end, obs, measured, _ in data:
        placed = resolver.resolve(end, obs, measured)
        regimes.add(max(resolver.mismatch.values(), default=0.0) <= MISMATCH_TOLERANCE)
        plain = [resolver._placement(p) if (p := resolver._path(f)) is not None else None for f in obs]
        assert placed == plain
    assert regimes == {seeded}  # each case stays in its regime: both are covered


def test_state_round_trip(ring: tuple[Fabric, list]) -> None:
    fabric, data = ring
    a = HashResolver(fabric)
    run(a, data[:10])
    b = HashResolver(fabric)
    b.restore(a.state())
    assert b.mismatch == a.mismatch


# -- live groups: the resolver hashes over the groups the leaves' AFT streams, as the simulated switches forward --

LIVE_SPEC = FabricSpec(hosts=16, leaves=4, spines=2)
# Each case: faults injected into the simulator -> the share of leaf flows each changed uplink should carry.
LIVE_CASES: dict[str, tuple[list[tuple[str, str, int]], dict[str, tuple[float, float]]]] = {
    "the AFT agrees with the topology": ([], {"leaf01:Ethernet5": (0.35, 0.65), "leaf02:Ethernet6": (0.35, 0.65)}),
    "a next hop withdrawn: rehash over the rest": (
        [("nh_withdraw", "leaf01:Ethernet5", 1)], {"leaf01:Ethernet5": (0.0, 0.0), "leaf01:Ethernet6": (1.0, 1.0)}),
    "a next hop weighted 2:1": ([("nh_weight", "leaf02:Ethernet6", 2)], {"leaf02:Ethernet6": (0.58, 0.75)}),
    "withdrawn, weighted and one restored": (
        [("nh_withdraw", "leaf03:Ethernet5", 1), ("nh_weight", "leaf04:Ethernet5", 3),
         ("nh_restore", "leaf03:Ethernet5", 1)],
        {"leaf03:Ethernet5": (0.35, 0.65), "leaf04:Ethernet5": (0.65, 0.85)}),
}


def aft_of(engine: Engine, switch: str) -> list[dict[str, int]]:
    """What a switch's AFT streams: per group, egress port -> weight."""
    st = engine.switch_states[switch].snapshot()
    return [{st.next_hops[i].interface: w for i, w in g.next_hops.items()} for g in st.groups.values()]


@pytest.mark.parametrize("name", LIVE_CASES)
def test_the_resolver_follows_the_live_groups_as_the_simulator_forwards(name: str) -> None:
    faults, shares = LIVE_CASES[name]
    topo = generate(LIVE_SPEC)
    engine = Engine(topo, Workload(seed=5), tick_s=1.0, start_ns=START, coll_log=False)
    hosts = [f"host{i:02d}:mlx5_0" for i in range(1, 17)]
    for i, src in enumerate(hosts):  # every host to every host behind another leaf, 3 QPs each: 144 flows per leaf
        for j, dst in enumerate(hosts):
            if i // 4 != j // 4:
                for _ in range(3):
                    engine.add_steady_flow(src, dst)
    for kind, target, weight in faults:
        engine.inject(kind, target, weight=weight)
    engine.step()
    resolver = HashResolver(Fabric(topo))
    for leaf in resolver.leaves:
        resolver.observe_groups(leaf, aft_of(engine, leaf))
    flows = [f for f in engine.flows.values() if f.forward and f.path is not None]
    obs = [FlowObs(f"{f.src.name}/{f.tx_qp.lqpn}/0", f.src.name, f.dst.name, f.headers.src_ip, f.headers.dst_ip,
                   f.headers.udp_src_port, f.headers.udp_dst_port, f.tx_qp.lqpn, f.headers.dst_qpn, 1)
           for f in flows]
    placed = resolver.resolve(engine.now_ns, obs, {})
    engine.close()
    truth = [tuple(engine.link_ids[i] for i in f.path) for f in flows]
    assert [p.paths[0][0] if p else None for p in placed] == truth  # every flow where the switch sent it
    for port, (lo, hi) in shares.items():
        leaf = port.split(":")[0]
        from_leaf = [t for t in truth if t[1].startswith(f"{leaf}:")]
        share = sum(t[1].startswith(f"{port}>") for t in from_leaf) / len(from_leaf)
        assert lo <= share <= hi, (port, share, len(from_leaf))
