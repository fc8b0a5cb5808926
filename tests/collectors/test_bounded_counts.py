"""The one bounded-count rule both collectors count unknown shapes with."""

from flowtracer.collectors.bounded_counts import count_bounded


def test_keys_beyond_the_limit_go_to_the_overflow_and_known_keys_keep_counting() -> None:
    counts: dict[str, int] = {}
    assert [count_bounded(counts, k, 1, 2, "more") for k in "abcab"] == [True, True, False, True, True]
    assert count_bounded(counts, "d", 5, 2, "more") is False
    assert counts == {"a": 2, "b": 2, "more": 6}


def test_the_overflow_key_does_not_take_a_place_of_its_own() -> None:
    counts = {"more": 3}
    assert count_bounded(counts, "a", 1, 1, "more") and not count_bounded(counts, "b", 1, 1, "more")
    assert counts == {"more": 4, "a": 1}
