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
