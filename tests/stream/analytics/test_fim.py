"""FIM on hand-computed cases."""

import pytest

from flowtracer.stream.analytics.fim import fabric_fim, fim, imbalance


@pytest.mark.parametrize(("loads", "expected"), [
    ([5, 5], 0.0),                 # even
    ([10, 0], 1.0),                # all on one of two
    ([12, 0, 0, 0], 1.0),          # all on one of four
    ([3, 1], 0.5),                 # |3-2|+|1-2| = 2; 2/(2*4) = 0.25; /(1-1/2) = 0.5
    ([2, 2, 0, 0], 2 / 3),         # dev 4, total 4: 0.5 / 0.75
    ([0, 0], 0.0),                 # idle group: no imbalance to report
    ([7], 0.0),                    # a single member cannot be imbalanced
])
def test_fim_by_hand(loads: list[int], expected: float) -> None:
    assert fim(loads) == pytest.approx(expected)


def test_fim_is_scale_free_and_bounded() -> None:
    assert fim([1, 2, 3]) == pytest.approx(fim([1e12, 2e12, 3e12]))
    assert 0.0 <= fim([1, 0, 0, 9, 3]) <= 1.0


def test_companions() -> None:
    im = imbalance([30, 10])
    assert im.max_mean_ratio == pytest.approx(1.5)
    assert im.cv == pytest.approx(0.5)  # std 10 / mean 20
    assert im.total == 40


def test_fabric_fim_is_byte_weighted_over_groups_that_carried_traffic() -> None:
    # (1.0 * 300 + 0.0 * 100) / 400; the idle group does not dilute it.
    assert fabric_fim([1.0, 0.0, 0.5], [300, 100, 0]) == pytest.approx(0.75)
    assert fabric_fim([0.3], [0]) == 0.0


@pytest.mark.parametrize(("loads", "weights", "expected"), [
    ([200, 100], [2, 1], 0.0),      # 2:1 weighted, carrying 2:1: balanced
    ([150, 150], [2, 1], 0.25),     # the same group carrying 1:1: dev 50+50 = 100; 100/600 / (1-1/3) = 0.25
    ([0, 300], [2, 1], 1.0),        # everything on the smaller-share member
    ([300, 0], [2, 1], 0.5),        # everything on the larger one: 1/3 must move, of at most 2/3
    ([5, 5], [1, 1], 0.0),          # equal weights are plain ECMP
    ([3, 1], [7, 7], 0.5),          # ... whatever the common weight
    ([40, 20, 20], [2, 1, 1], 0.0),
    ([0, 0], [2, 1], 0.0),          # idle
    ([9], [3], 0.0),                # one member
])
def test_weighted_fim_by_hand(loads: list[int], weights: list[int], expected: float) -> None:
    assert fim(loads, weights) == pytest.approx(expected)


def test_unweighted_is_equal_weights() -> None:
    for loads in ([1, 2, 3], [10, 0, 0, 5], [3, 1]):
        assert fim(loads) == pytest.approx(fim(loads, [1] * len(loads)))
        assert imbalance(loads) == imbalance(loads, [4] * len(loads))


def test_weighted_companions_are_relative_to_the_fair_share() -> None:
    im = imbalance([200, 100], [2, 1])
    assert (im.fim, im.max_mean_ratio, im.cv, im.total) == (0.0, pytest.approx(1.0), pytest.approx(0.0), 300)
    assert imbalance([150, 150], [2, 1]).max_mean_ratio == pytest.approx(1.5)  # 150 on a 100 share


@pytest.mark.parametrize("weights", [[1], [1, 0], [2, -1]])
def test_bad_weights_are_refused(weights: list[int]) -> None:
    with pytest.raises(ValueError, match="weight"):
        fim([1, 2], weights)
