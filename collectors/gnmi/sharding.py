"""Which collector process owns which target: rendezvous (highest-random-weight) hashing.

``owner(name, n)`` is the shard in ``0..n-1`` with the highest hash of (target, shard). Every
process computes it alone from the target list, so N processes started with ``--shard i/N``
cover every target exactly once, and going from N to N+1 shards moves only ~1/(N+1) of the
targets (plain ``hash % N`` would move almost all).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def _weight(name: str, shard: int) -> int:
    return int.from_bytes(hashlib.blake2b(f"{shard}\0{name}".encode(), digest_size=8).digest(), "big")


def owner(name: str, count: int) -> int:
    """The shard (0-based) that owns target ``name`` among ``count`` shards."""
    if count < 1:
        raise ValueError(f"shard count must be at least 1, not {count}")
    return max(range(count), key=lambda s: _weight(name, s))


def select(items: Iterable[T], index: int, count: int, name: Callable[[T], str] = lambda t: t.name) -> list[T]:  # type: ignore[attr-defined]
    """The items whose ``name(item)`` shard ``index`` of ``count`` owns, in input order."""
    if not 0 <= index < count:
        raise ValueError(f"shard {index}/{count}: the index must be in 0..{count - 1}")
    return [t for t in items if owner(name(t), count) == index]


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` -> (i, N); ValueError says what is wrong."""
    a, sep, b = text.partition("/")
    if not sep or not a.strip().isdigit() or not b.strip().isdigit():
        raise ValueError(f"{text!r} is not i/N (e.g. 0/2)")
    i, n = int(a), int(b)
    if n < 1 or i >= n:
        raise ValueError(f"{text!r}: need N >= 1 and 0 <= i < N")
    return i, n
