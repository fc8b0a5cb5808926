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

Why one module over 400 lines: ``BatchAssembler`` is one state machine (open batches per instant,
the label tables, the cached instant shapes) whose every method reads and writes the same state;
the decoding before it and the wire encoding after it are modules of their own.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import numpy as np

from flowtracer.collectors.gnmi.counters.column_deltas import ColumnDeltas, DeltaState
from flowtracer.collectors.gnmi.counters.columns import EncodedBatch, InstantPlan
from flowtracer.collectors.gnmi.counters.decode import INTERFACE_COUNTERS, NEXT_HOP_COUNTERS
from flowtracer.collectors.gnmi.counters.layout import Layout
from flowtracer.collectors.gnmi.counters.samples import LAST_CLEAR_NS, NH_INTERFACE, NH_IP, Samples
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1.counters_pb2 import CounterBatch, InterfaceCounters, NextHopCounters

#: What the assembler emits: a CounterBatch, or the same already serialized (the columnar path).
Batch = CounterBatch | EncodedBatch
_MAX_PLANS = 4  # instant shapes kept per switch (usually one; ~50 KB each for 64 ports)

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
    # While only fast-decoded messages made this instant: their (layout, values), merged at build
    # time on columns (InstantPlan). None: merged the general way above.
    parts: list[tuple[Layout, np.ndarray]] | None = None


@dataclass
class AssemblerStats:
    """What happened to counter samples (monotonic counts)."""

    late: int = 0  # counters that came after their instant was emitted (sent in an extra batch)
    invalid: int = 0  # counters in notifications without a timestamp (dropped)
    unmapped: int = 0  # next-hop counters with no interface-ref known at emit time
    batches: int = 0
    counter_updates: int = 0  # counter values accepted into batches


class BatchAssembler:
    """The state of one switch as seen by one collector: tables, delta state, open batch.

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
        # The delta state of every counter, used by both paths (general and columnar) alike.
        self.if_deltas = DeltaState(len(INTERFACE_COUNTERS), counter_bits, if_interval_ns, gap_factor)
        self.nh_deltas = DeltaState(len(NEXT_HOP_COUNTERS), counter_bits, nh_interval_ns, gap_factor)
        self._ifaces: dict[str, _Iface] = {}
        self._nhs: dict[tuple[str, int], _NextHop] = {}
        self._open: _Open | None = None
        self._last_emitted_ns = 0
        # The columnar path: the state tables' version (bumped on every change), instant plans by
        # (layouts, version), and per layout the version and values its last-clear / last-change
        # leaves were last applied with.
        self._version = 0
        self._plans: dict[tuple[tuple[Layout, ...], int], InstantPlan] = {}
        self._state_seen: dict[Layout, tuple[int, np.ndarray]] = {}

    # -- session -------------------------------------------------------------------------------

    def start_session(self, session: int) -> list[Batch]:
        """A new gNMI session began: emit what is open, then forget all state (baselines next)."""
        out = self.flush()
        self.session = session
        self._plans.clear()
        self._state_seen.clear()
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

    def add(self, s: Samples, received_ns: int) -> list[Batch]:
        """Merge one notification's samples; returns the batches this completes.

        Counters of an instant that was already emitted (they came after the grace timer or
        after a newer instant) are not lost: they go out at once in a batch of their own for
        that instant, and the delta state drops whatever was already counted. Consumers that
        need exactly one record per instant merge by (switch, timestamp_ns).
        """
        ts = s.timestamp_ns
        out: list[Batch] = []
        cur = self._open
        has_counters = bool(s.if_counters or s.nh_counters)
        if cur is not None and ts > cur.timestamp_ns and has_counters:
            out = self.flush()  # before applying this instant's state (e.g. a new last-clear)
            cur = None
        if cur is not None and cur.parts is not None and (has_counters or s.if_state or s.nh_info or s.nhg_members
                                                          or s.deletes):
            self._materialize(cur)  # the columnar merge assumes no other state change within the instant
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

    def add_part(self, layout: Layout, vals: np.ndarray, received_ns: int) -> list[Batch]:
        """What ``add(layout.samples(vals), received_ns)`` does, for a message ``FastDecoder.match``
        read: kept as columns while the open instant is made only of such messages (steady state),
        so that it is merged and built by an ``InstantPlan``; anything else goes through ``add``."""
        ts = layout.timestamp(vals)
        out: list[Batch] = []
        cur = self._open
        if cur is not None and ts > cur.timestamp_ns:
            out = self.flush()
            cur = None
        if (ts == 0 or (cur is None and ts <= self._last_emitted_ns) or
                (cur is not None and (ts < cur.timestamp_ns or cur.parts is None))):
            return [*out, *self.add(layout.samples(vals), received_ns)]
        if len(layout.st_sel):
            self._apply_part_state(layout, vals)
        if cur is None:
            cur = self._open = _Open(ts, received_ns, time.monotonic(), parts=[])
        assert cur.parts is not None
        cur.parts.append((layout, vals))
        return out

    def _apply_part_state(self, layout: Layout, vals: np.ndarray) -> None:
        """Apply a fast message's last-clear / last-change leaves, unless this layout applied the same
        values and nothing changed since (the usual case: they repeat every sample)."""
        values = vals[layout.st_sel]
        seen = self._state_seen.get(layout)
        if seen is not None and seen[0] == self._version and np.array_equal(seen[1], values):
            return
        state = layout.if_state(vals)
        if self._if_state_changes(state):
            self._apply_state(Samples(layout.timestamp(vals), if_state=state))
        if len(self._state_seen) >= 4 * _MAX_PLANS:
            self._state_seen.clear()
        self._state_seen[layout] = (self._version, values)

    def _materialize(self, cur: _Open) -> None:
        """Merge the columnar parts of ``cur`` the general way (tables unchanged since they came)."""
        parts, cur.parts = cur.parts, None
        for layout, vals in parts or ():
            self._merge(cur, layout.samples(vals))

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

    def sync(self) -> list[Batch]:
        """sync_response: the initial state is complete; emit the open batch."""
        return self.flush()

    def _if_state_changes(self, if_state: list[tuple[str, str, int]]) -> bool:
        """Whether applying ``if_state`` would change the interface tables (state fields are named
        as ``_Iface``'s attributes)."""
        return any((st := self._ifaces.get(name)) is None or getattr(st, fld) != v for name, fld, v in if_state)

    def _apply_state(self, s: Samples) -> None:
        # Only a change bumps the version (and so the instant plan): state leaves that repeat every
        # sample (last-clear in several layouts, ON_CHANGE heartbeats) must not force a re-plan.
        if s.nh_info or s.nhg_members or s.deletes or self._if_state_changes(s.if_state):
            self._version += 1
        for name, fld, v in s.if_state:
            st = self._ifaces.get(name)
            if st is None:
                st = self._ifaces[name] = _Iface()
            setattr(st, fld, v)
            if fld == LAST_CLEAR_NS:
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

    def flush(self) -> list[Batch]:
        """Emit the open batch (if it holds any counter that is not a duplicate)."""
        cur, self._open = self._open, None
        if cur is None:
            return []
        batch = self._build(cur)
        self._last_emitted_ns = cur.timestamp_ns
        if batch is None:
            return []
        return [batch]

    def _build(self, cur: _Open) -> Batch | None:
        if cur.parts is not None:
            return self._build_columns(cur)
        ts = cur.timestamp_ns
        self.sequence += 1
        batch = CounterBatch(schema_version=SCHEMA_VERSION, switch=self.switch, timestamp_ns=ts,
                             collector_id=self.collector_id, sequence=self.sequence, received_ns=cur.received_ns,
                             session=self.session)
        accepted = 0
        none = _Iface()
        out = batch.interfaces
        names = sorted(cur.ifaces)
        sts = [self._ifaces.get(name) or none for name in names]
        clears = [cur.if_clear.get(name, st.last_clear_ns) for name, st in zip(names, sts, strict=True)]
        r = _row_deltas(self.if_deltas, names, [None] * len(names), [cur.ifaces[n] for n in names], ts,
                        clears, [self._max_rates(st.speed_bps) for st in sts])
        for name, st, clear, (res, interval) in zip(names, sts, clears, r, strict=True):
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

    def _build_columns(self, cur: _Open) -> EncodedBatch | None:
        """The batch of an instant made only of fast messages, on columns."""
        assert cur.parts is not None
        layouts = tuple(lay for lay, _ in cur.parts)
        key = (layouts, self._version)
        plan = self._plans.get(key)
        if plan is None:
            plan = InstantPlan(layouts, self._ifaces, self._nhs, _Iface(), self._max_rates)
            if len(self._plans) >= _MAX_PLANS:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
        values = np.concatenate([v for _, v in cur.parts])
        self.sequence += 1
        header = CounterBatch(schema_version=SCHEMA_VERSION, switch=self.switch, timestamp_ns=cur.timestamp_ns,
                              collector_id=self.collector_id, sequence=self.sequence, received_ns=cur.received_ns,
                              session=self.session)
        data, accepted = plan.encode(header, values, self.if_deltas, self.nh_deltas)
        self.stats.unmapped += plan.unmapped
        if not accepted:
            self.sequence -= 1
            return None
        self.stats.batches += 1
        self.stats.counter_updates += accepted
        return EncodedBatch(self.switch, data)

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
        rows: list[tuple[tuple[str, int], _NextHop, tuple[str, ...], list[int | None]]] = []
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
            rows.append((key, nh, stable, vals))
        results = _row_deltas(self.nh_deltas, [row[2] for row in rows], [row[0][1] for row in rows],
                              [row[3] for row in rows], ts, [0] * len(rows), None)
        out = batch.next_hops
        for (key, nh, _, _), (res, interval) in zip(rows, results, strict=True):
            if not res:
                continue
            accepted += len(res)
            member_of = nh.groups or (self._nhs[key].groups if key in self._nhs else {})
            groups = sorted(member_of, key=lambda g: (len(g), g))
            nc = out.add(group=",".join(groups), index=key[1], egress_interface=nh.interface, next_hop_ip=nh.ip,
                         weight=member_of[groups[0]] if groups else 1, interval_ns=interval,
                         group_weights=[member_of[g] for g in groups] if len(groups) > 1 else [])
            _fill(nc, _NH_FIELDS, res)
        return accepted


def _row_deltas(deltas: DeltaState, keys: list[object], idents: list[object], values: list[list[int | None]],
                ts: int, clears: list[int], max_rates: list[tuple[float, ...]] | None
                ) -> list[tuple[list[tuple[int, int, int, int, int]], int]]:
    """The general path's counters of one instant through the production delta rule: per object
    ([(i, value, delta, status, interval_ns)] of its counters not dropped, its interval_ns).
    ``values[r][i]`` None = not in this sample; ``clears``: last-clear ns per object; ``max_rates``:
    per object the largest increase per ns of each counter (None = unknown)."""
    if not keys:
        return []
    flat = [v for row in values for v in row]
    shape = (len(values), len(values[0]))
    present = np.array([v is not None for v in flat], bool).reshape(shape)
    vals = np.array([v or 0 for v in flat], np.uint64).reshape(shape)
    rate = np.array(max_rates, np.float64) if max_rates is not None else None
    r: ColumnDeltas = deltas.update(deltas.rows(keys, idents), vals, present, ts,
                                   np.array(clears, np.int64)[:, None], rate)
    intervals = r.interval_ns.tolist()
    out: list[tuple[list[tuple[int, int, int, int, int]], int]] = [([], iv) for iv in intervals]
    rr, cc = np.nonzero(r.kept)
    for k, i, v, d, st in zip(rr.tolist(), cc.tolist(), vals[rr, cc].tolist(), r.delta[rr, cc].tolist(),
                              r.status[rr, cc].tolist(), strict=True):
        out[k][0].append((i, v, d, st, intervals[k]))
    return out

def _fill(msg: InterfaceCounters | NextHopCounters, fields: tuple[str, ...],
          res: list[tuple[int, int, int, int, int]]) -> None:
    """Set the Counter fields of ``msg`` from ``_row_deltas`` results (attribute writes: the fastest
    way into upb messages, measured ~30% faster than constructor keywords)."""
    for i, v, d, status, _ in res:
        c = getattr(msg, fields[i])
        c.value = v
        if d:
            c.delta = d
        if status:
            c.status = status  # type: ignore[assignment]
