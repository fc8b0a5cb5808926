"""The one duration parser: what people write in configs, and what it refuses."""

from __future__ import annotations

import pytest

from flowtracer.plumbing.durations import Duration, parse_duration, text_seconds


@pytest.mark.parametrize(("value", "seconds"), [
    ("250ms", 0.25), ("1s", 1.0), ("2m", 120.0), ("1h", 3600.0), ("500us", 5e-4), ("5µs", 5e-6), ("3ns", 3e-9),
    (" 2 s ", 2.0), ("1.5m", 90.0), ("10", 10.0), (1.5, 1.5), (3, 3.0), (0, 0.0),
])
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize(("value", "message"), [
    ("fast", "'fast' is not a duration (e.g. 250ms, 1s, 2m)"),
    ("3s7", "'3s7' is not a duration (e.g. 250ms, 1s, 2m)"),
    ("-1s", "'-1s' is not a duration (e.g. 250ms, 1s, 2m)"),
    ("", "'' is not a duration (e.g. 250ms, 1s, 2m)"),
    (None, "None is not a duration (e.g. 250ms, 1s, 2m)"),
    (float("nan"), "nan is not a duration (e.g. 250ms, 1s, 2m)"),
    (True, "True is not a duration"),
    (-1, "-1: a duration cannot be negative"),
])
def test_bad_durations_are_named(value: object, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_duration(value)
    assert str(err.value) == message


def test_units_hint_and_negative_are_the_callers() -> None:
    assert text_seconds("5us", units=("ms", "s")) is None and text_seconds("5ms", units=("ms", "s")) == 0.005
    with pytest.raises(ValueError, match=r"^'5us' is not a duration \(examples: 1s\)$"):
        parse_duration("5us", hint="examples: 1s", units=("ms", "s"))
    with pytest.raises(ValueError, match=r"^duration must not be negative, got -2$"):
        parse_duration(-2, negative="duration must not be negative, got {value}")
    assert parse_duration(-2, negative=None) == -2.0


def test_duration_type_in_a_model() -> None:
    from pydantic import BaseModel, ValidationError

    class M(BaseModel):
        timeout: Duration = 1.0

    assert M.model_validate({"timeout": "250ms"}).timeout == 0.25
    with pytest.raises(ValidationError, match="'soon' is not a duration"):
        M.model_validate({"timeout": "soon"})
