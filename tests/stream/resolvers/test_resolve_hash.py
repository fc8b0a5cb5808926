"""The ``hash`` resolver doubts itself when the leaf uplink counters contradict its model: right model ->
confidence 1; a fabric that hashes with another seed -> the wrongly placed bytes carry low confidence."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fluid import ENGINE_SEED, windows

from flowtracer.schemas.fabric import Fabric
from flowtracer.schemas.topology_generate import FabricSpec, generate
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


def test_state_round_trip(ring: tuple[Fabric, list]) -> None:
    fabric, data = ring
    a = HashResolver(fabric)
    run(a, data[:10])
    b = HashResolver(fabric)
    b.restore(a.state())
    assert b.mismatch == a.mismatch
