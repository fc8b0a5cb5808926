"""Event-time windows of one stage's partition: the books, and releasing windows as the rule allows (pure).

The tracker buffers items per window end, keeps what the rule reads (which sources reported which windows, and
when; who is behind; what was released), counts late and incomplete windows and logs them. Whether a window may
close is decided by the rule in window_policy.py, asked on every check (``due``): this module holds no rule of its
own. Records for a window already released are late: counted, not reopened.

Bounded: at most ``max_windows`` windows are buffered; past the bound the oldest are released as they are (the
policy's *overflow*), counted in ``overflowed`` (and in ``incomplete`` when a source was missing).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from flowtracer.stream.stages.window_policy import (
    MAX_WINDOWS,
    NO_STREAMS,
    OVERFLOW,
    REQUIRED_GRACE_NS,
    Release,
    Rules,
    Seen,
    behind,
    clocked_sources,
    frontier,
    lagging,
    next_due,
    releases,
    stage_graces,
    stream_of,
)

__all__ = ["MAX_WINDOWS", "NO_STREAMS", "WindowTracker", "stage_tracker", "stream_of"]

log = logging.getLogger(__name__)
_LOGGED_INCOMPLETE = 20  # the first few incomplete windows are logged, then only counted


@dataclass
class _Window:
    first_seen_ns: int
    sources: set[str] = field(default_factory=set)
    items: dict[Any, Any] = field(default_factory=dict)  # identity -> item: a redelivery replaces, never adds
    tokens: list[Any] = field(default_factory=list)


class _Frontiers(Mapping[str, int]):
    """stream -> its median source's newest window end (window_policy.frontier), computed when first asked and kept
    until a source of that stream reports a newer window."""

    def __init__(self, newest: Mapping[str, int]) -> None:
        self._newest = newest
        self._cache: dict[str, int] = {}

    def __getitem__(self, stream: str) -> int:
        if stream not in self._cache:
            self._cache[stream] = frontier(self._newest, stream)
        return self._cache[stream]

    def __iter__(self) -> Iterator[str]:
        return iter({stream_of(s) for s in self._newest})

    def __len__(self) -> int:
        return len({stream_of(s) for s in self._newest})

    def moved(self, stream: str) -> None:
        self._cache.pop(stream, None)


class WindowTracker:
    """Buffers items per window end and tells which windows may be finalized, in order (window_policy.py)."""

    def __init__(self, hop_ns: int, grace_ns: int, lateness_hops: int = 2, memory_hops: int = 10,
                 required: frozenset[str] = frozenset(), required_grace_ns: int = REQUIRED_GRACE_NS,
                 name: str = "", max_windows: int = MAX_WINDOWS, clocked: frozenset[str] | None = None) -> None:
        """Durations in ns. ``required``: sources every window needs on top of the recently seen ones, waited for
        ``required_grace_ns`` (at least ``grace_ns``) when missing; ``clocked``: the required ones stamped by a clock
        of their own (None: none is); ``memory_hops``: how many released windows say which sources are expected."""
        self.rules = Rules(hop_ns, grace_ns, max(required_grace_ns, grace_ns), lateness_hops, max_windows, required,
                           clocked if clocked is not None else frozenset())
        self.name = name  # for log lines, e.g. "links stage of partition 3"
        self.released_up_to = 0  # window ends <= this were finalized
        self.late = 0
        #: Windows released without a source that was expected (it moved on, or was waited out).
        self.incomplete = 0
        #: Windows released only because more than ``max_windows`` were buffered.
        self.overflowed = 0
        self._windows: dict[int, _Window] = {}
        self._recent: deque[tuple[int, frozenset[str]]] = deque(maxlen=memory_hops)
        self._released: dict[int, Release] = {}  # window end -> why the last check released it (for ``pop``)
        self._ever: set[str] = set()
        self._started_ns: int | None = None
        self._newest: dict[str, int] = {}  # source -> newest window end it reported
        self._advanced_at: dict[str, int] = {}  # source -> clock when it last reported a newer window, ns
        self._upstream_released: dict[str, int] = {}  # source -> newest window end its stage here released, ns
        self._behind_since: dict[str, tuple[int, int]] = {}  # window_policy.lagging's state
        self._lagging: frozenset[str] = frozenset()  # as last judged, to log changes
        #: The last check's (clock, unread streams, upstream releases), and whether anything changed since.
        self._last: tuple[int, frozenset[str], Mapping[str, int]] | None = None
        self._changed = False
        self._next_due: tuple[int | None] | None = None  # next_due_ns's answer since the last check, if asked
        # Checked often (today after every input record): what is derived from the recent windows and the sources'
        # newest windows is kept until those change, not rebuilt from hundreds of sources each time.
        self._expected_cache: frozenset[str] | None = None
        self._behind_cache: tuple[int, dict[str, int]] | None = None
        self._frontiers = _Frontiers(self._newest)

    def add(self, window_end_ns: int, source: str, item: Any, token: Any, now_ns: int, identity: Any = None) -> bool:
        """Buffer ``item`` (and its ack ``token``) at clock ``now_ns``; False (and counted) when the window was
        already released.

        ``identity`` names the record (e.g. producer id and sequence): a second record with the same
        identity in the same window is an at-least-once redelivery and replaces the first instead of
        being counted twice. Its token is kept, so both deliveries are acked.
        """
        if window_end_ns <= self.released_up_to:
            self.late += 1
            return False
        w = self._windows.get(window_end_ns)
        if w is None:
            w = self._windows[window_end_ns] = _Window(now_ns)
        w.sources.add(source)
        if item is not None:
            w.items[identity if identity is not None else ("#", len(w.tokens))] = item
        w.tokens.append(token)
        self._ever.add(source)
        self._changed = True
        if self._started_ns is None:
            self._started_ns = now_ns
        if window_end_ns > self._newest.get(source, 0):
            self._newest[source] = window_end_ns
            self._advanced_at[source] = now_ns
            self._behind_cache = None
            self._frontiers.moved(stream_of(source))
        return True

    def _expected(self) -> frozenset[str]:
        if self._expected_cache is None:
            out: set[str] = set()
            for _, sources in self._recent:
                out |= sources
            self._expected_cache = frozenset(out)
        return self._expected_cache

    def _behind(self) -> tuple[int, dict[str, int]]:
        if self._behind_cache is None:
            self._behind_cache = behind(self.rules, self._newest)
        return self._behind_cache

    def behind(self) -> frozenset[str]:
        """Sources whose newest window is more than ``grace + lateness`` behind the median source's newest."""
        return frozenset(self._behind()[1])

    def lagging(self, now_ns: int) -> frozenset[str]:
        """Sources whose clock runs behind at ``now_ns`` (window_policy.lagging), logged when that changes: they are
        not waited for, and their records for windows the others have closed are late."""
        median, gaps = self._behind()
        self._behind_since, out = lagging(self.rules, median, gaps, self._behind_since, now_ns)
        if not (out or self._lagging):
            return out
        for s in sorted(out - self._lagging):  # logged on each change: records of it are dropped as late from now
            log.warning("%s: %s is lagging (%.0f s behind the median source, not catching up): not waited for",
                        self.name or "stage", s, gaps[s] / 1e9)
        for s in sorted(self._lagging - out):
            log.info("%s: %s no longer lagging", self.name or "stage", s)
        self._lagging = out
        return out

    def frontier(self, stream: str) -> int:
        """The newest window end (ns) of the median source of ``stream`` that has reported (0: none has)."""
        return self._frontiers[stream]

    def _seen(self) -> Seen:
        median, gaps = self._behind()
        return Seen(self._expected(), bool(self._recent), self._newest, self._advanced_at, self._ever,
                    self._started_ns, self._frontiers, self._lagging, median, gaps, self._behind_since)

    def check(self, now_ns: int, unread: frozenset[str] = NO_STREAMS, upstream: Mapping[str, int] | None = None
              ) -> list[Release]:
        """The windows that may be finalized at clock ``now_ns``, oldest first, with the rule that lets each go;
        release them with ``pop``.

        ``unread``: the streams (source name prefixes) with records this worker has not read yet;
        ``upstream``: for sources a stage of this worker produces, the newest window end it has released (ns).
        """
        upstream = upstream or {}
        for src, released in upstream.items():
            # A release upstream is news from that source: its output for the window is on its way (through Kafka).
            if released > self._upstream_released.get(src, 0):
                self._upstream_released[src] = released
                self._advanced_at[src] = max(self._advanced_at.get(src, 0), now_ns)
                self._ever.add(src)
        self.lagging(now_ns)
        out = releases(self.rules, self._windows, self._seen(), now_ns, unread, upstream)
        self._released = {r.end_ns: r for r in out}
        self._last = (now_ns, unread, upstream)
        self._changed = bool(out)  # released windows are due until popped, and popping can free the next
        self._next_due = None
        return out

    def due(self, now_ns: int, unread: frozenset[str] = NO_STREAMS, upstream: Mapping[str, int] | None = None
            ) -> list[int]:
        """The ends (ns) of the windows ``check`` releases."""
        return [r.end_ns for r in self.check(now_ns, unread, upstream)]

    def next_due_ns(self) -> int | None:
        """The earliest clock (ns) at which ``due`` could return a window, given the last check's unread streams
        and upstream releases; None: not before a record comes (or those change). When the last check released a
        window, or a record came since, the last check's clock: check again now."""
        if not self._windows:
            return None
        if self._last is None:
            return min(w.first_seen_ns for w in self._windows.values())
        if self._changed:
            return self._last[0]
        if self._next_due is None:
            end = min(self._windows)
            self._next_due = (next_due(self.rules, (end, self._windows[end]), self._seen(), *self._last),)
        return self._next_due[0]

    def pop(self, window_end_ns: int) -> tuple[list[Any], list[Any], frozenset[str]]:
        """Release a window: its items (an add with item None reports its source and adds none), ack tokens, and
        reporting sources."""
        w = self._windows.pop(window_end_ns)
        r = self._released.pop(window_end_ns, None)
        if r is not None and r.rule == OVERFLOW:
            self.overflowed += 1
            if self.overflowed <= _LOGGED_INCOMPLETE:
                log.warning("%s: window ending %d released unfinished: more than %d windows buffered",
                            self.name or "stage", window_end_ns, self.rules.max_windows)
        if r is not None and r.missing:
            self.incomplete += 1
            if self.incomplete <= _LOGGED_INCOMPLETE:
                log.warning("%s: window ending %d released without %s (%s)",
                            self.name or "stage", window_end_ns, ", ".join(sorted(r.missing)), r.why)
        self.released_up_to = max(self.released_up_to, window_end_ns)
        self._recent.append((window_end_ns, frozenset(w.sources)))
        self._expected_cache = None
        self._changed = True
        return list(w.items.values()), w.tokens, frozenset(w.sources)

    def holding(self) -> bool:
        """Whether any window is buffered (it will be released, and its outputs sent, by these rules)."""
        return bool(self._windows)

    def pending_tokens(self) -> list[Any]:
        return [t for w in self._windows.values() for t in w.tokens]


def stage_tracker(stage: str, hop_ns: int, grace_ns: int, required: frozenset[str], name: str,
                  max_windows: int = MAX_WINDOWS) -> WindowTracker:
    """The tracker of a ``stage`` (``flows``, ``links``, ``fabric``: window_policy.STAGE_DEPTH) from the processor's
    ``grace_ns`` and the sources the topology says it requires: its graces and which required sources are clocked
    are the policy's."""
    grace, required_grace = stage_graces(stage, grace_ns)
    return WindowTracker(hop_ns, grace, required=required, required_grace_ns=required_grace, name=name,
                         max_windows=max_windows, clocked=clocked_sources(required))
