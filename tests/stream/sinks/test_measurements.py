"""The measurement definitions (pure): inconsistent ones are refused, and the Markdown table shows each key once."""

from __future__ import annotations

import pytest

from flowtracer.stream.sinks.measurements import LINK_LOAD, Measurement, markdown_table


def test_definitions_reject_inconsistent_schemas() -> None:
    with pytest.raises(ValueError, match="names must be"):
        Measurement("Bad Name", "X", tags=(), fields={"v": "int"}, units={"v": "count"})
    with pytest.raises(ValueError, match="every key needs a unit"):
        Measurement("m", "X", tags=("t",), fields={"v": "uint"}, units={"v": "count", "t": "id"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="used twice"):
        Measurement("m", "X", tags=("v",), fields={"v": "int"}, units={"v": "count"})


def test_markdown_table_has_a_row_per_key_and_names_the_measurement_once() -> None:
    rows = markdown_table([LINK_LOAD]).splitlines()[2:]
    assert len(rows) == len(LINK_LOAD.tags) + len(LINK_LOAD.fields)
    assert rows[0] == "| `link_load` | `link` | tag | link id |  |"
    assert rows[4] == "|  | `measured_bytes` | int field | bytes | measured_valid=0 |"
