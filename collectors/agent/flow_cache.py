"""Per QP generation, the fixed bytes of its ``Flow`` message, so a window serializes only its numbers.

A QP generation's addresses, state, comm and NCCL tag rarely change between windows: the host
pipeline builds their bytes once (``FlowTemplate``), keeps them in a ``FlowCache`` whose rows stay
aligned with the QP tracker's rows, and rebuilds a row only when what it was built from changed.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from flowtracer.collectors.agent.flow_wire import FlowParts


def is_range(idx: np.ndarray, n: int) -> bool:
    """``idx`` is 0, 1, ..., n - 1."""
    return len(idx) == n and (not n or (idx[0] == 0 and idx[-1] == n - 1 and bool((np.diff(idx) == 1).all())))


def intern_id(ids: dict, value: object) -> int:
    """A small int per distinct value (stable for the pipeline's life)."""
    i = ids.get(value)
    if i is None:
        i = ids[value] = len(ids)
    return i


class FlowTemplate(NamedTuple):
    """The fixed bytes of one QP generation's Flow: fields 1-13, fields 20-23, and (NCCL-tagged
    QPs) fields 20-22 and the tag's body apart, to splice the collective in."""

    pre: bytes
    suf: bytes
    nccl: tuple[bytes, bytes] | None


class FlowCache:
    """Per QP generation (rows aligned with ``QpTracker.rows``): its fixed Flow bytes and what
    they were built from (destination IP, source address, NCCL tag as interned ids; state, comm)."""

    __slots__ = ("addr", "comm", "dst", "nccl", "parts", "state", "tag", "valid")

    def __init__(self, n: int = 0) -> None:
        self.parts = FlowParts(n)
        self.valid = np.zeros(n, bool)
        self.dst = np.full(n, -1, np.int64)
        self.addr = np.full(n, -1, np.int64)
        self.tag = np.full(n, -1, np.int64)
        self.state = np.full(n, None, dtype=object)
        self.comm = np.full(n, None, dtype=object)
        self.nccl = np.full(n, None, dtype=object)

    def __len__(self) -> int:
        return len(self.valid)

    def take(self, idx: np.ndarray) -> FlowCache:
        """Rows ``idx`` of the previous state; -1 (a new generation) gives an empty row."""
        n = len(idx)
        if n == len(self) and is_range(idx, n):
            return self  # the same QPs in the same order
        if not len(self):
            return FlowCache(n)
        out = FlowCache()
        missing = idx < 0
        i = np.where(missing, 0, idx)
        out.parts = self.parts.take(idx)
        out.valid = self.valid[i] & ~missing
        for k in ("dst", "addr", "tag", "state", "comm", "nccl"):
            setattr(out, k, getattr(self, k)[i])
        return out
