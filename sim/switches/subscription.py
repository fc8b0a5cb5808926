"""gNMI Subscribe semantics, without I/O: validating a SubscriptionList and deciding what to send.

:func:`plan_subscription` turns a ``SubscriptionList`` into :class:`Trigger` rules or raises
:class:`GnmiError` (a gRPC status code name and a message naming the offending field).
:class:`Subscription` then answers, for one stream, "what do I send now?" given a new tick
(:meth:`Subscription.on_tick`), an oper-status event (:meth:`Subscription.on_oper`) or a poll,
as ready ``SubscribeResponse`` bytes. The rules (gNMI spec 3.5):

* SAMPLE: all selected leaves once per ``sample_interval`` (0 = every tick), judged on tick
  timestamps and stamped with the tick's ``timestamp_ns``. Sample *k* is due at the first tick
  with ``timestamp >= first + k * interval - tolerance`` and at least ``interval - tolerance``
  after the previous one (tolerance: half an engine tick, at most half the interval), so jitter
  never skips a sample, late ticks never bunch two, and the long-run rate is one per interval.
  ``suppress_redundant`` sends only leaves that changed since the last update, and everything
  again once per ``heartbeat_interval``.
* ON_CHANGE: every leaf first, then a leaf whenever it changes (checked every tick; oper-status
  and last-change right away from the engine's event), and everything per ``heartbeat_interval``.
* TARGET_DEFINED: counters are sampled (``sample_interval``, default 1 s), other leaves on change.
* ``updates_only``: nothing before ``sync_response``; the current values become the baseline.
* Entries that vanish (e.g. next-hop groups) are sent as ``delete`` paths.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field

from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.sim.switches.encode import (
    ENCODINGS,
    UpdateEncoder,
    chunk,
    notification,
    prefix_field,
    subscribe_response,
)
from flowtracer.sim.switches.paths import PathError, Selection, Selector, request_elems, request_origin, resolve
from flowtracer.sim.switches.platform_tables import platform_view
from flowtracer.sim.switches.schema import IF_LAST_CHANGE, IF_OPER_STATUS, INTERFACES, TABLES, Row, RowKey, Tick

STREAM = gnmi_pb2.SubscriptionList.STREAM
ONCE = gnmi_pb2.SubscriptionList.ONCE
POLL = gnmi_pb2.SubscriptionList.POLL
TARGET_DEFINED = gnmi_pb2.SubscriptionMode.TARGET_DEFINED
ON_CHANGE = gnmi_pb2.SubscriptionMode.ON_CHANGE
SAMPLE = gnmi_pb2.SubscriptionMode.SAMPLE

INT64_MAX = 2**63 - 1
#: Most paths accepted in one SubscriptionList or GetRequest (all servers share one event loop).
MAX_PATHS = 1000
#: Shortest sample / heartbeat interval accepted (ns); shorter ones are rejected (gNMI 3.5.1.5.2).
MIN_INTERVAL_NS = 1_000_000
#: Sample interval for counters in TARGET_DEFINED mode when the client gives none (ns).
TARGET_DEFINED_SAMPLE_NS = 1_000_000_000


class GnmiError(Exception):
    """A request the target refuses; ``code`` is a ``grpc.StatusCode`` name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_encoding(encoding: int) -> None:
    """UNIMPLEMENTED for encodings this target does not serve (gNMI 3.3.1)."""
    if encoding not in ENCODINGS:
        name = gnmi_pb2.Encoding.Name(encoding) if encoding in gnmi_pb2.Encoding.values() else str(encoding)
        raise GnmiError("UNIMPLEMENTED", f"encoding {name} is not supported: use JSON, JSON_IETF or PROTO")


@dataclass(frozen=True)
class Trigger:
    """One sending rule: which leaves, and when (sample schedule or on change)."""

    path: str
    selectors: tuple[Selector, ...]
    on_change: bool = False
    interval_ns: int = 0  # SAMPLE interval; 0 = every tick
    heartbeat_ns: int = 0
    suppress_redundant: bool = False
    #: Origin of the notifications' prefix: "openconfig", or the request's on another platform.
    origin: str = "openconfig"


@dataclass(frozen=True)
class SubscribePlan:
    """A validated SubscriptionList."""

    mode: int
    encoding: int
    target: str
    updates_only: bool
    triggers: tuple[Trigger, ...]


def _interval(value: int, what: str) -> int:
    if value > INT64_MAX:
        raise GnmiError("INVALID_ARGUMENT", f"{what} {value} ns is out of range (a negative number sent as uint64?)")
    if 0 < value < MIN_INTERVAL_NS:
        raise GnmiError("INVALID_ARGUMENT", f"{what} {value} ns is below the minimum of {MIN_INTERVAL_NS} ns")
    return value


def plan_subscription(sl: gnmi_pb2.SubscriptionList, platform: str = "openconfig") -> SubscribePlan:
    """Validate a SubscriptionList for a switch serving ``platform``'s paths; GnmiError(INVALID_ARGUMENT /
    UNIMPLEMENTED) names what is wrong."""
    if sl.mode not in (STREAM, ONCE, POLL):
        raise GnmiError("INVALID_ARGUMENT", f"SubscriptionList.mode {sl.mode} is not STREAM, ONCE or POLL")
    if not sl.subscription:
        raise GnmiError("INVALID_ARGUMENT", "SubscriptionList.subscription is empty: give at least one path")
    if len(sl.subscription) > MAX_PATHS:
        raise GnmiError("INVALID_ARGUMENT", f"{len(sl.subscription)} subscriptions in one SubscriptionList: "
                                            f"at most {MAX_PATHS}")
    check_encoding(sl.encoding)
    prefix = sl.prefix if sl.HasField("prefix") else None
    models = [m.name for m in sl.use_models]
    triggers: list[Trigger] = []
    view = platform_view(platform)
    for i, sub in enumerate(sl.subscription):
        origin = request_origin(prefix, sub.path)
        try:
            selection = resolve(request_elems(prefix, sub.path, view), models, platform, origin)
        except PathError as e:
            raise GnmiError("INVALID_ARGUMENT", f"subscription[{i}]: {e}") from None
        o = prefix_origin(platform, origin)
        if sl.mode != STREAM:  # modes and intervals only mean something for STREAM (gNMI 3.5.1.3)
            triggers.append(Trigger(selection.text, selection.selectors, origin=o))
            continue
        if sub.mode not in (TARGET_DEFINED, ON_CHANGE, SAMPLE):
            raise GnmiError("INVALID_ARGUMENT", f"subscription[{i}] ({selection.text}): mode {sub.mode} is not "
                                                "TARGET_DEFINED, ON_CHANGE or SAMPLE")
        interval = _interval(sub.sample_interval, f"subscription[{i}] ({selection.text}): sample_interval")
        heartbeat = _interval(sub.heartbeat_interval, f"subscription[{i}] ({selection.text}): heartbeat_interval")
        if sub.mode == SAMPLE:
            triggers.append(Trigger(selection.text, selection.selectors, False, interval, heartbeat,
                                    sub.suppress_redundant, origin=o))
        elif sub.mode == ON_CHANGE:
            triggers.append(Trigger(selection.text, selection.selectors, True, heartbeat_ns=heartbeat, origin=o))
        else:
            sampled, changing = _split(selection)
            if sampled:
                triggers.append(Trigger(selection.text, sampled, False, interval or TARGET_DEFINED_SAMPLE_NS,
                                        heartbeat, sub.suppress_redundant, origin=o))
            if changing or not sampled:
                triggers.append(Trigger(selection.text, changing, True, heartbeat_ns=heartbeat, origin=o))
    return SubscribePlan(sl.mode, sl.encoding, prefix.target if prefix is not None else "", sl.updates_only,
                         tuple(triggers))


def prefix_origin(platform: str, origin: str) -> str:
    """The origin a response's prefix carries: ``openconfig`` on an OpenConfig switch (as before platforms),
    else the request's own (SR Linux answers native paths without one)."""
    return "openconfig" if platform_view(platform).tables is TABLES else origin


def _split(selection: Selection) -> tuple[tuple[Selector, ...], tuple[Selector, ...]]:
    """TARGET_DEFINED: counters are sampled, every other leaf is sent on change."""
    sampled, changing = [], []
    for s in selection.selectors:
        a = tuple(leaf for leaf in s.leaves if leaf.sampled)
        b = tuple(leaf for leaf in s.leaves if not leaf.sampled)
        if a:
            sampled.append(Selector(s.table, s.binds, a))
        if b:
            changing.append(Selector(s.table, s.binds, b))
    return tuple(sampled), tuple(changing)


def matched_keys(sel: Selector, rows: dict[RowKey, Row]) -> list[RowKey]:
    """The entries of ``rows`` that ``sel`` selects, in row order."""
    if None not in sel.binds:
        key = tuple(sel.binds)
        return [key] if key in rows else []  # type: ignore[list-item]
    if all(b is None for b in sel.binds):
        return list(rows)
    return [k for k in rows if sel.matches(k)]


def _projector(sel: Selector) -> Callable[[Row], tuple[object, ...]]:
    cols = [leaf.column for leaf in sel.leaves]
    if len(cols) == 1:
        c = cols[0]
        return lambda row: (row[c],)
    return operator.itemgetter(*cols)  # type: ignore[return-value]


@dataclass
class _TriggerState:
    track: bool  # keep last-sent values (ON_CHANGE, suppress_redundant)
    projectors: list[Callable[[Row], tuple[object, ...]]]
    last_tick: int = -1
    next_sample: int = 0  # when the next sample is due (ns, on the grid of the first one)
    last_sample: int = -1
    last_full: int = -1
    present: list[set[RowKey]] = field(default_factory=list)
    values: dict[tuple[int, RowKey], tuple[object, ...]] = field(default_factory=dict)


class Subscription:
    """The send decisions of one Subscribe stream; every method returns SubscribeResponse bytes.

    ``encoder`` is the switch's shared :class:`UpdateEncoder`; ``boot_epoch`` the switch's epoch
    when the stream started (a tick from another epoch raises GnmiError(UNAVAILABLE)).
    """

    def __init__(self, plan: SubscribePlan, encoder: UpdateEncoder, boot_epoch: int) -> None:
        self.plan = plan
        self.encoder = encoder
        self.boot_epoch = boot_epoch
        self.prefix = prefix_field(plan.target)
        self._prefixes = {t.origin: prefix_field(plan.target, t.origin) for t in plan.triggers}
        self._states = [
            _TriggerState(t.on_change or t.suppress_redundant, [_projector(s) for s in t.selectors],
                          present=[set() for _ in t.selectors])
            for t in plan.triggers
        ]

    @property
    def wants_oper_events(self) -> bool:
        """True when an ON_CHANGE rule covers an interface's oper-status or last-change."""
        return any(t.on_change and sel.table is INTERFACES
                   and any(leaf.column in (IF_OPER_STATUS, IF_LAST_CHANGE) for leaf in sel.leaves)
                   for t in self.plan.triggers for sel in t.selectors)

    # -- building blocks ------------------------------------------------------------------------

    def _keys(self, t: Trigger, tick: Tick) -> list[list[RowKey]]:
        return [matched_keys(s, tick.rows[s.table.source]) for s in t.selectors]

    def _deletes(self, t: Trigger, st: _TriggerState, keys: list[list[RowKey]], ts: int) -> list[bytes]:
        parts = []
        for j, (sel, ks) in enumerate(zip(t.selectors, keys, strict=True)):
            now = set(ks)
            gone = st.present[j] - now
            for k in sorted(gone):
                parts.append(self.encoder.delete(sel.table, k))
                st.values.pop((j, k), None)
            st.present[j] = now
        pfx = self._prefixes[t.origin]
        return [subscribe_response(notification(ts, pfx, run)) for run in chunk(parts)] if parts else []

    def _record(self, t: Trigger, st: _TriggerState, tick: Tick, keys: list[list[RowKey]]) -> None:
        if st.track:
            for j, (sel, ks) in enumerate(zip(t.selectors, keys, strict=True)):
                rows, proj = tick.rows[sel.table.source], st.projectors[j]
                for k in ks:
                    st.values[(j, k)] = proj(rows[k])

    def _full(self, t: Trigger, st: _TriggerState, tick: Tick) -> list[bytes]:
        keys = self._keys(t, tick)
        out = self._deletes(t, st, keys, tick.timestamp_ns)
        out += self.encoder.full(tick, t.selectors, keys, self.plan.encoding, self._prefixes[t.origin])
        self._record(t, st, tick, keys)
        st.last_full = tick.timestamp_ns
        return out

    def _changes(self, t: Trigger, st: _TriggerState, tick: Tick) -> list[bytes]:
        keys = self._keys(t, tick)
        out = self._deletes(t, st, keys, tick.timestamp_ns)
        parts: list[bytes] = []
        enc = self.plan.encoding
        for j, (sel, ks) in enumerate(zip(t.selectors, keys, strict=True)):
            rows, proj = tick.rows[sel.table.source], st.projectors[j]
            for k in ks:
                new = proj(rows[k])
                old = st.values.get((j, k))
                if old == new:
                    continue
                for n, leaf in enumerate(sel.leaves):
                    if old is None or old[n] != new[n]:
                        parts.append(self.encoder.leaf_update(sel.table, leaf, k, new[n], enc))
                st.values[(j, k)] = new
        if parts:
            pfx = self._prefixes[t.origin]
            out += [subscribe_response(notification(tick.timestamp_ns, pfx, run)) for run in chunk(parts)]
        return out

    def _check_epoch(self, tick: Tick) -> None:
        if tick.boot_epoch != self.boot_epoch:
            raise GnmiError("UNAVAILABLE", "the switch rebooted: subscribe again")

    # -- what the server calls ------------------------------------------------------------------

    def initial(self, tick: Tick) -> list[bytes]:
        """Updates before ``sync_response``: everything, or (``updates_only``) nothing but a baseline."""
        self._check_epoch(tick)
        out: list[bytes] = []
        for t, st in zip(self.plan.triggers, self._states, strict=True):
            st.last_tick = st.last_full = tick.timestamp_ns
            st.next_sample = tick.timestamp_ns + t.interval_ns
            st.last_sample = tick.timestamp_ns
            if self.plan.updates_only:
                keys = self._keys(t, tick)
                st.present = [set(ks) for ks in keys]
                self._record(t, st, tick, keys)
            else:
                out += self._full(t, st, tick)
        return out

    def on_tick(self, tick: Tick, tolerance_ns: int) -> list[bytes]:
        """Responses due after an engine tick; ``tolerance_ns`` is about half the engine's tick."""
        self._check_epoch(tick)
        ts = tick.timestamp_ns
        out: list[bytes] = []
        for t, st in zip(self.plan.triggers, self._states, strict=True):
            if ts <= st.last_tick:
                continue
            st.last_tick = ts
            heartbeat_due = t.heartbeat_ns > 0 and ts - st.last_full >= t.heartbeat_ns - min(
                tolerance_ns, t.heartbeat_ns // 2)
            if t.on_change:
                out += self._full(t, st, tick) if heartbeat_due else self._changes(t, st, tick)
                continue
            tol = min(tolerance_ns, t.interval_ns // 2)
            if ts < st.next_sample - tol or ts - st.last_sample < t.interval_ns - tol:
                continue
            # Due times on a grid, so a 2.5 s interval on 1 s ticks averages 2.5 s (2, 3, 2, 3 s)
            # instead of creeping to 2 s; never two samples closer than interval - tolerance
            # (late ticks); re-anchored after a gap (e.g. a pause).
            st.last_sample = ts
            st.next_sample += t.interval_ns
            if st.next_sample <= ts - tol:
                st.next_sample = ts + t.interval_ns
            if t.suppress_redundant and not heartbeat_due:
                out += self._changes(t, st, tick)
            else:
                out += self._full(t, st, tick)
        return out

    def on_oper(self, timestamp_ns: int, interface: str, oper_status: str, last_change_ns: int) -> list[bytes]:
        """ON_CHANGE updates for an interface's oper-status / last-change, stamped with the event time."""
        parts: list[bytes] = []
        key = (interface,)
        for t, st in zip(self.plan.triggers, self._states, strict=True):
            if not t.on_change:
                continue
            for j, sel in enumerate(t.selectors):
                if sel.table is not INTERFACES or not sel.matches(key):
                    continue
                old = st.values.get((j, key))
                if old is None:
                    continue  # not sent yet: the next tick's diff sends it whole
                new = list(old)
                for n, leaf in enumerate(sel.leaves):
                    if leaf.column == IF_OPER_STATUS:
                        new[n] = oper_status
                    elif leaf.column == IF_LAST_CHANGE:
                        new[n] = last_change_ns
                    else:
                        continue
                    if new[n] != old[n]:
                        parts.append(self.encoder.leaf_update(sel.table, leaf, key, new[n], self.plan.encoding))
                st.values[(j, key)] = tuple(new)
        if not parts:
            return []
        return [subscribe_response(notification(timestamp_ns, self.prefix, run)) for run in chunk(parts)]

    def poll(self, tick: Tick) -> list[bytes]:
        """Every selected leaf now (POLL and ONCE); no state kept."""
        self._check_epoch(tick)
        out: list[bytes] = []
        for t in self.plan.triggers:
            out += self.encoder.full(tick, t.selectors, self._keys(t, tick), self.plan.encoding,
                                     self._prefixes[t.origin])
        return out

