"""Durations as people write them in configs and on command lines: ``"250ms"``, ``"1s"``, ``"2m"``.

A duration is a non-negative number with an optional unit (``ns``, ``us``, ``µs``, ``ms``, ``s``,
``m``, ``h``, ``d``); without a unit it is seconds, and a bare number (YAML ``1.5``) is seconds too.
:func:`parse_duration` is the one parser; a module that accepts fewer units, allows negative
numbers or names other examples in its message says so through its keyword arguments.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Annotated

from pydantic import BeforeValidator

UNIT_SECONDS: dict[str, float] = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0,
}
"""Seconds per unit."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|h|d)?\s*$")
_NEGATIVE = "{value!r}: a duration cannot be negative"


def text_seconds(text: str, units: Collection[str] = UNIT_SECONDS) -> float | None:
    """Seconds written in *text* (``"250ms"``, ``" 2 s "``, ``"1.5"`` = seconds); None when *text*
    is not a duration or its unit is not one of *units*."""
    m = _DURATION.match(text)
    if not m or (m.group(2) is not None and m.group(2) not in units):
        return None
    return float(m.group(1)) * (UNIT_SECONDS[m.group(2)] if m.group(2) else 1.0)


def parse_duration(
    value: object,
    *,
    hint: str = "e.g. 250ms, 1s, 2m",
    units: Collection[str] = UNIT_SECONDS,
    negative: str | None = _NEGATIVE,
) -> float:
    """Seconds (float) from a number of seconds or a string such as ``"250ms"``.

    Raises ValueError: ``True is not a duration`` for a bool, ``'x' is not a duration (<hint>)``
    for anything else (NaN, a string that is not a duration or has a unit outside *units*), and
    the message *negative* (formatted with ``value``) for a negative number; ``negative=None``
    accepts negative numbers.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float) and value == value:  # NaN is no duration
        if value < 0 and negative is not None:
            raise ValueError(negative.format(value=value))
        return float(value)
    seconds = text_seconds(str(value), units)
    if seconds is None:
        raise ValueError(f"{value!r} is not a duration ({hint})")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]
"""Seconds, written as a duration in YAML (``250ms``, ``1s``) or as a number of seconds."""
