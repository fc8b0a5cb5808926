"""Protobuf wire bytes of ``Flow`` records, assembled on columns instead of one message per QP.

A serialized message is its set fields in field-number order, each as tag + value (varints for
integers, length + bytes for strings and embedded messages), and a ``repeated Flow flows = 8`` is
one ``0x42 <varint length> <Flow bytes>`` per element. So a ``FlowBatch`` is the bytes of its
fields 1-7, then every Flow so framed, then fields 9-10, and a Flow is

* ``pre``: fields 1-13 (device, port, netdev, QP numbers, type, state, generation, 5-tuple, DSCP),
  fixed for a QP generation (cached as bytes, serialized once by protobuf itself),
* the window's numbers, fields 14-19 (bytes, packets, byte source, error bound), encoded here on
  whole columns with numpy (proto3: a field that is 0 is left out),
* ``suf``: fields 20-23 (pid, comm, job id, NCCL tag), cached like ``pre`` (the NCCL tag's
  collective and op count, which change per window, are spliced in by the caller).

This module only encodes; the equivalence with ``FlowBatch.SerializeToString`` is tested byte for
byte (tests/collectors/agent/test_flow_wire_equivalence.py).
"""

from __future__ import annotations

import numpy as np

_U64 = np.uint64
FLOWS_TAG = 0x42  # FlowBatch.flows: field 8, length-delimited
NCCL_TAG = b"\xba\x01"  # Flow.nccl: field 23, length-delimited
# Flow fields 14-19 (uint64 / enum varints): tx_bytes, rx_bytes, tx_packets, rx_packets, byte_source,
# byte_error_bound
WINDOW_FIELD_TAGS = (b"\x70", b"\x78", b"\x80\x01", b"\x88\x01", b"\x90\x01", b"\x98\x01")


def _fields_matrix(values: np.ndarray, tags: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Varint fields of each row: (bytes (n, C) uint8, keep mask (n, C)); the kept bytes of a row,
    in order, are its fields. ``values`` (n, F) uint64, one column per field with tag ``tags[f]``;
    a 0 is not written (proto3)."""
    n, nf = values.shape
    present = values != 0
    used = present.any(axis=0)
    top = values.max(axis=0) if n else np.zeros(nf, _U64)
    col_field, col_shift, col_kind, col_byte = [], [], [], []  # kind: 0 varint byte k > 0, 1 first, 2 tag
    for f in range(nf):
        if not used[f]:
            continue
        for b in tags[f]:
            col_field.append(f)
            col_shift.append(0)
            col_kind.append(2)
            col_byte.append(b)
        for k in range(max(1, (int(top[f]).bit_length() + 6) // 7)):
            col_field.append(f)
            col_shift.append(7 * k)
            col_kind.append(1 if k == 0 else 0)
            col_byte.append(0)
    if not col_field:
        return np.zeros((n, 0), np.uint8), np.zeros((n, 0), bool)
    cf = np.array(col_field)
    kind = np.array(col_kind)
    x = values[:, cf] >> np.array(col_shift, _U64)  # byte k of a varint: 7 bits of v >> 7k ...
    b = (x & _U64(0x7F)).astype(np.uint8)
    b |= (x > _U64(0x7F)).view(np.uint8) << 7  # ... with the continuation bit when more follow
    tag_cols = kind == 2
    b[:, tag_cols] = np.array(col_byte, np.uint8)[tag_cols]
    keep = (x != 0) | (kind > 0)  # a varint has its first byte and every byte up to its top bits
    keep &= present[:, cf]
    return b, keep


class FlowParts:
    """The cached ``pre`` / ``suf`` bytes of Flow records, one row each, as zero-padded uint8
    matrices (so rows can be gathered and encoded without a Python object per row)."""

    __slots__ = ("pre", "pre_keep", "pre_len", "suf", "suf_keep", "suf_len")

    def __init__(self, n: int = 0) -> None:
        self.pre = np.zeros((n, 0), np.uint8)
        self.pre_keep = np.zeros((n, 0), bool)  # column < length, per row
        self.pre_len = np.zeros(n, np.int64)
        self.suf = np.zeros((n, 0), np.uint8)
        self.suf_keep = np.zeros((n, 0), bool)
        self.suf_len = np.zeros(n, np.int64)

    def __len__(self) -> int:
        return len(self.pre_len)

    def take(self, idx: np.ndarray) -> FlowParts:
        """Rows ``idx`` (a copy); -1 gives an empty row."""
        if not len(self):
            return FlowParts(len(idx))
        out = FlowParts()
        missing = idx < 0
        i = np.where(missing, 0, idx)
        out.pre, out.pre_keep, out.pre_len = self.pre[i], self.pre_keep[i], self.pre_len[i]
        out.suf, out.suf_keep, out.suf_len = self.suf[i], self.suf_keep[i], self.suf_len[i]
        if missing.any():
            for a in (out.pre, out.pre_keep, out.pre_len, out.suf, out.suf_keep, out.suf_len):
                a[missing] = 0
        return out

    def set(self, rows: list[int], pre: list[bytes] | None, suf: list[bytes]) -> None:
        """Store the bytes of ``rows`` (``pre`` None: keep those rows' ``pre``)."""
        if not rows:
            return
        if pre is not None:
            self.pre, self.pre_keep = _set_rows(self.pre, self.pre_keep, self.pre_len, rows, pre)
        self.suf, self.suf_keep = _set_rows(self.suf, self.suf_keep, self.suf_len, rows, suf)


def _set_rows(m: np.ndarray, keep: np.ndarray, lens: np.ndarray, rows: list[int],
              values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    w = max(map(len, values))
    if w > m.shape[1]:
        m = np.concatenate([m, np.zeros((m.shape[0], w - m.shape[1]), np.uint8)], axis=1)
        keep = np.concatenate([keep, np.zeros((keep.shape[0], w - keep.shape[1]), bool)], axis=1)
    for r, b in zip(rows, values, strict=True):
        m[r, :len(b)] = np.frombuffer(b, np.uint8)
        m[r, len(b):] = 0
        keep[r, :len(b)] = True
        keep[r, len(b):] = False
        lens[r] = len(b)
    return m, keep


def encode_flows(parts: FlowParts, window_values: np.ndarray) -> bytes:
    """``FlowBatch.flows`` (field 8) of rows ``parts`` with fields 14-19 ``window_values`` ((n, 6),
    non-negative ints < 2^64): every Flow as 0x42, its length, pre, window fields, suf."""
    n = len(parts)
    if not n:
        return b""
    vals = window_values
    if vals.dtype == object:  # Python ints past int64: exact through uint64
        vals = np.array(vals.tolist(), dtype=_U64).reshape(vals.shape)
    elif vals.dtype != _U64:
        vals = vals.astype(_U64)
    dyn, dyn_keep = _fields_matrix(vals, WINDOW_FIELD_TAGS)
    flow_len = parts.pre_len + dyn_keep.sum(axis=1) + parts.suf_len
    head, head_keep = _fields_matrix(flow_len.astype(_U64)[:, None], (bytes([FLOWS_TAG]),))
    m = np.concatenate([head, parts.pre, dyn, parts.suf], axis=1)
    keep = np.concatenate([head_keep, parts.pre_keep, dyn_keep, parts.suf_keep], axis=1)
    return m[keep].tobytes()
