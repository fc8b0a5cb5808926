"""When a stage may close a window, and why: the one rule (pure).

Every stage (flows, links, fabric) buffers its records per window end in a ``WindowTracker`` (window_tracker.py),
which keeps the books (buffers, what each source reported and when, counters, the log) and asks this module which
windows may be released now. Changing when a window closes is a change of this module and of the golden cases it
changes (tests/stream/stages/cases/, one folder per behaviour; docs/stream.md, "Windows", says it in prose).

**The rule.** Windows are released strictly in order, oldest first: the first that may not close holds every newer
one (rolling state and resolvers consume them in order). A window closes when, in this order of precedence:

1. *complete*: every expected source reported it;
2. *moved on*: every expected source, and every source that reported it, reported a window ``lateness`` hops newer
   (one skipped it); the watermark is the slowest source's, so on a backlog a fast topic cannot close windows a slow
   one has not delivered yet;
3. *waited out*: the window has ended on the clock, ``grace`` has passed since its first record (``required_grace``
   while a binding required source is missing from it), and no missing source *holds* it (below);
4. *lagging only*: only lagging sources reported it: released at once, whatever is older, and it holds nobody;
5. *overflow*: more than ``max_windows`` are buffered: the oldest goes as it is.

*Expected* sources: those of the recently released windows, plus the required sources that *bind* now, minus the
lagging ones. Before any window was released and with no binding required source, nothing is known, so a window
closes only by rule 3.

*Required* sources (from the topology: a flows partition's hosts and leaves, a links partition's switches and every
flows partition with hosts, every counters partition with switches for the fabric stage) bind
- during the first ``required_grace`` after the stage's first record (start-up: on a backlog they will report);
- afterwards once they have reported at all (a fabric without host agents is held only during start-up), or while
  their stream has unread records, or while their stage on this worker is producing (``producing``);
- never while lagging, unless they are upstream partitions.

*Holds*: a missing source keeps a window that rule 3 would wait out when
- its stage on this worker has not released the window yet (upstream holds: that stage has rules of its own that
  end, and its output will come);
- its stream has unread records and that stream's median source (its *frontier*) has not reported a window its
  grace beyond this one (waited out in event time: a host that died during a recording is given up on without
  reading the whole backlog);
- it is an upstream partition (required, not clocked: ``attr:``, ``groups:``) that reported a newer window, or
  whose stage on this worker released one, less than its grace ago (a remote stage still working through its
  backlog).

*Lagging*: for twice the grace a source has stayed more than ``grace + lateness`` behind the median source's newest
window without closing that distance by more than ``lateness`` hops, while the median source is current on the
clock (a slow clock). It is not waited for, unless it is an upstream partition. Distances on a backlog (the median
itself not current) are read positions, not clocks, and make nobody lag.

*Grace*: the flows stage waits ``grace`` (a silent source) and 30 s (a missing required source: a failed-over
partition's new owner replaying it); each stage downstream one more multiple of both (``stage_graces``), so it never
gives up before its upstream did.

**Inputs** and where they come from:
- ``now_ns``: the worker's window clock (stream/runtime/stall_clock.py): wall time that stands still while the
  worker is cut off from Kafka;
- ``unread``: the streams (source name prefixes) with records this worker has not read yet: its consumer lag
  (stream/runtime/read_positions.py, mapped to streams by the processor); none while the ack ledger's bound holds
  reading back (stream/runtime/app.py), since then only releases can free the reader;
- ``upstream``: for sources a stage of this same worker produces, the newest window end that stage released, given
  only while it is ``producing``;
- the tracker's books (``Seen``): the recent sources, each source's newest window end, when it last advanced, who
  ever reported, when the stage started, the frontiers, who is behind and since when.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Protocol

NO_STREAMS: frozenset[str] = frozenset()
MAX_WINDOWS = 1024
"""Windows buffered per stage before the oldest are released anyway (17 min of 1 s hops)."""
REQUIRED_GRACE_NS = 30_000_000_000
"""How long the flows stage waits for a missing required source (a failover in progress), ns."""
STAGE_DEPTH = {"flows": 1, "links": 2, "fabric": 3}
"""Each stage's multiple of the graces: one more per stage downstream."""
CLOCKED_STREAMS = frozenset({"flows", "counters", "congestion"})
"""Streams whose sources stamp records by a clock of their own (hosts, switches), which may run behind."""

# The rule that released a window.
COMPLETE = "complete"
MOVED_ON = "moved on"
WAITED_OUT = "waited out"
LAGGING_ONLY = "lagging only"
OVERFLOW = "overflow"


def stream_of(source: str) -> str:
    """The stream a source's records come in: its name's prefix before ``:`` (``flows:h1@leaf01`` -> ``flows``);
    "" for a name without one."""
    return source.split(":", 1)[0] if ":" in source else ""


def stage_graces(stage: str, grace_ns: int) -> tuple[int, int]:
    """(grace, required grace) of a stage's windows, ns, from the processor's ``grace_ns``: ``STAGE_DEPTH``
    multiples, so that a downstream stage does not close a window its upstream is still waiting out."""
    depth = STAGE_DEPTH[stage]
    return depth * grace_ns, depth * REQUIRED_GRACE_NS


def clocked_sources(required: Set[str]) -> frozenset[str]:
    """The required sources stamped by a clock of their own (switches, hosts): the rest are upstream partitions."""
    return frozenset(s for s in required if stream_of(s) in CLOCKED_STREAMS)


def producing(holding: bool, unread: Set[str]) -> bool:
    """Whether a stage of this worker will still send output its downstream stages wait for: it holds windows, or
    has records to read. Only then is it given to them in ``upstream``."""
    return holding or bool(unread)


@dataclass(frozen=True)
class Rules:
    """A stage's settings for the rule (durations in ns)."""

    hop_ns: int
    grace_ns: int
    required_grace_ns: int
    lateness_hops: int = 2
    max_windows: int = MAX_WINDOWS
    #: Sources every window needs on top of the recently seen ones.
    required: frozenset[str] = frozenset()
    #: The required sources stamped by their own clock (may lag); the rest are upstream partitions.
    clocked: frozenset[str] = frozenset()
    _required_in: dict[frozenset[str], frozenset[str]] = field(default_factory=dict, init=False, compare=False,
                                                               repr=False)

    def __post_init__(self) -> None:
        if self.max_windows < 1:
            raise ValueError(f"max_windows must be at least 1, not {self.max_windows}")

    @cached_property
    def upstream(self) -> frozenset[str]:
        """Upstream partitions: required sources that are not clocked (waited out only after a silence)."""
        return self.required - self.clocked

    @property
    def behind_ns(self) -> int:
        """How far behind the median source a source must be to count as behind, ns."""
        return self.grace_ns + self.lateness_hops * self.hop_ns

    def required_in(self, unread: frozenset[str]) -> frozenset[str]:
        """The required sources whose stream is one of ``unread`` (remembered per set of streams)."""
        out = self._required_in.get(unread)
        if out is None:
            out = self._required_in[unread] = frozenset(s for s in self.required if stream_of(s) in unread)
        return out


class Window(Protocol):
    """What the rule reads of a buffered window."""

    first_seen_ns: int  # the clock at its first record
    sources: Set[str]  # the sources that reported it


@dataclass(slots=True)
class Seen:
    """What the sources reported so far (the tracker's books, read only; not frozen: built on every check)."""

    recent: frozenset[str]  # the sources of the recently released windows
    released_any: bool  # whether a window was released (there is a recent past)
    newest: Mapping[str, int]  # source -> the newest window end it reported, ns
    advanced_at: Mapping[str, int]  # source -> clock when it reported a newer window (or its stage here released one)
    ever: Set[str]  # sources that ever reported (or whose stage here released a window)
    started_ns: int | None  # the clock at the stage's first record
    frontier: Mapping[str, int]  # stream -> its median source's newest window end, ns
    lagging: frozenset[str]  # as judged by ``lagging`` at this check
    median_ns: int = 0  # the median source's newest window end (``behind``)
    behind: Mapping[str, int] = field(default_factory=dict)  # source -> its distance behind the median, ns
    behind_since: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # ``lagging``'s state


@dataclass(frozen=True)
class Release:
    """A window that may close now: by which rule, without which expected sources (empty: all there)."""

    end_ns: int
    rule: str
    missing: frozenset[str] = frozenset()
    why: str = ""  # the rule in words, for the log line


@dataclass(slots=True)
class Binding:
    """Who counts at one check: the binding required sources, the lagging ones not waited for, the expected."""

    required: Set[str]
    lagging: frozenset[str]
    expected: frozenset[str]


def frontier(newest: Mapping[str, int], stream: str) -> int:
    """The newest window end (ns) of the median source of ``stream`` that has reported (0: none has): the median, so
    that one record stamped far ahead does not give up on every other source of its stream."""
    ends = sorted(n for s, n in newest.items() if stream_of(s) == stream)
    return ends[(len(ends) - 1) // 2] if ends else 0


def behind(rules: Rules, newest: Mapping[str, int]) -> tuple[int, dict[str, int]]:
    """The median source's newest window end (ns; 0 below three sources) and, per source more than ``grace +
    lateness`` behind it, by how much (ns). The median, not the newest, so that one source running ahead does not
    make every other one look behind."""
    if len(newest) < 3:
        return 0, {}
    ends = sorted(newest.values())
    median = ends[len(ends) // 2]
    bound = rules.behind_ns
    return median, {s: median - n for s, n in newest.items() if median - n > bound}


def lagging(rules: Rules, median_ns: int, gaps: Mapping[str, int], behind_since: Mapping[str, tuple[int, int]],
            now_ns: int) -> tuple[dict[str, tuple[int, int]], frozenset[str]]:
    """Which sources lag at ``now_ns``, and the new ``behind_since`` (source -> (clock since when it has been behind
    without catching up, its distance then, ns)) from the last one and ``behind``'s median and gaps.

    Being behind alone does not tell a slow clock from a slow delivery. While the stage replays a backlog every
    source is behind the clock and their distances are where their partitions are being read: nobody lags. A source
    replaying its partition behind live ones closes its distance, by more than ``lateness`` hops every twice the
    grace unless it is read at barely real-time speed, so it is waited for however long its replay takes. A source
    whose clock runs behind keeps its distance."""
    if not gaps or now_ns - median_ns > rules.behind_ns:  # a backlog: distances are read positions, not clocks
        return {}, NO_STREAMS
    since = {s: v for s, v in behind_since.items() if s in gaps}
    for s, gap in gaps.items():
        prev = since.get(s)
        if prev is None or gap < prev[1] - rules.lateness_hops * rules.hop_ns:  # new, or catching up
            since[s] = (now_ns, gap)
    return since, frozenset(s for s in gaps if now_ns - since[s][0] >= 2 * rules.grace_ns)


def binding(rules: Rules, seen: Seen, now_ns: int, unread: frozenset[str], upstream: Mapping[str, int]) -> Binding:
    """The required sources that bind at ``now_ns`` (start-up, reported, unread, produced here), the lagging ones
    not waited for, and the expected sources."""
    starting = seen.started_ns is not None and now_ns - seen.started_ns < rules.required_grace_ns
    required: Set[str] = rules.required if starting else rules.required & seen.ever
    if not starting and (unread or upstream):  # not read, or not produced, yet is not silent: required
        required = required | rules.required_in(unread) | (rules.required & upstream.keys())
    not_waited = seen.lagging - (required - rules.clocked)  # upstream partitions are always waited for
    required = required - not_waited
    recent = seen.recent
    # The recent sources themselves when nothing changes them (the usual case: no new set of hundreds per check).
    expected = recent if not not_waited and required <= recent else (recent | required) - not_waited
    return Binding(required, not_waited, expected)


def releases(rules: Rules, windows: Mapping[int, Window], seen: Seen, now_ns: int,
             unread: frozenset[str] = NO_STREAMS, upstream: Mapping[str, int] | None = None) -> list[Release]:
    """The buffered windows (by end, ns) that may close at ``now_ns``, oldest first, with the rule for each."""
    upstream = upstream or {}
    bound = binding(rules, seen, now_ns, unread, upstream)
    expected = bound.expected
    excess = len(windows) - rules.max_windows
    out = []
    for i, end in enumerate(sorted(windows)):
        w = windows[end]
        r = close(rules, end, w, bound, expected, seen, now_ns, unread, upstream)
        if r is None:
            if i >= excess:
                break  # strictly in order
            r = Release(end, OVERFLOW, frozenset(expected - w.sources),
                        f"more than {rules.max_windows} windows buffered")
        out.append(r)
        if r.rule != LAGGING_ONLY:
            expected = expected | w.sources
    return out


def close(rules: Rules, end: int, w: Window, bound: Binding, expected: frozenset[str], seen: Seen, now_ns: int,
          unread: frozenset[str], upstream: Mapping[str, int]) -> Release | None:
    """Rules 1-4 for the window ending at ``end`` (ns), given the sources expected of it: a Release, or None."""
    if w.sources and w.sources <= bound.lagging:
        # Only sources far behind the others (a slow clock): nobody else will report this window, and waiting it
        # out would hold every newer window behind it.
        return Release(end, LAGGING_ONLY, frozenset(expected - w.sources), "only lagging sources reported it")
    known = seen.released_any or bool(bound.required)
    if known and expected <= w.sources:
        return Release(end, COMPLETE)
    horizon = end + rules.lateness_hops * rules.hop_ns
    # Stops at the first source still short of the horizon (no union of hundreds of sources per check).
    if known and all(seen.newest.get(s, 0) >= horizon for sources in (expected, w.sources) for s in sources):
        return Release(end, MOVED_ON, frozenset(expected - w.sources),
                       f"they moved on: every source reported a window {rules.lateness_hops} hops newer")
    waited = now_ns - w.first_seen_ns
    # Waited out only once the window has ended on this worker's clock too: a record stamped ahead (a fast clock)
    # must not release a window that the others have not even started.
    if end > now_ns or waited < (rules.grace_ns if bound.required <= w.sources else rules.required_grace_ns):
        return None
    missing = frozenset(expected - w.sources)
    if (unread or upstream or rules.upstream) and any(
            holds(rules, s, end, w, seen, now_ns, unread, upstream) for s in missing):
        return None
    return Release(end, WAITED_OUT, missing, f"waited out: {waited / 1e9:.1f} s since its first record")


def holds(rules: Rules, source: str, end: int, w: Window, seen: Seen, now_ns: int, unread: frozenset[str],
          upstream: Mapping[str, int]) -> bool:
    """Whether missing ``source`` keeps the window ending at ``end`` (ns) that the clock would wait out."""
    if upstream.get(source, end) < end:
        return True  # its stage on this worker has not released the window: it will report
    grace = rules.required_grace_ns if source in rules.required else rules.grace_ns
    stream = stream_of(source)
    if stream in unread:
        return seen.frontier[stream] < end + grace  # waited out in event time
    if source in rules.upstream:
        return now_ns - max(w.first_seen_ns, seen.advanced_at.get(source, 0)) < grace  # still delivering
    return False


def next_due(rules: Rules, oldest: tuple[int, Window] | None, seen: Seen, now_ns: int,
             unread: frozenset[str] = NO_STREAMS, upstream: Mapping[str, int] | None = None) -> int | None:
    """The earliest clock after ``now_ns`` (ns) at which ``releases`` will return a window when nothing else changes
    (no record, no release, the same unread streams and upstream releases), or None: not before something does.

    Asked after a check that released nothing, so the oldest window is the one that holds. Only the clock-dependent
    parts of the rule can change its answer: start-up ends, a source starts lagging or the median source stops being
    current, the window ends, its graces pass, an upstream partition's silence reaches its grace. The rule is asked
    at each of those times in turn."""
    if oldest is None:
        return None
    upstream = upstream or {}
    end, w = oldest
    times = {end, w.first_seen_ns + rules.grace_ns, w.first_seen_ns + rules.required_grace_ns}
    if seen.started_ns is not None:
        times.add(seen.started_ns + rules.required_grace_ns)
    times |= {max(w.first_seen_ns, seen.advanced_at.get(s, 0)) + rules.required_grace_ns
              for s in rules.upstream - w.sources}
    if seen.behind and now_ns - seen.median_ns <= rules.behind_ns:
        times.add(seen.median_ns + rules.behind_ns + 1)  # from then on a backlog: nobody lags
        times |= {seen.behind_since[s][0] + 2 * rules.grace_ns for s in seen.behind if s in seen.behind_since}
    bindings: dict[tuple[bool, frozenset[str]], tuple[Seen, Binding]] = {}  # by what the clock changes in them
    for t in sorted(t for t in times if t > now_ns):
        lag = lagging(rules, seen.median_ns, seen.behind, seen.behind_since, t)[1] if seen.behind else NO_STREAMS
        key = (seen.started_ns is not None and t - seen.started_ns < rules.required_grace_ns, lag)
        if key not in bindings:
            then = seen if lag == seen.lagging else replace(seen, lagging=lag)
            bindings[key] = then, binding(rules, then, t, unread, upstream)
        then, bound = bindings[key]
        if close(rules, end, w, bound, bound.expected, then, t, unread, upstream) is not None:
            return t
    return None
