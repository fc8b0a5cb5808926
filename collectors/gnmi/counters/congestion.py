"""Queue and PFC samples of one switch -> CongestionBatch per sample instant, with exact deltas (pure).

The congestion leaves (openconfig-qos egress queues, per-priority PFC pause frames; which ones and
where each platform has them: docs/congestion-counters.md) arrive in their own notifications: read
from a learnt byte layout by the ``FastDecoder`` (``add_part``: the values as an array), or decoded by
the general ``Decoder`` into ``Samples.queue_counters`` / ``queue_watermarks`` / ``pfc_counters`` (``add``).
This assembler groups them by notification timestamp (one instant = one timestamp, however many
notifications it came in) and emits one ``CongestionBatch`` when an instant closes: a sample with a
newer timestamp arrives, the stream syncs, or the session flushes.

Deltas come from the collector's one delta rule: ``DeltaState`` (``column_deltas``), one state per
kind (queues: rows keyed (interface, queue); PFC: (interface, priority)), with the same RESET / WRAPPED
/ GAP / BASELINE statuses as the interface counters. No queue or PFC leaf has a last-clear, so a clear
is seen as a counter that went down (RESET). ``max-queue-len`` is a watermark: passed through as
reported, never differenced. Samples for an instant already closed are counted as ``late`` and reach
the delta rule in an extra batch (where an older timestamp is dropped as out of order), as the
interface counters' assembler does.

Columnar: an instant is kept as (row, column, value) lists and arrays per kind, a row being one queue or one (interface,
priority) in the ``DeltaState``'s own row order; closing it runs the delta rule on the rows it touched and writes
the CongestionBatch bytes with the wire helpers of the interface counters (``wire.py``), one grid per kind, no
protobuf object per queue (the fields' bytes before the interval, names and keys, are serialized once per row).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from flowtracer.collectors.gnmi.counters import native_loader
from flowtracer.collectors.gnmi.counters.column_deltas import DeltaState
from flowtracer.collectors.gnmi.counters.columns import EncodedBatch
from flowtracer.collectors.gnmi.counters.decode import RES_PFC_COUNTER, RES_QUEUE_WATERMARK
from flowtracer.collectors.gnmi.counters.samples import Samples
from flowtracer.collectors.gnmi.counters.wire import (
    FixedBytes,
    counter_cells,
    repeated_messages,
    scalar_field,
    tag_matrix,
)
from flowtracer.schemas.openconfig import PFC_COUNTERS, QUEUE_COUNTERS
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1.counters_pb2 import CongestionBatch, PfcCounters, QueueCounters


class LayoutSlots(Protocol):
    """What ``add_part`` reads from a ``layout.Layout``: the timestamp and the congestion slots."""

    cg: dict[int, tuple[np.ndarray, tuple[tuple[str, object], ...], np.ndarray]]

    @property
    def congestion_updates(self) -> int: ...

    def timestamp(self, vals: np.ndarray) -> int: ...

_U64 = np.uint64
# Field tags: CongestionBatch.queues (8) / .pfc (9); in both entries interval_ns is field 3 and the counters
# start at field 4; QueueCounters.max_queue_len_bytes (10) and has_max_queue_len (11).
_QUEUES_TAG, _PFC_TAG, _INTERVAL_TAG, _WM_TAG, _HAS_WM_TAG = 0x42, 0x4A, 0x18, 0x50, 0x58
_QUEUE_TAGS = tuple(bytes([(4 + i) << 3 | 2]) for i in range(len(QUEUE_COUNTERS)))
_PFC_TAGS = tuple(bytes([(4 + i) << 3 | 2]) for i in range(len(PFC_COUNTERS)))


class _Grid:
    """One kind of row (queues or PFC priorities): the delta state, each row's fixed bytes, and the open
    instant's samples as (row, column, value) lists."""

    def __init__(self, width: int, counter_bits: int, interval_ns: int, gap_factor: float) -> None:
        self.deltas = DeltaState(width, counter_bits, interval_ns, gap_factor)
        self.pre: dict[Hashable, bytes] = {}  # key -> serialized fields 1-2 (its names)
        self._row: dict[Hashable, int] = {}
        self._keys: list[Hashable] = []
        self._epoch = -1
        self._fixed: tuple[tuple[int, bytes], FixedBytes] | None = None  # ((epoch, rows) it is for, their bytes)
        self.reset_instant()

    def reset_instant(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[int] = []
        #: Whole messages read by the fast path: (rows, columns, values) arrays.
        self.chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    @property
    def empty(self) -> bool:
        return not self.rows and not self.chunks

    def row(self, key: Hashable) -> int:
        """The delta-state row of ``key`` (rows are only forgotten with the whole state)."""
        if self._epoch != self.deltas.epoch:
            self._row, self._keys, self._epoch = {}, [], self.deltas.epoch
        r = self._row.get(key)
        if r is None:
            r = self._row[key] = int(self.deltas.rows([key], [key])[0])
            self._keys.append(key)
            self._epoch = self.deltas.epoch
        return r

    def fixed(self, rows: np.ndarray, make: type[QueueCounters] | type[PfcCounters]) -> FixedBytes:
        """The fixed bytes of ``rows`` (cached while the rows of an instant repeat, as they do every sample)."""
        tag = (self.deltas.epoch, rows.tobytes())
        if self._fixed is None or self._fixed[0] != tag:
            keys = self._keys
            out = []
            for r in rows.tolist():
                k = keys[r]
                b = self.pre.get(k)
                if b is None:
                    b = self.pre[k] = _names(make, k)
                out.append(b)
            self._fixed = (tag, FixedBytes(out))
        return self._fixed[1]

    def grid(self, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows touched or in ``extra``, ascending; values (rows, width) uint64; present mask) of the open
        instant; the last value of a counter wins."""
        rows = np.concatenate([np.asarray(self.rows, np.intp), *(c[0] for c in self.chunks)])
        cols = np.concatenate([np.asarray(self.cols, np.intp), *(c[1] for c in self.chunks)])
        v = np.concatenate([np.asarray(self.vals, _U64), *(c[2] for c in self.chunks)])
        urows = np.unique(np.concatenate([rows, extra]))
        local = np.searchsorted(urows, rows)
        vals = np.zeros((len(urows), self.deltas.width), _U64)
        present = np.zeros(vals.shape, bool)
        vals[local, cols] = v
        present[local, cols] = True
        return urows, vals, present


def _names(make: type[QueueCounters] | type[PfcCounters], key: Hashable) -> bytes:
    iface, sub = key  # type: ignore[misc]
    if make is QueueCounters:
        return QueueCounters(interface=iface, queue=sub).SerializeToString()
    return PfcCounters(interface=iface, priority=sub).SerializeToString()


@dataclass
class CongestionStats:
    """Monotonic counts (read by the metrics collector)."""

    batches: int = 0
    #: Samples that came after their instant was emitted (sent in an extra batch for it).
    late: int = 0
    #: Samples without a timestamp (0): dropped, a delta needs a time.
    invalid: int = 0


@dataclass(slots=True)
class _Instant:
    timestamp_ns: int
    watermarks: dict[int, int] = field(default_factory=dict)  # queue row -> max-queue-len (bytes)


class CongestionAssembler:
    """The congestion counters of one switch as seen by one collector session.

    Args:
        switch: switch name (the Kafka key).
        collector_id: written into every batch.
        counter_bits: 64, or 32 when the device's counters wrap at 2^32.
        interval_ns: the sample interval of the /qos subscription (0 = none: no GAP detection).
        gap_factor: a delta spanning more than this many intervals is flagged GAP.
    """

    def __init__(self, switch: str, *, collector_id: str, counter_bits: int = 64, interval_ns: int = 0,
                 gap_factor: float = 1.5) -> None:
        self.switch = switch
        self.collector_id = collector_id
        self.session = 0
        self.sequence = 0
        self.stats = CongestionStats()
        self._queues = _Grid(len(QUEUE_COUNTERS), counter_bits, interval_ns, gap_factor)
        self._pfc = _Grid(len(PFC_COUNTERS), counter_bits, interval_ns, gap_factor)
        self._open: _Instant | None = None
        self._last_emitted_ns = 0
        #: Per fast-path layout: (the layout, delta-state epochs, per kind (slots, rows, columns)).
        self._plans: dict[int, tuple[LayoutSlots, tuple[int, int], dict[int, tuple[np.ndarray, ...]]]] = {}

    @property
    def queue_deltas(self) -> DeltaState:
        return self._queues.deltas

    @property
    def pfc_deltas(self) -> DeltaState:
        return self._pfc.deltas

    def start_session(self, session: int) -> list[EncodedBatch]:
        """A new gNMI session: emit what is open, forget every delta (the next samples are BASELINE)."""
        out = self.flush()
        self.session = session
        self._queues.deltas.clear()
        self._pfc.deltas.clear()
        self._last_emitted_ns = 0
        return out

    def _instant(self, ts: int, updates: int, received_ns: int) -> tuple[_Instant | None, list[EncodedBatch]]:
        """The open instant for a sample at ``ts`` (None: no timestamp, dropped), and the batches closed to open it."""
        if ts <= 0:
            self.stats.invalid += updates
            return None, []
        out: list[EncodedBatch] = []
        cur = self._open
        if cur is not None and cur.timestamp_ns != ts:
            out = self.flush(received_ns)
            cur = None
        if cur is None:
            if ts <= self._last_emitted_ns:
                self.stats.late += 1
            cur = self._open = _Instant(ts)
        return cur, out

    def add_part(self, layout: LayoutSlots, vals: np.ndarray, received_ns: int) -> list[EncodedBatch]:
        """What ``add(layout.samples(vals), received_ns)`` does, for a message the fast path read (``FastDecoder``):
        its values go in as arrays, the rows and columns of its slots worked out once per layout."""
        cur, out = self._instant(layout.timestamp(vals), layout.congestion_updates, received_ns)
        if cur is None:
            return out
        plan = self._plans.get(id(layout))
        epochs = (self._queues.deltas.epoch, self._pfc.deltas.epoch)
        if plan is None or plan[0] is not layout or plan[1] != epochs:
            kinds: dict[int, tuple[np.ndarray, ...]] = {}
            for kind, (sel, keys, idx) in layout.cg.items():
                g = self._pfc if kind == RES_PFC_COUNTER else self._queues
                kinds[kind] = (sel, np.array([g.row(k) for k in keys], np.intp), idx)
            if len(self._plans) > 16:  # layouts come and go (a counter whose varint grows): keep the recent
                self._plans.clear()
            plan = self._plans[id(layout)] = (layout, (self._queues.deltas.epoch, self._pfc.deltas.epoch), kinds)
        for kind, (sel, rows, idx) in plan[2].items():
            if kind == RES_QUEUE_WATERMARK:
                cur.watermarks.update(zip(rows.tolist(), vals[sel].tolist(), strict=True))
            else:
                (self._pfc if kind == RES_PFC_COUNTER else self._queues).chunks.append((rows, idx, vals[sel]))
        return out

    def add(self, s: Samples, received_ns: int) -> list[EncodedBatch]:
        """Merge one notification's congestion samples; return the batches this closed."""
        if not s.congestion_updates:
            return []
        cur, out = self._instant(s.timestamp_ns, s.congestion_updates, received_ns)
        if cur is None:
            return out
        q, p = self._queues, self._pfc
        qrow, prow = q.row, p.row
        for iface, queue, i, v in s.queue_counters:
            q.rows.append(qrow((iface, queue)))
            q.cols.append(i)
            q.vals.append(v)
        for iface, queue, v in s.queue_watermarks:
            cur.watermarks[qrow((iface, queue))] = v
        for iface, prio, i, v in s.pfc_counters:
            p.rows.append(prow((iface, prio)))
            p.cols.append(i)
            p.vals.append(v)
        return out

    def flush(self, received_ns: int = 0) -> list[EncodedBatch]:
        """Close the open instant, if any, into its batch (``received_ns``: now, ns since the epoch)."""
        cur, self._open = self._open, None
        if cur is None:
            return []
        ts = cur.timestamp_ns
        qb = self._encode(self._queues, ts, QueueCounters, _QUEUES_TAG, _QUEUE_TAGS, cur.watermarks)
        pb = self._encode(self._pfc, ts, PfcCounters, _PFC_TAG, _PFC_TAGS, {})
        self._last_emitted_ns = max(self._last_emitted_ns, ts)
        if not qb and not pb:  # everything was a duplicate or out of order
            return []
        header = CongestionBatch(schema_version=SCHEMA_VERSION, switch=self.switch, timestamp_ns=ts,
                                 collector_id=self.collector_id, sequence=self.sequence, received_ns=received_ns,
                                 session=self.session)
        self.sequence += 1
        self.stats.batches += 1
        return [EncodedBatch(self.switch, header.SerializeToString() + qb + pb, CongestionBatch)]

    @staticmethod
    def _encode(g: _Grid, ts: int, make: type[QueueCounters] | type[PfcCounters], tag: int,
                tags: tuple[bytes, ...], watermarks: dict[int, int]) -> bytes:
        """The delta rule on the instant's rows of ``g`` and their repeated entries' bytes: in one compiled pass
        (``native.encode_grid``, as the interface counters) where the extension is built, else on numpy. A row is
        written when one of its counters is kept; its watermark fields (10-11) sit between the interval and the
        counters (the ``mid`` of ``encode_grid``: protobuf reads fields in any order)."""
        wrows = np.fromiter(watermarks, np.intp, len(watermarks))
        if g.empty:
            return b""
        urows, vals, present = g.grid(wrows)
        g.reset_instant()
        deltas, block, n = g.deltas, DeltaState.block(urows), len(urows)
        pre = g.fixed(urows, make)
        mid = _watermark_fields(urows, wrows, watermarks) if len(wrows) else None
        native = native_loader.native
        if native is not None:
            st = deltas.take(block)
            tb, _, tl = tag_matrix(tags)
            data, _, dup, ooo = native.encode_grid(
                vals.ravel(), np.arange(vals.size, dtype=np.int64).reshape(vals.shape), present.view(np.uint8),
                st.values, st.ts, st.clear, ts, np.zeros(n, np.int64), deltas.counter_bits, deltas.gap_ns, None,
                pre.bytes, pre.lens, None if mid is None else mid[0], None if mid is None else mid[2], tb, tl, tag,
                _INTERVAL_TAG)
            deltas.put(block, st)
            deltas.count_dropped(dup, ooo)
            return data
        res = deltas.update(block, vals, present, ts, np.zeros((n, 1), np.int64))
        kept = present & res.kept
        cells, cells_keep, cells_len = counter_cells(tags, vals, res.delta, res.status, kept)
        iv, iv_keep, iv_len = scalar_field(_INTERVAL_TAG, res.interval_ns.astype(_U64))
        parts = [(pre.bytes, pre.keep), (iv, iv_keep)]
        body = pre.lens + iv_len + cells_len
        if mid is not None:
            parts.append((mid[0], mid[1]))
            body = body + mid[2]
        parts.append((cells, cells_keep))
        return repeated_messages(tag, kept.any(axis=1), parts, body)


def _watermark_fields(urows: np.ndarray, wrows: np.ndarray,
                      watermarks: dict[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """QueueCounters fields 10-11 (max_queue_len_bytes, has_max_queue_len) of ``urows``: (bytes left-aligned and
    zero-padded (rows, w), keep mask, lengths int64)."""
    wm = np.zeros(len(urows), _U64)
    has = np.zeros(len(urows), _U64)
    idx = np.searchsorted(urows, wrows)
    wm[idx] = np.fromiter(watermarks.values(), _U64, len(watermarks))
    has[idx] = 1
    b1, k1, _ = scalar_field(_WM_TAG, wm)
    b2, k2, _ = scalar_field(_HAS_WM_TAG, has)
    b, k = np.concatenate([b1, b2], axis=1), np.concatenate([k1, k2], axis=1)
    order = np.argsort(~k, axis=1, kind="stable")  # kept bytes first, in order
    b, k = np.take_along_axis(b, order, 1), np.take_along_axis(k, order, 1)
    b[~k] = 0
    return np.ascontiguousarray(b), k, k.sum(axis=1).astype(np.int64)
