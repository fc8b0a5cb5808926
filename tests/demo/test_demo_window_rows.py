"""demo/window_rows.py: packed per-window rows read back as the dicts of tuples they replace."""

from __future__ import annotations

import pytest

from flowtracer.demo.window_rows import Columns, WindowRows


def test_rows_read_back_as_a_dict_of_tuples() -> None:
    cols = Columns((True, True, False))
    a, b = WindowRows(cols), WindowRows(cols)
    a["p1"] = (10, 4, 0.5)
    a["p2"] = (2**52 + 1, 0, 1.0)  # bytes stay exact ints
    b["p3"] = (7, 7, 1.0)  # a column window a never had
    a["p1"] = (11, 5, 0.25)  # overwritten, not added
    assert a == {"p1": (11, 5, 0.25), "p2": (2**52 + 1, 0, 1.0)} and len(a) == 2
    assert b == {"p3": (7, 7, 1.0)} and len(b) == 1
    assert isinstance(a["p1"][0], int) and isinstance(a["p1"][2], float)
    assert "p3" not in a and "p1" not in b and "nope" not in a and 3 not in a  # type: ignore[comparison-overlap]
    assert list(a) == ["p1", "p2"] and list(a.values()) == [(11, 5, 0.25), (2**52 + 1, 0, 1.0)]
    assert a.keys() | {"x": 1}.keys() == {"p1", "p2", "x"}
    assert cols.names == ["p1", "p2", "p3"]  # one name per column, shared by the windows
    with pytest.raises(KeyError):
        b["p1"]
    with pytest.raises(ValueError, match="2 numbers, not 3"):
        a["p4"] = (1, 2)
