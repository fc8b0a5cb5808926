# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The collector's two hot loops compiled (Cython): a layout's slot read, and a grid's deltas + wire bytes (pure).

Optional: ``pip install`` builds it where a C compiler is present (Makefile, Dockerfile); without it
``layout`` and ``columns`` run the same rules on numpy (``FLOWTRACER_NATIVE=0`` forces
that). Both give the same bytes: the fast-path equivalence tests run on each.

* ``read_slots``: ``fast_decode.Layout.read`` in one pass: the message's fixed bytes must equal
  the layout's, each slot's continuation bits too (the same varint lengths), and the slots'
  varints are the values.
* ``encode_grid``: ``column_deltas`` + ``counter_wire`` for one grid (interfaces or next hops):
  the production delta rule (``column_deltas``, which states it) per counter, then per row with a
  kept counter one repeated ``tag <length> pre interval mid Counter...`` entry, straight into the
  output buffer. A second copy of that rule, compiled for speed: tests check it against the numpy
  rule and against the per-counter oracle (tests/collectors/gnmi/counters/delta_oracle.py) on
  random sequences.
"""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcmp, memcpy

import numpy as np

from . import column_deltas as rule

cdef int64_t OK = rule.OK, BASELINE = rule.BASELINE, GAP = rule.GAP, RESET = rule.RESET
cdef int64_t WRAPPED = rule.WRAPPED
cdef uint64_t TWO_32 = 1ULL << 32
cdef Py_ssize_t CELL_MAX = 25  # a Counter after its tag: length 1, value and delta 1 + 10 each, status 2


cdef inline Py_ssize_t put_varint(uint8_t* out, uint64_t v) noexcept nogil:
    """Write ``v`` as a varint at ``out``; returns its length in bytes."""
    cdef Py_ssize_t n = 0
    while v >= 0x80:
        out[n] = <uint8_t>((v & 0x7F) | 0x80)
        v >>= 7
        n += 1
    out[n] = <uint8_t>v
    return n + 1


cdef inline Py_ssize_t varint_len(uint64_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef int64_t max_slot(const int64_t[:, ::1] src) noexcept:
    cdef int64_t m = 0
    cdef Py_ssize_t r, j
    for r in range(src.shape[0]):
        for j in range(src.shape[1]):
            if src[r, j] > m:
                m = src[r, j]
    return m


def read_slots(const uint8_t[::1] msg, const uint8_t[::1] expected, const int64_t[::1] slot_pos,
               const int64_t[::1] slot_len, const int64_t[::1] slot_idx):
    """The slot values (uint64 array) of ``msg``, or None when it is not the layout ``expected``
    (the learnt bytes, value bits of the slots zeroed). In message order, the k-th slot is
    ``slot_len[k]`` varint bytes at ``slot_pos[k]`` (ascending, not overlapping), and its value goes
    to ``[slot_idx[k]]``."""
    cdef Py_ssize_t n = msg.shape[0], k, b, prev = 0, s, ln, nslots = slot_pos.shape[0]
    cdef uint64_t v
    cdef uint8_t c
    if n != expected.shape[0] or n == 0:
        return None
    cdef const uint8_t* m = &msg[0]
    cdef const uint8_t* e = &expected[0]
    out = np.empty(nslots, np.uint64)
    cdef uint64_t[::1] o = out
    for k in range(nslots):
        s = slot_pos[k]
        ln = slot_len[k]
        if memcmp(m + prev, e + prev, s - prev) != 0:
            return None
        v = 0
        for b in range(ln):
            c = m[s + b]
            if (c & 0x80) != e[s + b]:  # a varint of another length
                return None
            v |= (<uint64_t>(c & 0x7F)) << (7 * b)
        o[slot_idx[k]] = v
        prev = s + ln
    if memcmp(m + prev, e + prev, n - prev) != 0:
        return None
    return out


def encode_grid(const uint64_t[::1] values, const int64_t[:, ::1] src, const uint8_t[:, ::1] present,
                uint64_t[:, ::1] prev_value, int64_t[:, ::1] prev_ts, int64_t[:, ::1] prev_clear,
                int64_t ts, const int64_t[::1] clear, int counter_bits, int64_t gap_ns, max_rate,
                const uint8_t[:, ::1] pre, const int64_t[::1] pre_len, mid, mid_len,
                const uint8_t[:, ::1] tags, const int64_t[::1] tag_len, int msg_tag, int interval_tag):
    """(bytes, counters kept, duplicates, out of order) of one grid at ``ts`` ns; see
    ``columns._Grid.encode`` for the numpy twin. ``values``: the instant's slot values;
    ``src[r, j]``: the slot of row r's counter j where ``present``; ``prev_*``: the delta state,
    updated in place; ``clear``: last-clear ns per row; ``max_rate``: float64 (rows, counters) or
    None; ``pre`` / ``mid`` (None: no mid): cached field bytes per row, zero-padded, with lengths;
    ``tags``: per counter column its field tag, zero-padded, with lengths."""
    cdef Py_ssize_t rows = src.shape[0], cols = src.shape[1], r, j, o = 0, cl, body, cell_at
    cdef const double[:, ::1] rate
    cdef const uint8_t[:, ::1] mid_b
    cdef const int64_t[::1] mid_l
    cdef bint has_rate = max_rate is not None, has_mid = mid is not None
    if has_rate:
        rate = max_rate
    if has_mid:
        mid_b = mid
        mid_l = mid_len
    if rows and cols and values.shape[0] <= max_slot(src):  # no bounds checks below: refuse here
        raise IndexError("a counter's slot is past the instant's values")
    cdef Py_ssize_t row_max = 11 + cols * (tags.shape[1] + CELL_MAX)
    if has_mid:
        row_max += mid_b.shape[1]
    cdef uint8_t[::1] cells_view = np.empty(row_max, np.uint8)
    out_buf = np.empty(rows * (6 + pre.shape[1] + row_max) + 1, np.uint8)
    cdef uint8_t[::1] out_view = out_buf
    cdef uint8_t* cells = &cells_view[0]
    cdef uint8_t* out = &out_view[0]
    cdef uint64_t v, pv, delta, wd
    cdef int64_t pt, c, iv, interval, status
    cdef Py_ssize_t kept = 0, dup = 0, ooo = 0, row_kept
    cdef bint cleared, wrap
    for r in range(rows):
        c = clear[r]
        interval = 0
        row_kept = 0
        cl = 0
        for j in range(cols):
            if not present[r, j]:
                continue
            v = values[src[r, j]]
            pv = prev_value[r, j]
            pt = prev_ts[r, j]
            delta = 0
            if pt == 0:
                status = BASELINE
            elif pt == ts:
                dup += 1
                continue
            elif pt > ts:
                ooo += 1
                continue
            else:
                iv = ts - pt
                cleared = c != prev_clear[r, j] and c > pt
                if cleared:
                    status = RESET
                elif v < pv:
                    status = RESET
                    if counter_bits == 32 and pv < TWO_32:
                        wd = v + TWO_32 - pv
                        wrap = True
                        if has_rate and rate[r, j] > 0:
                            wrap = <double>wd <= rate[r, j] * <double>iv
                        if wrap:
                            status = WRAPPED
                            delta = wd
                            if iv > interval:
                                interval = iv
                else:
                    delta = v - pv
                    status = GAP if gap_ns and iv > gap_ns else OK
                    if iv > interval:
                        interval = iv
            prev_value[r, j] = v
            prev_ts[r, j] = ts
            prev_clear[r, j] = c
            row_kept += 1
            # Counter j: tag, length, value (1), delta (2), status (3), each left out when 0.
            memcpy(cells + cl, &tags[j, 0], tag_len[j])
            cl += tag_len[j]
            cell_at = cl
            cl += 1
            if v:
                cells[cl] = 0x08
                cl += 1 + put_varint(cells + cl + 1, v)
            if delta:
                cells[cl] = 0x10
                cl += 1 + put_varint(cells + cl + 1, delta)
            if status != 0:  # proto3: OK (0) is not written
                cells[cl] = 0x18
                cells[cl + 1] = <uint8_t>status
                cl += 2
            cells[cell_at] = <uint8_t>(cl - cell_at - 1)
        if not row_kept:
            continue
        kept += row_kept
        body = pre_len[r] + cl
        if interval:
            body += 1 + varint_len(<uint64_t>interval)
        if has_mid:
            body += mid_l[r]
        out[o] = <uint8_t>msg_tag
        o += 1 + put_varint(out + o + 1, <uint64_t>body)
        if pre_len[r]:
            memcpy(out + o, &pre[r, 0], pre_len[r])
            o += pre_len[r]
        if interval:
            out[o] = <uint8_t>interval_tag
            o += 1 + put_varint(out + o + 1, <uint64_t>interval)
        if has_mid and mid_l[r]:
            memcpy(out + o, &mid_b[r, 0], mid_l[r])
            o += mid_l[r]
        memcpy(out + o, cells, cl)
        o += cl
    return out_buf[:o].tobytes(), kept, dup, ooo
