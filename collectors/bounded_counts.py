"""Counts by a key whose set of distinct keys is bounded (pure): the rule both collectors use to count what they
could not read by its shape (gNMI paths in ``gnmi/counters/shapes.py``, NCCL log lines in
``agent/sources/nccl_shapes.py``), so that a source printing endless new shapes cannot grow a dict, a log or a
metric's label set without limit."""

from __future__ import annotations


def count_bounded(counts: dict[str, int], key: str, n: int, limit: int, overflow: str) -> bool:
    """Add ``n`` to ``counts[key]`` if ``key`` is counted already or fewer than ``limit`` keys other than
    ``overflow`` are; otherwise to ``counts[overflow]``. True when ``key`` was counted under its own name."""
    if key in counts:
        counts[key] += n
        return True
    if len(counts) - (overflow in counts) < limit:
        counts[key] = n
        return True
    counts[overflow] = counts.get(overflow, 0) + n
    return False
