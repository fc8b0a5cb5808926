"""Protobuf wire primitives that stages build records from directly (hot paths that skip the message classes)."""

from __future__ import annotations

import numpy as np

_SMALL = tuple(bytes((i,)) for i in range(0x80))
U64 = np.uint64
SHIFTS = np.arange(10, dtype=U64) * U64(7)  # byte k of a varint holds bits 7k..7k+6


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def put_varints(b: np.ndarray, keep: np.ndarray, v: np.ndarray) -> None:
    """Write the varints of ``v`` (uint64, shape S) into ``b`` / ``keep`` (shape (width,) + S), byte
    planes first so every operation runs over whole contiguous arrays: byte k holds bits 7k..7k+6,
    with the continuation bit when a higher byte follows; ``keep`` marks the bytes that belong to the varint."""
    x = v[None] >> SHIFTS[:len(b)].reshape(-1, *(1,) * v.ndim)
    np.copyto(b, x, casting="unsafe")  # the low 8 bits ...
    b &= 0x7F  # ... less the top one
    np.not_equal(x, 0, out=keep)
    b[:-1] |= keep[1:].view(np.uint8) << 7
    keep[0] = True


def varint_width(v: np.ndarray) -> int:
    """Varint bytes of the largest value of ``v`` (at least 1)."""
    return max(1, (int(v.max(initial=0)).bit_length() + 6) // 7)
