"""The infer solver's pieces on small synthetic evidence whose answer is known (pure numpy, no fabric)."""

from __future__ import annotations

import numpy as np
import pytest

from flowtracer.stream.resolvers.infer.config import InferConfig
from flowtracer.stream.resolvers.infer.solver import (
    cold_solve,
    evaluate,
    insert_flows,
    interchangeable_classes,
    local_search,
    member_posterior,
    move_costs,
    project_rows_to_simplex,
    relax_assignment,
)


def evidence(assign: list[int], members: int, windows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """x: windows x flows of random byte shares (some idle); y = x @ onehot(assign)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.2, 1.0, (windows, len(assign))) * (rng.random((windows, len(assign))) > 0.2)
    onehot = np.zeros((len(assign), members))
    onehot[np.arange(len(assign)), assign] = 1.0
    return x, x @ onehot


TRUTHS = {
    "2 members, 4 flows": ([0, 1, 1, 0], 2),
    "4 members, 6 flows": ([0, 1, 2, 3, 3, 1], 4),
    "4 members, one idle member": ([0, 0, 2, 3, 2, 3, 0], 4),
    "8 members, 12 flows": ([0, 1, 2, 3, 4, 5, 6, 7, 0, 2, 4, 6], 8),
}


@pytest.mark.parametrize("name", list(TRUTHS))
def test_cold_solve_finds_the_assignment(name: str) -> None:
    assign, m = TRUTHS[name]
    x, y = evidence(assign, m, windows=3 * len(assign))
    fit, z = cold_solve(x, y, np.ones_like(y), InferConfig())
    assert fit.a.tolist() == assign
    assert fit.sse == pytest.approx(0.0, abs=1e-12)
    assert np.allclose(z.sum(axis=1), 1.0) and (z >= -1e-12).all()


@pytest.mark.parametrize("name", list(TRUTHS))
def test_relaxation_puts_most_weight_on_the_true_member(name: str) -> None:
    assign, m = TRUTHS[name]
    x, y = evidence(assign, m, windows=3 * len(assign), seed=1)
    z = relax_assignment(x, y, np.ones_like(y), iters=300, rho=0.01)
    assert np.argmax(z, axis=1).tolist() == assign


def test_relaxation_spreads_flows_the_evidence_cannot_tell_apart() -> None:
    # Two flows with the same bytes in every window, one on each of 2 members: any split fits.
    x = np.array([[1.0, 1.0], [0.5, 0.5], [0.3, 0.3], [0.8, 0.8]])
    y = np.column_stack([x[:, 0], x[:, 1]])
    z = relax_assignment(x, y, np.ones_like(y), iters=200, rho=0.01)
    assert z == pytest.approx(np.full((2, 2), 0.5), abs=1e-3)  # the uniform start is a solution: kept
    assert interchangeable_classes(x, 1e-9).tolist() == [0, 0]


def test_local_search_repairs_a_wrong_start_by_moves_and_swaps() -> None:
    assign, m = [0, 1, 2, 0, 1, 2], 3
    x, y = evidence(assign, m, windows=12, seed=2)
    mask = np.ones_like(y)
    fit, steps = local_search(x, y, mask, np.array([1, 0, 2, 0, 1, 2]), 1e-12, swaps=True)  # two flows swapped
    assert fit.a.tolist() == assign and steps >= 1
    fit, _ = local_search(x, y, mask, np.array([1, 1, 2, 0, 1, 2]), 1e-12, swaps=False)  # one misplaced
    assert fit.a.tolist() == assign
    # A margin larger than any improvement keeps the start.
    fit, steps = local_search(x, y, mask, np.array([1, 1, 2, 0, 1, 2]), 1e9, swaps=True)
    assert fit.a.tolist() == [1, 1, 2, 0, 1, 2] and steps == 0


def test_missing_counters_carry_no_evidence() -> None:
    assign, m = [0, 1, 1, 0, 2], 3
    x, y = evidence(assign, m, windows=15, seed=3)
    mask = np.ones_like(y)
    mask[::3, 2] = 0.0  # member 2's counter missing every third window
    y = y.copy()
    y[mask == 0] = 123.0  # garbage where masked: must not matter
    fit, _ = cold_solve(x, y, mask, InferConfig())
    assert fit.a.tolist() == assign


def test_move_costs_and_posterior() -> None:
    assign, m = [0, 1, 1, 0], 2
    x, y = evidence(assign, m, windows=8, seed=4)
    fit = evaluate(x, y, np.ones_like(y), np.array(assign))
    d = move_costs(fit)
    assert d[np.arange(4), assign] == pytest.approx(0.0)
    assert (d[np.arange(4), 1 - np.array(assign)] > 0).all()  # every move away from the truth costs
    for k in range(4):  # the cost formula equals re-evaluating with the flow moved
        moved = np.array(assign)
        moved[k] = 1 - moved[k]
        assert d[k, moved[k]] == pytest.approx(evaluate(x, y, np.ones_like(y), moved).sse)
    post = member_posterior(d, sigma2=1e-3)
    assert (post > 0.99).all()
    assert member_posterior(np.zeros((3, 4)), 1.0) == pytest.approx(np.full(3, 0.25))  # no evidence: 1/m


def test_insert_flows_and_simplex_projection() -> None:
    assign, m = [0, 1, 2, 2], 3
    x, y = evidence(assign, m, windows=10, seed=5)
    a = insert_flows(x, y, np.ones_like(y), np.array([0, 1, -1, -1]), np.array([2, 3]))
    assert a.tolist() == assign
    v = np.array([[0.2, 0.2, 0.6], [5.0, 0.0, 0.0], [-1.0, 0.5, 0.5], [0.1, 0.1, 0.1]])
    p = project_rows_to_simplex(v)
    assert p == pytest.approx(np.array([[0.2, 0.2, 0.6], [1.0, 0, 0], [0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]]))
