"""Per-window rows of numbers by name (link or path), packed: the demo supervisor keeps an hour of them.

A window's link loads or path loads as a dict of tuples cost about 190 bytes a row (dict slot, tuple, boxed
numbers); an hour of windows at 16 hosts was ~1.2 MB/min of the supervisor's growth (issue 27). Here every window
of one kind shares a :class:`Columns` table (name -> column number, the same links and paths window after window),
and a window is one flat ``array('d')`` of ``width`` numbers per column: 8 bytes a number. It reads as a
``Mapping[str, tuple]`` (``rows[name]``, ``in``, ``keys()``, ``items()``, ``values()``), so the summary's scoring
reads it as it read the dicts. Numbers are float64: integer fields (bytes) come back as ``int``, exact below 2**53
(9 PB in a window).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

ABSENT = math.nan
"""The first number of a column a window has no row for."""


@dataclass
class Columns:
    """Names -> column numbers, shared by every window of one kind; ``ints``: which fields of a row are ints."""

    ints: tuple[bool, ...]
    index: dict[str, int] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)

    @property
    def width(self) -> int:
        """Numbers per row."""
        return len(self.ints)

    def column(self, name: str) -> int:
        """The column of ``name``, a new one the first time."""
        col = self.index.get(name)
        if col is None:
            col = self.index[name] = len(self.names)
            self.names.append(name)
        return col


class WindowRows(Mapping[str, tuple[float, ...]]):
    """One window's rows over a shared :class:`Columns`; set a row with ``rows[name] = (numbers...)``."""

    __slots__ = ("columns", "count", "numbers")

    def __init__(self, columns: Columns) -> None:
        self.columns = columns
        self.numbers = array("d")
        self.count = 0

    def __setitem__(self, name: str, row: Sequence[float]) -> None:
        c = self.columns
        if len(row) != c.width:
            raise ValueError(f"row for {name!r} has {len(row)} numbers, not {c.width}")
        at = c.column(name) * c.width
        if len(self.numbers) <= at:  # a column this window has not reached yet: pad with absent rows
            self.numbers.extend([ABSENT] * (at + c.width - len(self.numbers)))
        self.count += math.isnan(self.numbers[at])
        self.numbers[at:at + c.width] = array("d", row)

    def _at(self, name: str) -> int | None:
        col = self.columns.index.get(name)
        if col is None:
            return None
        at = col * self.columns.width
        return at if at < len(self.numbers) and not math.isnan(self.numbers[at]) else None

    def __getitem__(self, name: str) -> tuple[float, ...]:
        at = self._at(name)
        if at is None:
            raise KeyError(name)
        return self._row(at)

    def _row(self, at: int) -> tuple[float, ...]:
        return tuple(int(v) if is_int else v for v, is_int in zip(self.numbers[at:at + self.columns.width],
                                                                    self.columns.ints, strict=True))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._at(name) is not None

    def __iter__(self) -> Iterator[str]:
        w, vals, names = self.columns.width, self.numbers, self.columns.names
        return (names[at // w] for at in range(0, len(vals), w) if not math.isnan(vals[at]))

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"WindowRows({dict(self.items())!r})"
