"""Typed samples of one switch -> one CounterBatch per sample instant (pure, no I/O).

A switch sends one sample instant in several notifications (per interface, per subscription,
per next hop); they share the notification timestamp. ``BatchAssembler`` merges them into the
open batch of that timestamp and emits it when a notification with counters for a *newer*
timestamp arrives, on sync_response, on ``flush()`` (the session's grace timer, or close).
State-only notifications (oper-status, interface-ref, group membership, ON_CHANGE heartbeats)
update the tables the batches are labelled from and never close a batch: an ON_CHANGE event
stamped between two samples must not cut a sample in half.

Next-hop counters are keyed by stable attributes (network instance, egress interface from
interface-ref, next-hop IP), not by next-hop index or group id, which change across reboots.
When a switch reports both AFT counter trees, the newer ``afts/counters`` one wins per value.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1.counters_pb2 import CounterBatch, InterfaceCounters, NextHopCounters

from .decode import (
    INTERFACE_COUNTERS,
    LAST_CHANGE_NS,
    LAST_CLEAR_NS,
    NEXT_HOP_COUNTERS,
    NH_INTERFACE,
    NH_IP,
    OPER_STATUS,
    SPEED_BPS,
    Samples,
)
from .deltas import DeltaTracker

_IF_FIELDS = tuple(c.replace("-", "_") for c in INTERFACE_COUNTERS)
_NH_FIELDS = tuple(c.replace("-", "_") for c in NEXT_HOP_COUNTERS)
# Max increase per ns at line rate: bytes = bit/s / 8e9; packets: bytes / 64 (minimum frame).
_OCTET_COUNTERS = frozenset(i for i, c in enumerate(INTERFACE_COUNTERS) if c.endswith("octets"))


@dataclass(slots=True)
class _Iface:
    oper_status: int = 0
    speed_bps: int = 0
    last_change_ns: int = 0
    last_clear_ns: int = 0


@dataclass(slots=True)
class _NextHop:
    ip: str = ""
    interface: str = ""
    groups: dict[str, int] = field(default_factory=dict)  # group id -> weight


@dataclass(slots=True)
class _Open:
    timestamp_ns: int
    received_ns: int
    opened_at: float  # time.monotonic() when opened, for the grace timer
    ifaces: dict[str, list[int | None]] = field(default_factory=dict)
    # (ni, index) -> [octets, packets] from the legacy tree and from the newer tree
    nh_legacy: dict[tuple[str, int], list[int | None]] = field(default_factory=dict)
    nh_newer: dict[tuple[str, int], list[int | None]] = field(default_factory=dict)
    # (ni, index) -> the next hop's attributes when its counters arrived: a delete or re-index
    # that follows within the instant must not relabel (or unmap) counters already sampled.
    nh_seen: dict[tuple[str, int], _NextHop] = field(default_factory=dict)
    # interface -> last-clear (ns) as of this instant: a clear reported after the sample (ON_CHANGE)
    # belongs to the next instant, not to this one.
    if_clear: dict[str, int] = field(default_factory=dict)


@dataclass
class AssemblerStats:
    """What happened to counter samples (monotonic counts)."""

    late: int = 0  # counters that came after their instant was emitted (sent in an extra batch)
    invalid: int = 0  # counters in notifications without a timestamp (dropped)
    unmapped: int = 0  # next-hop counters with no interface-ref known at emit time
    batches: int = 0
    counter_updates: int = 0  # counter values accepted into batches


class BatchAssembler:
    """The state of one switch as seen by one collector: tables, delta trackers, open batch.

    Args:
        switch: switch name (the Kafka key).
        collector_id: written into every batch.
        counter_bits: 64, or 32 when the device's counters wrap at 2^32.
        if_interval_ns / nh_interval_ns: sample intervals of interface / next-hop counters
            (0 = not sampled periodically: no GAP detection).
        gap_factor: a delta spanning more than this many intervals is flagged GAP.
    """

    def __init__(self, switch: str, *, collector_id: str, counter_bits: int = 64, if_interval_ns: int = 0,
                 nh_interval_ns: int = 0, gap_factor: float = 1.5) -> None:
        self.switch = switch
        self.collector_id = collector_id
        self.session = 0
        self.sequence = 0
        self.stats = AssemblerStats()
        self.if_deltas = DeltaTracker(counter_bits, if_interval_ns, gap_factor)
        self.nh_deltas = DeltaTracker(counter_bits, nh_interval_ns, gap_factor)
        self._ifaces: dict[str, _Iface] = {}
        self._nhs: dict[tuple[str, int], _NextHop] = {}
        self._open: _Open | None = None
        self._last_emitted_ns = 0

    # -- session -------------------------------------------------------------------------------

    def start_session(self, session: int) -> list[CounterBatch]:
        """A new gNMI session began: emit what is open, then forget all state (baselines next)."""
        out = self.flush()
        self.session = session
        self.if_deltas.clear()
        self.nh_deltas.clear()
        self._ifaces.clear()
        self._nhs.clear()
        self._last_emitted_ns = 0
        return out

    @property
    def open_since(self) -> float | None:
        """``time.monotonic()`` when the open batch was opened; None when nothing is open."""
        return None if self._open is None else self._open.opened_at

    # -- input ---------------------------------------------------------------------------------

    def add(self, s: Samples, received_ns: int) -> list[CounterBatch]:
        """Merge one notification's samples; returns the batches this completes.

        Counters of an instant that was already emitted (they came after the grace timer or
        after a newer instant) are not lost: they go out at once in a batch of their own for
        that instant, and the delta trackers drop whatever was already counted. Consumers that
        need exactly one record per instant merge by (switch, timestamp_ns).
        """
        ts = s.timestamp_ns
        out: list[CounterBatch] = []
        cur = self._open
        has_counters = bool(s.if_counters or s.nh_counters)
        if cur is not None and ts > cur.timestamp_ns and has_counters:
            out = self.flush()  # before applying this instant's state (e.g. a new last-clear)
            cur = None
        self._apply_state(s)
        if not has_counters:
            return out
        if ts == 0:  # a notification without a timestamp cannot be placed in time
            self.stats.invalid += s.counter_updates
            return out
        if cur is None and ts > self._last_emitted_ns:
            cur = self._open = _Open(ts, received_ns, time.monotonic())
        elif cur is None or ts < cur.timestamp_ns:
            self.stats.late += s.counter_updates
            late = _Open(ts, received_ns, time.monotonic())
            self._merge(late, s)
            b = self._build(late)
            return [*out, b] if b is not None else out
        self._merge(cur, s)
        return out

    def _merge(self, cur: _Open, s: Samples) -> None:
        ifaces = cur.ifaces
        for name, i, v in s.if_counters:
            vals = ifaces.get(name)
            if vals is None:
                vals = ifaces[name] = [None] * len(INTERFACE_COUNTERS)
                st = self._ifaces.get(name)
                cur.if_clear[name] = st.last_clear_ns if st is not None else 0
            vals[i] = v
        for ni, idx, i, v, newer in s.nh_counters:
            table = cur.nh_newer if newer else cur.nh_legacy
            nvals = table.get((ni, idx))
            if nvals is None:
                nvals = table[(ni, idx)] = [None, None]
                nh = self._nhs.get((ni, idx))
                if nh is not None and nh.interface and (ni, idx) not in cur.nh_seen:
                    cur.nh_seen[(ni, idx)] = _NextHop(nh.ip, nh.interface, dict(nh.groups))
            nvals[i] = v

    def sync(self) -> list[CounterBatch]:
        """sync_response: the initial state is complete; emit the open batch."""
        return self.flush()

    def _apply_state(self, s: Samples) -> None:
        for name, fld, v in s.if_state:
            st = self._ifaces.get(name)
            if st is None:
                st = self._ifaces[name] = _Iface()
            if fld == OPER_STATUS:
                st.oper_status = v
            elif fld == SPEED_BPS:
                st.speed_bps = v
            elif fld == LAST_CHANGE_NS:
                st.last_change_ns = v
            elif fld == LAST_CLEAR_NS:
                st.last_clear_ns = v
                cur = self._open
                if cur is not None and s.timestamp_ns == cur.timestamp_ns and name in cur.if_clear:
                    cur.if_clear[name] = v  # reported with this instant, in a later message
        for ni, idx, fld, sv in s.nh_info:
            nh = self._nhs.get((ni, idx))
            if nh is None:
                nh = self._nhs[(ni, idx)] = _NextHop()
            if fld == NH_IP:
                nh.ip = sv
            elif fld == NH_INTERFACE:
                nh.interface = sv
        for ni, gid, idx, weight in s.nhg_members:
            nh = self._nhs.get((ni, idx))
            if nh is None:
                nh = self._nhs[(ni, idx)] = _NextHop()
            if weight or gid not in nh.groups:  # an index-only update must not erase a known weight
                nh.groups[gid] = weight or 1
        for d in s.deletes:
            self._delete(d)

    def _delete(self, d: tuple[object, ...]) -> None:
        """Forget a deleted entry's attributes. Delta state stays: counters sampled in the open
        instant still need it, and a re-created entry is caught by its index (BASELINE) or by
        its counters going down (RESET)."""
        kind = d[0]
        if kind == "interface":
            self._ifaces.pop(str(d[1]), None)
        elif kind == "next-hop":
            self._nhs.pop((str(d[1]), int(d[2])), None)  # type: ignore[call-overload]
        elif kind == "group":
            for (ni, _), nh in self._nhs.items():
                if ni == d[1]:
                    nh.groups.pop(str(d[2]), None)
        elif kind == "member":
            nh = self._nhs.get((str(d[1]), int(d[3])))  # type: ignore[call-overload]
            if nh is not None:
                nh.groups.pop(str(d[2]), None)

    # -- output --------------------------------------------------------------------------------

    def flush(self) -> list[CounterBatch]:
        """Emit the open batch (if it holds any counter that is not a duplicate)."""
        cur, self._open = self._open, None
        if cur is None:
            return []
        batch = self._build(cur)
        self._last_emitted_ns = cur.timestamp_ns
        if batch is None:
            return []
        return [batch]

    def _build(self, cur: _Open) -> CounterBatch | None:
        ts = cur.timestamp_ns
        self.sequence += 1
        batch = CounterBatch(schema_version=SCHEMA_VERSION, switch=self.switch, timestamp_ns=ts,
                             collector_id=self.collector_id, sequence=self.sequence, received_ns=cur.received_ns,
                             session=self.session)
        upd = self.if_deltas.update_row
        accepted = 0
        none = _Iface()
        out = batch.interfaces
        for name in sorted(cur.ifaces):
            st = self._ifaces.get(name) or none
            clear = cur.if_clear.get(name, st.last_clear_ns)
            res, interval = upd(name, cur.ifaces[name], ts, clear, None, self._max_rates(st.speed_bps))
            if not res:
                continue
            accepted += len(res)
            ic = out.add(name=name, oper_status=st.oper_status, speed_bps=st.speed_bps, interval_ns=interval,
                         last_clear_ns=clear, last_change_ns=st.last_change_ns)
            _fill(ic, _IF_FIELDS, res)
        accepted += self._build_next_hops(cur, batch)
        if not accepted:
            self.sequence -= 1
            return None
        self.stats.batches += 1
        self.stats.counter_updates += accepted
        return batch

    @staticmethod
    @functools.cache
    def _max_rates(speed_bps: int) -> tuple[float, ...]:
        """Largest increase per ns of each interface counter at line rate (0 = unknown)."""
        b = speed_bps / 8e9 * 1.05  # bytes per ns, with slack
        return tuple(b if i in _OCTET_COUNTERS else b / 64 for i in range(len(INTERFACE_COUNTERS)))

    def _build_next_hops(self, cur: _Open, batch: CounterBatch) -> int:
        """Append the instant's next hops to ``batch``; returns the counter values added."""
        ts = cur.timestamp_ns
        accepted = 0
        used: set[tuple[str, ...]] = set()
        out = batch.next_hops
        for key in sorted(cur.nh_newer.keys() | cur.nh_legacy.keys()):
            newer = cur.nh_newer.get(key) or (None, None)
            legacy = cur.nh_legacy.get(key) or (None, None)
            vals = [n if n is not None else lg for n, lg in zip(newer, legacy, strict=True)]
            ni, idx = key
            nh = cur.nh_seen.get(key) or self._nhs.get(key)  # else learnt after the counters
            if nh is None or not nh.interface:
                self.stats.unmapped += sum(v is not None for v in vals)
                continue
            stable: tuple[str, ...] = (ni, nh.interface, nh.ip)
            if stable in used:  # two indexes with the same egress and IP: keep them apart
                stable = (*stable, str(idx))
            used.add(stable)
            res, interval = self.nh_deltas.update_row(stable, vals, ts, 0, idx)
            if not res:
                continue
            accepted += len(res)
            member_of = nh.groups or (self._nhs[key].groups if key in self._nhs else {})
            groups = sorted(member_of, key=lambda g: (len(g), g))
            nc = out.add(group=",".join(groups), index=idx, egress_interface=nh.interface, next_hop_ip=nh.ip,
                         weight=member_of[groups[0]] if groups else 1, interval_ns=interval)
            _fill(nc, _NH_FIELDS, res)
        return accepted


def _fill(msg: InterfaceCounters | NextHopCounters, fields: tuple[str, ...],
          res: list[tuple[int, int, int, int, int]]) -> None:
    """Set the Counter fields of ``msg`` from update_row results (attribute writes: the fastest
    way into upb messages, measured ~30% faster than constructor keywords)."""
    for i, v, d, status, _ in res:
        c = getattr(msg, fields[i])
        c.value = v
        if d:
            c.delta = d
        if status:
            c.status = status  # type: ignore[assignment]
