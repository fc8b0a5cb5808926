"""Event-time windows of one partition: which are complete, which are overdue, in order (pure).

A window is finalized when every source that reported in the recent past has reported it
(complete), or when every such source has reported a window ``lateness`` hops newer (they all
moved on: one skipped it), or when ``grace`` of wall-clock time passed since its first record (a
source is silent) and the window has ended on the worker's clock. The watermark is the slowest
source's, never the newest record's: on a backlog one fast topic must not close windows the other
has not delivered yet. Windows are released strictly in order, because rolling state and resolvers
consume them in order. Records for a window already released are late: counted, not reopened.

On a backlog the wall clock says nothing about a source: its records may simply not be read yet (the consumer
reads a partition's counters a minute before the same windows' flows, or after). So the caller tells ``due`` which
*streams* still have records this worker has not read (consumer lag, by the prefix of the source names: ``flows``,
``counters``, ``attr``, ...) and, for sources produced by another stage of this same worker (a flows stage's
attributions for the links stage), up to which window that stage has released. Then:

* a required source whose stream is unread is waited for even after start-up, as if it had reported before;
* a missing source whose stream is unread is waited out only in event time: once its stream's median source has
  reported a window the grace beyond (it skipped this one, or it died during the recording);
* a missing source whose producing stage on this worker is busy (holds windows, or has records to read) and has
  not released the window is not waited out, and is required even if it never reported: it will report (that
  stage has rules of its own that end). Its release counts as news from the source (below): the output is on
  its way through Kafka;
* a missing upstream partition (required, not clocked: attributions, group FIMs) is waited out only after the
  grace without any new window from it: a remote stage still working through its backlog keeps being waited for.

Bounded: at most ``max_windows`` windows are buffered. A window that can never complete (a source
stuck on it, a record stamped far ahead) would otherwise hold every newer window behind it; past
the bound the oldest windows are released as they are, counted in ``overflowed`` (and in
``incomplete`` when a source was missing).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)
_LOGGED_INCOMPLETE = 20  # the first few incomplete windows are logged, then only counted
NO_STREAMS: frozenset[str] = frozenset()
MAX_WINDOWS = 1024
"""Windows buffered per tracker before the oldest are released anyway (17 min of 1 s hops)."""


def stream_of(source: str) -> str:
    """The stream a source's records come in: its name's prefix before ``:`` (``flows:h1@leaf01`` -> ``flows``);
    "" for a name without one."""
    return source.split(":", 1)[0] if ":" in source else ""


@dataclass
class _Window:
    first_seen_ns: int
    sources: set[str] = field(default_factory=set)
    items: dict[Any, Any] = field(default_factory=dict)  # identity -> item: a redelivery replaces, never adds
    tokens: list[Any] = field(default_factory=list)


class WindowTracker:
    """Buffers items per window end and tells which windows may be finalized, in order."""

    def __init__(self, hop_ns: int, grace_ns: int, lateness_hops: int = 2, memory_hops: int = 10,
                 required: frozenset[str] = frozenset(), required_grace_ns: int = 30_000_000_000,
                 name: str = "", max_windows: int = MAX_WINDOWS, clocked: frozenset[str] | None = None) -> None:
        #: Required sources stamped by a clock of their own (switches, hosts), which may run behind: they are not
        #: waited for once they have stayed far behind the others (``lagging``). The rest of
        #: ``required`` (the processor's own upstream partitions) is always waited for. None: none is.
        self.clocked = clocked if clocked is not None else frozenset()
        if max_windows < 1:
            raise ValueError(f"max_windows must be at least 1, not {max_windows}")
        self.hop_ns = hop_ns
        self.max_windows = max_windows
        #: Windows released only because more than ``max_windows`` were buffered.
        self.overflowed = 0
        self._forced: set[int] = set()
        self.name = name  # for log lines, e.g. "links stage of partition 3"
        #: Sources every window needs on top of the recently seen ones (e.g. every upstream partition).
        #: A missing required source is waited for ``required_grace_ns`` rather than ``grace_ns``: an
        #: upstream partition is always taken over after a failure, and closing the window before the
        #: new owner has replayed it would lose its bytes.
        self.required = required
        self.required_grace_ns = max(required_grace_ns, grace_ns)
        # Required sources bind for the first required_grace after start (a backlog: they will report),
        # later only once they have reported at all (a fabric without host agents never holds windows).
        self._ever: set[str] = set()
        self._started_ns: int | None = None
        self.grace_ns = grace_ns
        self.lateness_hops = lateness_hops
        self._windows: dict[int, _Window] = {}
        self._recent: deque[tuple[int, frozenset[str]]] = deque(maxlen=memory_hops)
        self.released_up_to = 0  # window ends <= this were finalized
        self.late = 0
        #: Windows released without a source that was expected (it moved on, or was waited out).
        self.incomplete = 0
        #: window end -> (the expected sources it is released without, which rule released it: for the log line)
        self._missing: dict[int, tuple[frozenset[str], str]] = {}
        self._newest: dict[str, int] = {}  # source -> newest window end it reported
        #: source -> (worker time, ns, since when it has been behind without catching up; its distance then, ns)
        self._behind_since: dict[str, tuple[int, int]] = {}
        self._lagging: frozenset[str] = frozenset()  # as last judged, to log changes
        # ``due`` runs after every batch of input records (the worker steps per batch): what it derives from the recent
        # windows and the sources' newest windows is kept until those change, not rebuilt from hundreds of
        # sources each time.
        self._expected_cache: frozenset[str] | None = None
        self._gaps_cache: tuple[int, dict[str, int]] | None = None
        #: Required sources by stream, and the required ones of the unread streams as last asked for.
        by_stream: dict[str, set[str]] = {}
        for src in self.required:
            by_stream.setdefault(stream_of(src), set()).add(src)
        self._required_by_stream = {k: frozenset(v) for k, v in by_stream.items()}
        self._unread_required: tuple[frozenset[str], frozenset[str]] = (NO_STREAMS, frozenset())
        #: Upstream partitions: required sources that are not clocked (waited out only after a silence).
        self._upstream = self.required - self.clocked
        self._advanced_at: dict[str, int] = {}  # source -> worker time it last reported a newer window, ns
        self._upstream_released: dict[str, int] = {}  # source -> newest window end its stage here released, ns
        self._frontier_cache: dict[str, int] = {}  # stream -> its median source's newest window end, ns
        #: (window end, source) found to hold the window last time: checked first, so that a window held on a
        #: backlog costs one lookup per call instead of a pass over its missing sources.
        self._holder: tuple[int, str] | None = None
        self._added = False  # a record since the last ``due``: ``next_due_ns`` says to ask now
        self._asked_ns = 0  # the worker time of the last ``due``, ns

    def add(self, window_end_ns: int, source: str, item: Any, token: Any, now_ns: int, identity: Any = None) -> bool:
        """Buffer ``item`` (and its ack ``token``); False (and counted) when the window was already released.

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
        self._added = True
        self._ever.add(source)
        if self._started_ns is None:
            self._started_ns = now_ns
        if window_end_ns > self._newest.get(source, 0):
            self._newest[source] = window_end_ns
            self._advanced_at[source] = now_ns
            self._gaps_cache = None
            self._frontier_cache.pop(stream_of(source), None)
        return True

    def touch(self, window_end_ns: int, source: str, token: Any, now_ns: int) -> bool:
        """Mark that ``source`` reported the window without buffering an item."""
        return self.add(window_end_ns, source, None, token, now_ns)

    def _expected(self) -> frozenset[str]:
        if self._expected_cache is None:
            out: set[str] = set()
            for _, sources in self._recent:
                out |= sources
            self._expected_cache = frozenset(out)
        return self._expected_cache

    def _gaps(self) -> tuple[int, dict[str, int]]:
        """The median source's newest window end (ns; 0 below three sources) and, per source more than ``grace +
        lateness`` behind it, by how much (ns). The median, not the newest, so that one source running ahead does
        not make every other one look behind."""
        if self._gaps_cache is None:
            if len(self._newest) < 3:
                self._gaps_cache = 0, {}
            else:
                ends = sorted(self._newest.values())
                median = ends[len(ends) // 2]
                bound = self.grace_ns + self.lateness_hops * self.hop_ns
                self._gaps_cache = median, {s: median - n for s, n in self._newest.items() if median - n > bound}
        return self._gaps_cache

    def behind(self) -> frozenset[str]:
        """Sources whose newest window is more than ``grace + lateness`` behind the median source's newest."""
        return frozenset(self._gaps()[1])

    def lagging(self, now_ns: int) -> frozenset[str]:
        """Sources whose clock runs behind: ``behind`` while the median source is current on the worker's clock
        (within ``grace + lateness``), without catching up by more than ``lateness`` hops, for twice the grace.

        Being behind alone does not tell a slow clock from a slow delivery. While the stage replays a backlog (a
        failover, a restart, a recording) every source is behind the worker's clock and their distances are where
        their partitions are being read, so nobody lags. A source replaying its partition behind live ones (a
        partition taken over) closes its distance, by more than ``lateness`` hops every twice the grace unless
        it is read at barely real-time speed, so it is waited for even when a busy worker takes far longer than
        twice the grace to replay it. A source whose clock runs behind keeps its distance to live sources.
        Lagging sources are not waited for; windows only they report are released at once, and their records for
        windows the others have closed are late (counted)."""
        median, gaps = self._gaps()
        bound = self.grace_ns + self.lateness_hops * self.hop_ns
        if now_ns - median > bound:  # a backlog: distances are read positions, not clocks
            gaps = {}
        for s in [s for s in self._behind_since if s not in gaps]:
            del self._behind_since[s]
        for s, gap in gaps.items():
            since = self._behind_since.get(s)
            if since is None or gap < since[1] - self.lateness_hops * self.hop_ns:  # new, or catching up
                self._behind_since[s] = (now_ns, gap)
        out = frozenset(s for s in gaps if now_ns - self._behind_since[s][0] >= 2 * self.grace_ns)
        for s in sorted(out - self._lagging):  # logged on each change: records of it are dropped as late from now
            log.warning("%s: %s is lagging (%.0f s behind the median source, not catching up): not waited for",
                        self.name or "stage", s, gaps[s] / 1e9)
        for s in sorted(self._lagging - out):
            log.info("%s: %s no longer lagging", self.name or "stage", s)
        self._lagging = out
        return out

    def frontier(self, stream: str) -> int:
        """The newest window end (ns) of the median source of ``stream`` that has reported (0: none has): the
        median, so that one record stamped far ahead does not give up on every other source of its stream."""
        if stream not in self._frontier_cache:
            ends = sorted(n for s, n in self._newest.items() if stream_of(s) == stream)
            self._frontier_cache[stream] = ends[(len(ends) - 1) // 2] if ends else 0
        return self._frontier_cache[stream]

    def _holds(self, src: str, end: int, w: _Window, now_ns: int, unread: frozenset[str],
               upstream: Mapping[str, int]) -> bool:
        """Whether missing source ``src`` still holds window ``end`` that the wall clock would wait out."""
        if upstream.get(src, end) < end:
            return True  # its stage on this worker has not released the window: it will report
        grace = self.required_grace_ns if src in self.required else self.grace_ns
        stream = stream_of(src)
        if stream in unread:
            return self.frontier(stream) < end + grace  # waited out in event time
        if src in self._upstream:
            return now_ns - max(w.first_seen_ns, self._advanced_at.get(src, 0)) < grace  # still delivering
        return False

    def _held(self, end: int, w: _Window, missing: frozenset[str], now_ns: int, unread: frozenset[str],
              upstream: Mapping[str, int]) -> bool:
        """Whether a missing source holds a window the wall clock would wait out (see the module docstring)."""
        if self._holder is not None and self._holder[0] == end and self._holder[1] in missing \
                and self._holds(self._holder[1], end, w, now_ns, unread, upstream):
            return True
        for src in missing:
            if self._holds(src, end, w, now_ns, unread, upstream):
                self._holder = (end, src)
                return True
        return False

    def due(self, now_ns: int, unread: frozenset[str] = NO_STREAMS, upstream: Mapping[str, int] | None = None
            ) -> list[int]:
        """Window ends that may be finalized now, oldest first; release them with ``pop``.

        ``unread``: the streams (source name prefixes) with records this worker has not read yet;
        ``upstream``: for sources a stage of this worker produces, the newest window end it has released (ns).
        """
        upstream = upstream or {}
        self._added, self._asked_ns = False, now_ns
        for src, released in upstream.items():
            # A release upstream is news from that source: its output for the window is on its way (through Kafka).
            if released > self._upstream_released.get(src, 0):
                self._upstream_released[src] = released
                self._advanced_at[src] = max(self._advanced_at.get(src, 0), now_ns)
                self._ever.add(src)
        out = []
        starting = self._started_ns is not None and now_ns - self._started_ns < self.required_grace_ns
        required = self.required if starting else self.required & self._ever
        if not starting and (unread or upstream):  # not read, or not produced, yet is not silent: required
            required = required | self._required_in(unread) | (self.required & upstream.keys())
        lagging = self.lagging(now_ns) - (required - self.clocked)
        required = required - lagging
        recent = self._expected()
        # The recent sources themselves when nothing changes them (the usual case: no new set of hundreds per call).
        expected = recent if not lagging and required <= recent else (recent | required) - lagging
        excess = len(self._windows) - self.max_windows
        for i, end in enumerate(sorted(self._windows)):
            w = self._windows[end]
            if w.sources and w.sources <= lagging:
                # Only sources far behind the others (a slow clock): nobody else will report this window, and
                # waiting it out would hold every newer window behind it. Released as it is.
                self._missing[end] = (frozenset(expected - w.sources), "only lagging sources reported it")
                out.append(end)
                continue
            known = bool(self._recent or required)
            complete = known and expected <= w.sources
            horizon = end + self.lateness_hops * self.hop_ns
            # Stops at the first source still short of the horizon (no union of hundreds of sources per call).
            moved_on = known and not complete and all(self._newest.get(src, 0) >= horizon
                                                      for sources in (expected, w.sources) for src in sources)
            waited = now_ns - w.first_seen_ns
            # Waited out only once the window has ended on this worker's clock too: a record stamped ahead
            # (a fast clock) must not release a window that the others have not even started.
            overdue = end <= now_ns and waited >= (self.grace_ns if required <= w.sources else self.required_grace_ns)
            if overdue and not complete and (unread or upstream or self._upstream):
                overdue = not self._held(end, w, frozenset(expected - w.sources), now_ns, unread, upstream)
            if not (complete or moved_on or overdue):
                if i >= excess:
                    break  # strictly in order
                self._forced.add(end)  # over the bound: released as it is
            if not complete:
                why = (f"they moved on: every source reported a window {self.lateness_hops} hops newer" if moved_on
                       else f"waited out: {waited / 1e9:.1f} s since its first record" if overdue
                       else f"more than {self.max_windows} windows buffered")
                self._missing[end] = (frozenset(expected - w.sources), why)
            out.append(end)
            expected = expected | w.sources
        return out

    def next_due_ns(self) -> int | None:
        """The earliest worker time (ns) at which ``due`` may release a window, if asked with the same ``unread`` and
        ``upstream`` as last time; 0 when a record came since (ask now); None when no window is buffered.

        A lower bound, so that a caller can skip ``due`` until then: a window is released without a new record only
        once it is overdue (it has ended and waited the grace), once the start-up rule stops requiring the sources that
        never reported, or once a source behind the others turns lagging (``lagging``); windows go in order, so only
        the oldest one's grace counts.
        """
        if not self._windows:
            return None
        if self._added:
            return 0
        oldest = min(self._windows)
        t = max(oldest, self._windows[oldest].first_seen_ns + self.grace_ns)
        if self._started_ns is not None and self._asked_ns < self._started_ns + self.required_grace_ns:
            t = min(t, self._started_ns + self.required_grace_ns)
        for since_ns, _ in self._behind_since.values():
            t = min(t, since_ns + 2 * self.grace_ns)
        return t

    def _required_in(self, unread: frozenset[str]) -> frozenset[str]:
        if self._unread_required[0] != unread:
            self._unread_required = (unread, frozenset().union(*(self._required_by_stream.get(k, frozenset())
                                                                    for k in unread)))
        return self._unread_required[1]

    def pop(self, window_end_ns: int) -> tuple[list[Any], list[Any], frozenset[str]]:
        """Release a window: its items (None for touches dropped), ack tokens, and reporting sources."""
        w = self._windows.pop(window_end_ns)
        missing, why = self._missing.pop(window_end_ns, (frozenset(), ""))
        if window_end_ns in self._forced:
            self._forced.discard(window_end_ns)
            self.overflowed += 1
            if self.overflowed <= _LOGGED_INCOMPLETE:
                log.warning("%s: window ending %d released unfinished: more than %d windows buffered",
                            self.name or "stage", window_end_ns, self.max_windows)
        if missing:
            self.incomplete += 1
            if self.incomplete <= _LOGGED_INCOMPLETE:
                log.warning("%s: window ending %d released without %s (%s)",
                            self.name or "stage", window_end_ns, ", ".join(sorted(missing)), why)
        self.released_up_to = max(self.released_up_to, window_end_ns)
        self._recent.append((window_end_ns, frozenset(w.sources)))
        self._expected_cache = None
        return list(w.items.values()), w.tokens, frozenset(w.sources)

    def holding(self) -> bool:
        """Whether any window is buffered (it will be released, and its outputs sent, by these rules)."""
        return bool(self._windows)

    def pending_tokens(self) -> list[Any]:
        return [t for w in self._windows.values() for t in w.tokens]
