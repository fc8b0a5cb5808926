"""Raw SubscribeResponse bytes -> Samples, for notifications laid out like one seen before (pure).

A switch sends the same notifications every sample: same prefix, same paths in the same order;
only the timestamp and the counter values change. ``FastDecoder`` learns such a *layout* from a
message that the general decoder (``decode.Decoder``) has just decoded: the message bytes with
the value bits of the timestamp varint and of every ``uint_val`` varint zeroed. A later message
of the same length whose bytes equal the layout outside those value bits (every byte is
compared, continuation bits included, so every varint keeps its length) parses to the same
notification with new numbers: its values are read from the slots (compiled, ``native.read_slots``,
or with numpy where the extension is not built), without a protobuf parse or a Python object per
update, and its ``Samples`` come from the layout's keys.

Learnt only from plain notifications: one ``update`` (no sync_response, error, extension), no
deletes, each update a path plus a ``uint_val`` that the general decoder resolved to an interface
counter, a next-hop counter, last-clear / last-change, a queue or PFC counter or queue watermark, or a
leaf it ignores (any value). Values
fit 9 varint bytes (< 2^63). Everything else (JSON, strings, deletes, new paths, another length,
any other byte) gets None and goes the general way. ``Samples`` are equal to the general
decoder's, field by field (tests/collectors/gnmi/test_gnmi_fast_decode.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pygnmi.spec.v080.gnmi_pb2 import Notification

from flowtracer.collectors.gnmi.counters import native_loader
from flowtracer.collectors.gnmi.counters.decode import (
    IF_TIMETICKS,
    RES_IF_COUNTER,
    RES_IGNORE,
    RES_LEAF,
    RES_NH_COUNTER,
    RES_PFC_COUNTER,
    RES_QUEUE_COUNTER,
    RES_QUEUE_WATERMARK,
    Decoder,
    key_value,
)
from flowtracer.collectors.gnmi.counters.leaf_values import DecodeError, normalize_timestamp
from flowtracer.collectors.gnmi.counters.samples import Samples
from flowtracer.collectors.gnmi.counters.shapes import count_shape

# Fixed bytes compared before the whole message: two layouts of one length (e.g. the two AFT counter
# trees) differ in their paths, and a miss then costs ~1 us instead of a full compare (~50 us).
_PROBES = 64
_MAX_SLOT = 9  # varint bytes of a slot: values < 2^63 (int64 timestamps; larger counters go the general way)


class _NotPlain(Exception):
    """The message is not in the plain layout the fast path reads."""


def _varint(b: bytes, pos: int, end: int) -> tuple[int, int]:
    v = shift = 0
    while pos < end and shift < 70:
        c = b[pos]
        pos += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, pos
        shift += 7
    raise _NotPlain


def _scan_update(raw: bytes, pos: int, end: int) -> tuple[int, int]:
    """(start, end) of the uint_val varint of one Update, or (-1, -1) when its value is not a
    lone uint_val. Fields other than path, val and duplicates (each at most once) -> _NotPlain."""
    seen: set[int] = set()
    vspan = (-1, -1)
    while pos < end:
        tag, pos = _varint(raw, pos, end)
        field, wire = tag >> 3, tag & 7
        if field in seen:
            raise _NotPlain
        seen.add(field)
        if field in (1, 3) and wire == 2:
            n, pos = _varint(raw, pos, end)
            if pos + n > end:
                raise _NotPlain
            if field == 3 and n >= 2 and raw[pos] == 0x18:  # TypedValue.uint_val
                _, vend = _varint(raw, pos + 1, pos + n)
                if vend == pos + n and vend - pos - 1 <= _MAX_SLOT:
                    vspan = (pos + 1, vend)
            pos += n
        elif field == 4 and wire == 0:
            _, pos = _varint(raw, pos, end)
        else:
            raise _NotPlain
    if pos != end or {1, 3} - seen:  # an update without path or val
        raise _NotPlain
    return vspan


def _scan(raw: bytes) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """(timestamp varint span or None, per update its uint_val span) of a SubscribeResponse that
    holds one plain Notification; _NotPlain otherwise."""
    end = len(raw)
    tag, pos = _varint(raw, 0, end)
    if tag != 0x0A:  # SubscribeResponse.update, length-delimited
        raise _NotPlain
    n, pos = _varint(raw, pos, end)
    if pos + n != end:
        raise _NotPlain
    ts: tuple[int, int] | None = None
    seen: set[int] = set()
    spans: list[tuple[int, int]] = []
    while pos < end:
        tag, pos = _varint(raw, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 4 and wire == 2:  # update
            n, pos = _varint(raw, pos, end)
            if pos + n > end:
                raise _NotPlain
            spans.append(_scan_update(raw, pos, pos + n))
            pos += n
            continue
        if field in seen:  # a repeated scalar or a second prefix: parses, but not as "one of each"
            raise _NotPlain
        seen.add(field)
        if field == 1 and wire == 0:  # timestamp
            start = pos
            _, pos = _varint(raw, pos, end)
            if pos - start > _MAX_SLOT:
                raise _NotPlain
            ts = (start, pos)
        elif field in (2, 3) and wire == 2:  # prefix, alias: fixed bytes
            n, pos = _varint(raw, pos, end)
            pos += n
            if pos > end:
                raise _NotPlain
        elif field == 6 and wire == 0:  # atomic
            _, pos = _varint(raw, pos, end)
        else:  # deletes, unknown fields
            raise _NotPlain
    if pos != end:
        raise _NotPlain
    return ts, spans


@dataclass(slots=True, eq=False)
class Layout:
    expected: np.ndarray  # uint8: the learnt bytes, value bits of every slot zeroed
    slot_bytes: np.ndarray  # int32: position of every slot byte, slot after slot
    shifts: np.ndarray  # uint8 per slot byte: 7 * its place in the varint
    starts: np.ndarray  # intp per slot: index of its first byte in slot_bytes
    ts_slot: int  # slot of the timestamp, -1 when the message has none
    if_sel: np.ndarray  # slots of interface counters ...
    if_keys: tuple[tuple[str, ...], tuple[int, ...]]  # ... their (interfaces, counter indexes)
    nh_sel: np.ndarray
    nh_keys: tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...], tuple[bool, ...]]  # ni, index, counter, newer
    st_sel: np.ndarray
    st_keys: tuple[tuple[str, ...], tuple[str, ...]]  # interface, state field (time ticks)
    #: Congestion slots by kind (RES_QUEUE_COUNTER, RES_QUEUE_WATERMARK, RES_PFC_COUNTER): (slots, (interface,
    #: queue or priority) per slot, counter index per slot (0 for watermarks)).
    cg: dict[int, tuple[np.ndarray, tuple[tuple[str, object], ...], np.ndarray]]
    ignored: int
    ignored_shapes: dict[str, int]  # Samples.ignored_shapes of every message of this layout
    probe: np.ndarray  # intp: a few fixed (non-slot) byte positions, spread over the message ...
    probe_bytes: np.ndarray  # ... and their bytes: refuses another layout of the same length cheaply
    # For the compiled read, the slots in message order: first byte, varint bytes, slot number.
    slot_pos: np.ndarray  # int64
    slot_len: np.ndarray  # int64
    slot_idx: np.ndarray  # int64

    def read(self, raw: bytes) -> np.ndarray | None:
        """The slot values of ``raw`` (uint64), or None when it is not this layout."""
        native = native_loader.native
        if native is not None:
            return native.read_slots(raw, self.expected, self.slot_pos, self.slot_len, self.slot_idx)
        arr = np.frombuffer(raw, np.uint8)
        if not np.array_equal(arr[self.probe], self.probe_bytes):
            return None
        d = arr ^ self.expected
        sb = d[self.slot_bytes]
        if sb.max(initial=0) >= 0x80:  # a varint of another length
            return None
        d[self.slot_bytes] = 0
        if d.any():
            return None
        return np.add.reduceat(sb.astype(np.uint64) << self.shifts, self.starts) if len(self.starts) else sb

    @property
    def counter_updates(self) -> int:
        """Interface and next-hop counter values in a message of this layout."""
        return len(self.if_sel) + len(self.nh_sel)

    @property
    def congestion_updates(self) -> int:
        """Queue and PFC values (counters and watermarks) in a message of this layout."""
        return sum(len(sel) for sel, _, _ in self.cg.values())

    def timestamp(self, vals: np.ndarray) -> int:
        """The notification timestamp (ns, 0 = none) of a message read as ``vals``."""
        return normalize_timestamp(int(vals[self.ts_slot])) if self.ts_slot >= 0 else 0

    def if_state(self, vals: np.ndarray) -> list[tuple[str, str, int]]:
        """``Samples.if_state`` of a message read as ``vals``."""
        if not len(self.st_sel):
            return []
        return list(zip(*self.st_keys, map(normalize_timestamp, vals[self.st_sel].tolist()), strict=True))

    def samples(self, vals: np.ndarray) -> Samples:
        s = Samples(self.timestamp(vals))
        if len(self.if_sel):
            s.if_counters = list(zip(*self.if_keys, vals[self.if_sel].tolist(), strict=True))
        if len(self.nh_sel):
            names, idx, ci, newer = self.nh_keys
            s.nh_counters = list(zip(names, idx, ci, vals[self.nh_sel].tolist(), newer, strict=True))
        s.if_state = self.if_state(vals)
        s.ignored = self.ignored
        if self.ignored_shapes:
            s.ignored_shapes = dict(self.ignored_shapes)
        for kind, (sel, keys, idx) in self.cg.items():
            v = vals[sel].tolist()
            if kind == RES_QUEUE_WATERMARK:
                s.queue_watermarks = [(k[0], k[1], x) for k, x in zip(keys, v, strict=True)]
            else:
                rows = [(k[0], k[1], i, x) for k, i, x in zip(keys, idx.tolist(), v, strict=True)]
                if kind == RES_QUEUE_COUNTER:
                    s.queue_counters = rows  # type: ignore[assignment]
                else:
                    s.pfc_counters = rows  # type: ignore[assignment]
        return s


def _layout(raw: bytes, n: Notification, decoder: Decoder) -> Layout:
    """The layout of ``raw`` (whose parse is ``n``); _NotPlain when it has none."""
    ts, spans = _scan(raw)
    if len(spans) != len(n.update) or (ts is None and n.timestamp):
        raise _NotPlain
    slots: list[tuple[int, int]] = [ts] if ts is not None else []
    if_sel: list[int] = []
    if_keys: tuple[list[str], list[int]] = ([], [])
    nh_sel: list[int] = []
    nh_keys: tuple[list[str], list[int], list[int], list[bool]] = ([], [], [], [])
    st_sel: list[int] = []
    st_keys: tuple[list[str], list[str]] = ([], [])
    cg: dict[int, tuple[list[int], list[tuple[str, object]], list[int]]] = {}
    ignored = 0
    shapes: dict[str, int] = {}
    prefix = n.prefix if n.HasField("prefix") else None
    for u, span in zip(n.update, spans, strict=True):
        r = decoder.resolve(prefix, u.path)
        code = r[0]
        if code == RES_IGNORE:
            ignored += 1
            count_shape(shapes, r[1])
            if span[0] >= 0:  # e.g. a counter we do not carry: its value may change
                slots.append(span)
            continue
        if span[0] < 0:
            raise _NotPlain
        if code == RES_IF_COUNTER:
            if_sel.append(len(slots))
            if_keys[0].append(r[1])
            if_keys[1].append(r[2])
        elif code == RES_NH_COUNTER:
            nh_sel.append(len(slots))
            for col, v in zip(nh_keys, r[1:], strict=True):
                col.append(v)
        elif code in (RES_QUEUE_COUNTER, RES_QUEUE_WATERMARK, RES_PFC_COUNTER):
            sel, keys, idx = cg.setdefault(code, ([], [], []))
            sel.append(len(slots))
            keys.append((r[1], r[2]))
            idx.append(r[3] if code != RES_QUEUE_WATERMARK else 0)
        elif code == RES_LEAF and r[3] in IF_TIMETICKS:
            try:
                name = key_value(r[2], "interface")
            except DecodeError:
                raise _NotPlain from None
            st_sel.append(len(slots))
            st_keys[0].append(name)
            st_keys[1].append(IF_TIMETICKS[r[3]])
        else:
            raise _NotPlain
        slots.append(span)
    expected = np.frombuffer(raw, np.uint8).copy()
    slot_bytes = (np.concatenate([np.arange(a, b) for a, b in slots]) if slots else np.zeros(0)).astype(np.int32)
    expected[slot_bytes] &= 0x80
    lens = np.array([b - a for a, b in slots], np.intp)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.intp) if slots else np.zeros(0, np.intp)
    shifts = (7 * (np.arange(len(slot_bytes)) - np.repeat(starts, lens))).astype(np.uint8)
    fixed = np.ones(len(expected), bool)
    fixed[slot_bytes] = False
    fixed_pos = np.flatnonzero(fixed)
    probe = fixed_pos[np.linspace(0, len(fixed_pos) - 1, min(_PROBES, len(fixed_pos))).astype(np.intp)]
    pos = np.array([a for a, _ in slots], np.int64)
    order = np.argsort(pos, kind="stable")  # message order (the timestamp may come last)
    return Layout(expected, slot_bytes, shifts, starts, 0 if ts is not None else -1,
                   np.array(if_sel, np.intp), (tuple(if_keys[0]), tuple(if_keys[1])),
                   np.array(nh_sel, np.intp), tuple(tuple(c) for c in nh_keys),  # type: ignore[arg-type]
                   np.array(st_sel, np.intp), (tuple(st_keys[0]), tuple(st_keys[1])),
                   {k: (np.array(a, np.intp), tuple(b), np.array(c, np.intp)) for k, (a, b, c) in cg.items()},
                   ignored, shapes,
                   probe, expected[probe], pos[order], lens.astype(np.int64)[order], order.astype(np.int64))


class FastDecoder:
    """Layouts of one switch's notifications, and the fast decode of messages that match one.

    ``decode(raw)`` -> Samples or None (not a known layout: parse and decode it the general way,
    then call ``learn``). At most ``max_layouts`` are kept (oldest dropped); a counter whose
    varint grows a byte makes a new one. Learning costs about one general decode; when learnt
    layouts stop matching (a switch that reorders its updates), learning pauses until a match.
    """

    def __init__(self, decoder: Decoder, max_layouts: int = 8) -> None:
        self.decoder = decoder
        self.max_layouts = max_layouts
        self._by_len: dict[int, list[Layout]] = {}
        self._credit = max_layouts  # learns left before one must pay off with a match
        self._misses = 0
        #: Layouts learnt (for tests).
        self.learnt = 0

    def decode(self, raw: bytes) -> Samples | None:
        """``raw`` (a serialized SubscribeResponse) as Samples, if it matches a known layout."""
        m = self.match(raw)
        return None if m is None else m[0].samples(m[1])

    def match(self, raw: bytes) -> tuple[Layout, np.ndarray] | None:
        """(layout, slot values) of ``raw`` if it matches a known layout: the columns ``decode``
        makes Samples from (``BatchAssembler.add_part`` takes them as they are)."""
        cands = self._by_len.get(len(raw))
        if not cands:
            return None
        for k, lay in enumerate(cands):
            vals = lay.read(raw)
            if vals is not None:
                if k:
                    cands.insert(0, cands.pop(k))
                self._credit = min(self._credit + 1, self.max_layouts)
                return lay, vals
        return None

    def learn(self, raw: bytes, n: Notification, s: Samples) -> None:
        """Remember the layout of ``raw`` (whose parse is ``n``, decoded as ``s``) if it is plain."""
        self._misses += 1
        if self._misses % 256 == 0:  # try again now and then after learning paused
            self._credit = max(self._credit, 1)
        if (self._credit <= 0 or not (s.counter_updates or s.congestion_updates) or s.errors or s.deletes
                or n.delete):
            return
        self._credit -= 1
        try:
            lay = _layout(raw, n, self.decoder)
        except _NotPlain:
            return
        if sum(map(len, self._by_len.values())) >= self.max_layouts:
            self._by_len.pop(next(iter(self._by_len)))
        self._by_len.setdefault(len(raw), []).insert(0, lay)
        self.learnt += 1
