"""Protobuf wire bytes of CounterBatch entries, encoded on columns instead of one message per counter (pure).

A serialized message is its set fields in field-number order, each a tag then a varint or a length
and bytes; a ``repeated`` field is one tag + length + element per element. So the ``interfaces``
(field 8) of a CounterBatch are, per interface, ``0x42 <length>`` then

* ``pre``: fields 1-3 (name, oper status, speed), fixed while the interface tables do not change
  (serialized once by protobuf itself and cached by the caller),
* the interval (field 4), a varint of this instant,
* ``mid``: fields 5-6 (last clear, last change), cached like ``pre``,
* one ``Counter`` per sampled counter (fields 7-16): tag, length, then value / delta / status
  varints, each left out when 0 (proto3); an empty Counter is still written (tag + length 0),
  as upb writes a sub-message that was set.

Next hops (field 9) are the same with ``pre`` = fields 1-5 and the interval in field 6; there is
no ``mid``. Everything here works on whole arrays: rows (interfaces or next hops) x counters.
``tests/collectors/gnmi/test_gnmi_counter_wire.py`` checks the bytes against
``CounterBatch.SerializeToString`` and the assembler's general path.
"""

from __future__ import annotations

import functools

import numpy as np

from flowtracer.schemas.wire import U64, put_varints, varint_width


def scalar_field(tag: int, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A varint field (one-byte ``tag``) per row, left out where ``v`` is 0: (bytes, keep, length)."""
    w = varint_width(v)
    b = np.empty((1 + w, *v.shape), np.uint8)
    keep = np.empty(b.shape, bool)
    b[0] = tag
    put_varints(b[1:], keep[1:], v)
    keep[0] = v != 0
    keep[1:] &= keep[0]
    return np.moveaxis(b, 0, -1), np.moveaxis(keep, 0, -1), keep.sum(axis=0)


@functools.cache
def tag_matrix(tags: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Field tags as a zero-padded (len(tags), longest) matrix, its keep mask and the lengths (int64)."""
    tw = max(map(len, tags))
    b = np.zeros((len(tags), tw), np.uint8)
    keep = np.zeros((len(tags), tw), bool)
    for j, t in enumerate(tags):
        b[j, :len(t)] = np.frombuffer(t, np.uint8)
        keep[j, :len(t)] = True
    return b, keep, keep.sum(axis=1).astype(np.int64)


def counter_cells(tags: tuple[bytes, ...], value: np.ndarray, delta: np.ndarray, status: np.ndarray,
                  present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Counter sub-messages of a (rows, counters) grid: (bytes (rows, counters * w), keep, bytes per row).

    ``tags[j]``: the field tag of counter column j (1 or 2 bytes); ``value``/``delta`` uint64,
    ``status`` int (< 128); ``present``: where a Counter is written at all. A Counter is its tag,
    its length (< 128: one byte), then value (field 1), delta (2), status (3), each if not 0.
    """
    rows, cols = value.shape
    tb, tk, _ = tag_matrix(tuple(tags))
    tw, wv, wd = tb.shape[1], varint_width(value), varint_width(delta)
    b = np.empty((tw + 1 + (1 + wv) + (1 + wd) + 2, rows, cols), np.uint8)  # byte planes first
    keep = np.empty(b.shape, bool)
    b[:tw] = tb.T[:, None, :]
    keep[:tw] = tk.T[:, None, :]
    o = tw + 1
    for tag, v, w in ((0x08, value, wv), (0x10, delta, wd)):
        b[o] = tag
        put_varints(b[o + 1:o + 1 + w], keep[o + 1:o + 1 + w], v)
        np.not_equal(v, 0, out=keep[o])
        keep[o + 1:o + 1 + w] &= keep[o]
        o += 1 + w
    b[o] = 0x18
    b[o + 1] = status
    np.not_equal(status, 0, out=keep[o])
    keep[o + 1] = keep[o]
    np.sum(keep[tw + 1:], axis=0, out=b[tw], dtype=np.uint8)
    keep[tw] = True
    keep &= present
    lens = keep.sum(axis=(0, 2))
    return b.transpose(1, 2, 0).reshape(rows, -1), keep.transpose(1, 2, 0).reshape(rows, -1), lens


class FixedBytes:
    """Cached bytes of one field group per row, as a zero-padded uint8 matrix plus keep mask."""

    __slots__ = ("bytes", "keep", "lens")

    def __init__(self, rows: list[bytes]) -> None:
        w = max(map(len, rows), default=0)
        self.bytes = np.zeros((len(rows), w), np.uint8)
        self.keep = np.zeros((len(rows), w), bool)
        for r, b in enumerate(rows):
            self.bytes[r, :len(b)] = np.frombuffer(b, np.uint8)
            self.keep[r, :len(b)] = True
        self.lens = self.keep.sum(axis=1)


def repeated_messages(tag: int, emit: np.ndarray, parts: list[tuple[np.ndarray, np.ndarray]],
                      body_len: np.ndarray) -> bytes:
    """One ``tag <length> body`` per row where ``emit``; a body is the kept bytes of ``parts``
    (each (bytes, keep) with one row per message), in order; ``body_len`` its length."""
    if not emit.any():
        return b""
    lens = body_len.astype(U64)
    head = np.empty((len(emit), 1 + varint_width(lens)), np.uint8)
    head_keep = np.empty(head.shape, bool)
    head[:, 0] = tag
    head_keep[:, 0] = True
    put_varints(head.T[1:], head_keep.T[1:], lens)
    m = np.concatenate([head] + [b for b, _ in parts], axis=1)
    keep = np.concatenate([head_keep] + [k for _, k in parts], axis=1)
    keep &= emit[:, None]
    return m[keep].tobytes()
