"""Queue and PFC samples of one switch -> CongestionBatch per sample instant, with exact deltas (pure).

The congestion leaves (openconfig-qos egress queues, per-priority PFC pause frames; which ones and
where each platform has them: docs/congestion-counters.md) arrive in their own notifications, decoded
by the general ``Decoder`` into ``Samples.queue_counters`` / ``queue_watermarks`` / ``pfc_counters``.
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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowtracer.collectors.gnmi.counters.column_deltas import DeltaState
from flowtracer.collectors.gnmi.counters.decode import Samples
from flowtracer.schemas.openconfig import PFC_COUNTERS, QUEUE_COUNTERS
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1.common_pb2 import Counter
from flowtracer.schemas.v1.counters_pb2 import CongestionBatch, PfcCounters, QueueCounters

_QUEUE_FIELDS = tuple(c.replace("-", "_") for c in QUEUE_COUNTERS)
_PFC_FIELDS = ("pause_frames_rx", "pause_frames_tx")  # PFC_COUNTERS order: received, generated


@dataclass(slots=True)
class _Instant:
    """What one sample instant said so far: the last value of each counter wins."""

    timestamp_ns: int
    queues: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    watermarks: dict[tuple[str, str], int] = field(default_factory=dict)
    pfc: dict[tuple[str, int], dict[int, int]] = field(default_factory=dict)


@dataclass
class CongestionStats:
    """Monotonic counts (read by the metrics collector)."""

    batches: int = 0
    #: Samples that came after their instant was emitted (sent in an extra batch for it).
    late: int = 0
    #: Samples without a timestamp (0): dropped, a delta needs a time.
    invalid: int = 0


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
        self.queue_deltas = DeltaState(len(QUEUE_COUNTERS), counter_bits, interval_ns, gap_factor)
        self.pfc_deltas = DeltaState(len(PFC_COUNTERS), counter_bits, interval_ns, gap_factor)
        self._open: _Instant | None = None
        self._last_emitted_ns = 0

    def start_session(self, session: int) -> list[CongestionBatch]:
        """A new gNMI session: emit what is open, forget every delta (the next samples are BASELINE)."""
        out = self.flush()
        self.session = session
        self.queue_deltas.clear()
        self.pfc_deltas.clear()
        self._last_emitted_ns = 0
        return out

    def add(self, s: Samples, received_ns: int) -> list[CongestionBatch]:
        """Merge one notification's congestion samples; return the batches this closed."""
        if not s.congestion_updates:
            return []
        if s.timestamp_ns <= 0:
            self.stats.invalid += s.congestion_updates
            return []
        out: list[CongestionBatch] = []
        cur = self._open
        if cur is not None and cur.timestamp_ns != s.timestamp_ns:
            out += self.flush(received_ns)
            cur = None
        if cur is None:
            if s.timestamp_ns <= self._last_emitted_ns:
                self.stats.late += 1
            cur = self._open = _Instant(s.timestamp_ns)
        for iface, queue, i, v in s.queue_counters:
            cur.queues.setdefault((iface, queue), {})[i] = v
        for iface, queue, v in s.queue_watermarks:
            cur.watermarks[(iface, queue)] = v
            cur.queues.setdefault((iface, queue), {})
        for iface, prio, i, v in s.pfc_counters:
            cur.pfc.setdefault((iface, prio), {})[i] = v
        return out

    def flush(self, received_ns: int = 0) -> list[CongestionBatch]:
        """Close the open instant, if any, into its batch (``received_ns``: now, ns since the epoch)."""
        cur, self._open = self._open, None
        if cur is None:
            return []
        ts = cur.timestamp_ns
        batch = CongestionBatch(schema_version=SCHEMA_VERSION, switch=self.switch, timestamp_ns=ts,
                                collector_id=self.collector_id, sequence=self.sequence, received_ns=received_ns,
                                session=self.session)
        qkeys = sorted(cur.queues)
        qcells = self.queue_deltas.update_sparse(qkeys, [cur.queues[k] for k in qkeys], ts)
        for key, (cells, interval) in zip(qkeys, qcells, strict=True):
            wm = cur.watermarks.get(key)
            if not cells and wm is None:
                continue
            q = QueueCounters(interface=key[0], queue=key[1], interval_ns=interval)
            for i, (v, d, st) in cells.items():
                getattr(q, _QUEUE_FIELDS[i]).CopyFrom(Counter(value=v, delta=d, status=st))  # type: ignore[arg-type]
            if wm is not None:
                q.max_queue_len_bytes, q.has_max_queue_len = wm, True
            batch.queues.append(q)
        pkeys = sorted(cur.pfc)
        for key, (cells, interval) in zip(pkeys, self.pfc_deltas.update_sparse(pkeys, [cur.pfc[k] for k in pkeys], ts),
                                          strict=True):
            if not cells:
                continue
            p = PfcCounters(interface=key[0], priority=key[1], interval_ns=interval)
            for i, (v, d, st) in cells.items():
                getattr(p, _PFC_FIELDS[i]).CopyFrom(Counter(value=v, delta=d, status=st))  # type: ignore[arg-type]
            batch.pfc.append(p)
        self._last_emitted_ns = max(self._last_emitted_ns, ts)
        if not batch.queues and not batch.pfc:  # everything was a duplicate or out of order
            return []
        self.sequence += 1
        self.stats.batches += 1
        return [batch]

