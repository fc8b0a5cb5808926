"""Bounds every stage shares (pure): what fits the wire and the store, what no real source reports, and arithmetic
that saturates.

Protobuf ``uint64`` fields accept up to 2^64 - 1 and raise ``ValueError`` beyond; InfluxDB integers are signed
64-bit. Counts built from input records (sums of bytes, products of calls and sizes) are clamped here instead of
overflowing, so that one implausible record can never make an encoder raise.
"""

from __future__ import annotations

INT64_MAX = 2**63 - 1
"""The largest signed 64-bit integer: InfluxDB's integer field limit."""
INT32_MAX = 2**31 - 1
"""The largest ``int32`` protobuf value (ranks, nranks)."""

MAX_CALL_BYTES = 1 << 40
"""One NCCL call's bytes (1 TiB; count x datatype size, x nranks for AllGather and ReduceScatter): a call's buffers
live in one GPU's memory (288 GB on the largest today). The agent skips a COLL line beyond it, the processor
dead-letters a profile beyond it."""
MAX_NRANKS = 1 << 24
"""Ranks of one NCCL communicator (and so the largest rank, peer or root a line may name)."""
MAX_PROFILES = 1 << 14
"""Collective profiles of one host window: the agent aggregates at most this many (pid, rank, communicator,
operation, datatype, count) keys per window, the processor dead-letters a FlowBatch with more profiles."""


def saturating_round(x: float) -> int:
    """``round(x)`` clamped to [0, 2^63 - 1]: a count of bytes or packets that fits both protobuf and InfluxDB."""
    if x != x:  # NaN
        return 0
    return INT64_MAX if x >= INT64_MAX else 0 if x <= 0 else round(x)


def bounded_int(text: str, low: int, high: int) -> int | None:
    """The decimal integer ``text`` if it lies in [``low``, ``high``], else None (never raises, never builds a huge
    int from a long string: more digits than ``high`` has is out of range without parsing)."""
    s = text.strip()
    digits = s[1:] if s[:1] in "+-" else s
    if not digits.isdigit() or not digits.isascii() or len(digits) > len(str(max(abs(low), abs(high)))):
        return None
    n = int(s)
    return n if low <= n <= high else None
