"""Log the first failure of each cause, count the rest: one helper for every collector boundary."""

from __future__ import annotations

from collections.abc import Hashable


class OncePerCause:
    """Remembers the causes seen; ``first(cause)`` is True only the first time (then log it)."""

    def __init__(self) -> None:
        self._seen: set[Hashable] = set()

    def first(self, cause: Hashable) -> bool:
        if cause in self._seen:
            return False
        self._seen.add(cause)
        return True
