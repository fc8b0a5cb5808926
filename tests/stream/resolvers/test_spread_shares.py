"""A spread flow's path shares from the counters: per branching hop, by the branches' residual bytes."""

from __future__ import annotations

import pytest

from flowtracer.stream.resolvers.spread_shares import spread_shares

# Two tiers of branching: leaf -> spine a|b, then spine a -> super x|y; b has one way on.
PATHS = (("up", "a", "ax", "down"), ("up", "a", "ay", "down"), ("up", "b", "bz", "down"))


def test_each_hop_splits_by_its_branches_bytes() -> None:
    got = spread_shares(PATHS, {"a": 300.0, "b": 100.0, "ax": 100.0, "ay": 300.0, "bz": 5.0})
    assert got == pytest.approx((0.75 * 0.25, 0.75 * 0.75, 0.25))
    assert sum(got) == pytest.approx(1.0)


def test_unmeasured_or_idle_branches_split_equally() -> None:
    assert spread_shares(PATHS, {}) == pytest.approx((0.25, 0.25, 0.5))
    assert spread_shares(PATHS, {"a": 10.0}) == pytest.approx((0.25, 0.25, 0.5))  # b unmeasured: no comparison
    assert spread_shares(PATHS, {"a": 0.0, "b": 0.0, "ax": 0.0, "ay": 0.0}) == pytest.approx((0.25, 0.25, 0.5))


def test_one_path_and_none() -> None:
    assert spread_shares(PATHS[:1], {"a": 1.0}) == (1.0,)
    assert spread_shares((), {}) == ()
