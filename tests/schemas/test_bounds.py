"""The shared bounds: parsing a bounded integer never raises nor builds a huge int; rounding saturates."""

from __future__ import annotations

import pytest

from flowtracer.schemas.bounds import INT64_MAX, bounded_int, saturating_round


@pytest.mark.parametrize(("text", "low", "high", "want"), [
    ("42", 0, 100, 42), (" 7 ", 0, 10, 7), ("-1", -1, 10, -1), ("+3", 0, 10, 3),
    ("101", 0, 100, None), ("-2", -1, 10, None), ("", 0, 10, None), ("0x10", 0, 100, None), ("1e3", 0, 10**6, None),
    ("9" * 5000, 0, 2**64, None), ("١٢", 0, 100, None),  # Arabic-Indic digits: str.isdigit, but not ours
    (str(2**64), 0, 2**64 - 1, None), (str(2**64 - 1), 0, 2**64 - 1, 2**64 - 1),
])
def test_bounded_int(text: str, low: int, high: int, want: int | None) -> None:
    assert bounded_int(text, low, high) == want


def test_saturating_round() -> None:
    assert [saturating_round(x) for x in (0.4, 2.6, -5.0, float("nan"), 2.0**64, 1e300)] == [0, 3, 0, 0, INT64_MAX,
                                                                                            INT64_MAX]
    assert saturating_round(2**64 + 2) == INT64_MAX  # an int sum of two 2^63 + 1 flows
