"""Max-min fairness by progressive filling (fabric/maxmin.py), on cases small enough to solve by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flowtracer.fabric.maxmin import max_min_rates


def solve(groups: list[list[list[int]]], capacity: list[float], demand: list[float] | None = None) -> list[float]:
    """``groups[g]`` = list of flows, each a list of link indexes."""
    eg, el = [], []
    for g, flows in enumerate(groups):
        for path in flows:
            for link in path:
                eg.append(g)
                el.append(link)
    rates = max_min_rates(np.array(eg, dtype=np.intp), np.array(el, dtype=np.intp), np.array(capacity, float),
                          len(groups), None if demand is None else np.array(demand, float))
    return [float(r) for r in rates]


def test_two_flows_share_one_link_equally() -> None:
    assert solve([[[0]], [[0]]], [10.0]) == pytest.approx([5.0, 5.0])


def test_parking_lot() -> None:
    # flow 0 crosses links 0 and 1, flow 1 only link 0, flow 2 only link 1: everyone gets half.
    assert solve([[[0, 1]], [[0]], [[1]]], [10.0, 10.0]) == pytest.approx([5.0, 5.0, 5.0])


def test_a_flow_bottlenecked_elsewhere_leaves_its_share_to_others() -> None:
    # flow 1 is held to 2 by link 1, so flow 0 gets the rest of link 0.
    assert solve([[[0]], [[0, 1]]], [10.0, 2.0]) == pytest.approx([8.0, 2.0])


def test_demand_caps_a_flow_and_frees_capacity() -> None:
    assert solve([[[0]], [[0]]], [10.0], [3.0, math.inf]) == pytest.approx([3.0, 7.0])


def test_coupled_group_runs_at_its_slowest_edge() -> None:
    # A ring of two flows (one on link 0, one on link 1) shares link 0 with a lone flow; link 1 is
    # small, so the ring is held at 4 on both edges and the lone flow gets 10 - 4.
    assert solve([[[0], [1]], [[0]]], [10.0, 4.0]) == pytest.approx([4.0, 6.0])


def test_two_flows_of_one_group_on_one_link_count_twice() -> None:
    # Both flows of group 0 cross link 0 (cap 12) with one flow of group 1: 3 flows, 4 each.
    assert solve([[[0], [0]], [[0]]], [12.0]) == pytest.approx([4.0, 4.0])


def test_stalled_and_dead_links_get_nothing() -> None:
    assert solve([[[0]], [[1]]], [10.0, 0.0], [0.0, math.inf]) == pytest.approx([0.0, 0.0])


def test_allocation_is_feasible_and_every_flow_has_a_bottleneck() -> None:
    rng = np.random.default_rng(5)
    n_links, n_groups = 12, 30
    groups = [[sorted(rng.choice(n_links, size=rng.integers(1, 4), replace=False).tolist())
               for _ in range(rng.integers(1, 3))] for _ in range(n_groups)]
    cap = rng.uniform(1, 10, n_links).tolist()
    rates = solve(groups, cap)
    load = np.zeros(n_links)
    for g, flows in enumerate(groups):
        for path in flows:
            for link in path:
                load[link] += rates[g]
    assert (load <= np.array(cap) * (1 + 1e-9)).all()
    for g, flows in enumerate(groups):
        # Max-min: some link of the group is full, and no group on it gets more than this one.
        links = {link for path in flows for link in path}
        assert any(load[link] >= cap[link] * (1 - 1e-9)
                   and all(rates[h] <= rates[g] * (1 + 1e-9) for h, fl in enumerate(groups)
                           if link in {x for p in fl for x in p}) for link in links)


def test_weights_model_a_flow_split_over_two_paths() -> None:
    # One flow sprayed evenly over links 0 and 1 (weight 0.5 each) runs at the sum of both: 20.
    rates = max_min_rates(np.array([0, 0], dtype=np.intp), np.array([0, 1], dtype=np.intp), np.array([10.0, 10.0]),
                          1, entry_weight=np.array([0.5, 0.5]))
    assert rates.tolist() == pytest.approx([20.0])


def test_a_split_flow_is_held_by_its_busier_half() -> None:
    # Group 0 sprays evenly over links 0 and 1; group 1 sits on link 0. Link 0 carries 0.5 r0 + r1 and fills
    # first at r0 = r1 = 10 / 1.5; the even split stops group 0 from using what is left on link 1.
    rates = max_min_rates(np.array([0, 0, 1], dtype=np.intp), np.array([0, 1, 0], dtype=np.intp),
                          np.array([10.0, 10.0]), 2, entry_weight=np.array([0.5, 0.5, 1.0]))
    assert rates.tolist() == pytest.approx([20 / 3, 20 / 3])


def test_unit_weights_change_nothing() -> None:
    eg, el, cap = np.array([0, 0, 1], dtype=np.intp), np.array([0, 1, 0], dtype=np.intp), np.array([10.0, 4.0])
    plain = max_min_rates(eg, el, cap, 2)
    assert max_min_rates(eg, el, cap, 2, entry_weight=np.ones(3)).tolist() == pytest.approx(plain.tolist())
