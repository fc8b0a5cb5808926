"""The window-closing rule on plain data, without a tracker (the behaviours themselves: test_window_cases.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from flowtracer.stream.stages.window_policy import (
    COMPLETE,
    LAGGING_ONLY,
    MOVED_ON,
    OVERFLOW,
    REQUIRED_GRACE_NS,
    WAITED_OUT,
    Release,
    Rules,
    Seen,
    clocked_sources,
    lagging,
    next_due,
    producing,
    releases,
    stage_graces,
)

S = 1_000_000_000


@dataclass
class W:
    first_seen_ns: int
    sources: set[str] = field(default_factory=set)


def seen(recent: set[str] | frozenset[str] = frozenset(), newest: dict[str, int] | None = None,
         lag: frozenset[str] = frozenset(), advanced_at: dict[str, int] | None = None) -> Seen:
    """The books of a stage that started at 0, released windows with ``recent`` and saw ``newest`` windows."""
    newest = newest or {}
    return Seen(recent=frozenset(recent), released_any=bool(recent), newest=newest, advanced_at=advanced_at or {},
                ever=set(newest), started_ns=0, frontier={}, lagging=lag)


def test_each_stage_waits_one_more_multiple_of_both_graces() -> None:
    assert stage_graces("flows", 3 * S) == (3 * S, REQUIRED_GRACE_NS)
    assert stage_graces("links", 3 * S) == (6 * S, 2 * REQUIRED_GRACE_NS)
    assert stage_graces("fabric", 3 * S) == (9 * S, 3 * REQUIRED_GRACE_NS)


def test_switches_and_hosts_are_clocked_upstream_partitions_are_not() -> None:
    required = frozenset({"flows:h1@leaf01", "counters:leaf01", "attr:0", "groups:3"})
    assert clocked_sources(required) == {"flows:h1@leaf01", "counters:leaf01"}
    assert Rules(S, S, S, required=required, clocked=clocked_sources(required)).upstream == {"attr:0", "groups:3"}


def test_a_stage_produces_while_it_holds_windows_or_has_records_to_read() -> None:
    assert [producing(h, u) for h, u in ((False, set()), (True, set()), (False, {"flows"}))] == [False, True, True]


def test_releases_in_order_with_the_rule_and_the_missing_sources() -> None:
    rules = Rules(S, 3 * S, 30 * S)
    windows = {1 * S: W(0, {"a", "b"}), 2 * S: W(0, {"a"}), 3 * S: W(0, {"a", "b"}), 4 * S: W(4 * S, {"a"})}
    got = releases(rules, windows, seen({"a", "b"}, {"a": 4 * S, "b": 3 * S}), now_ns=5 * S)
    assert got[:2] == [Release(1 * S, COMPLETE), Release(2 * S, WAITED_OUT, frozenset({"b"}), got[1].why)]
    assert got[2] == Release(3 * S, COMPLETE)
    assert len(got) == 3, "window 4: b is missing and the grace has not passed"
    assert got[1].why == "waited out: 5.0 s since its first record"


def test_moved_on_needs_every_source_two_hops_newer() -> None:
    rules = Rules(S, 100 * S, 100 * S)
    windows = {2 * S: W(0, {"a"})}
    assert releases(rules, windows, seen({"a", "b"}, {"a": 4 * S, "b": 3 * S}), now_ns=0) == []
    [r] = releases(rules, windows, seen({"a", "b"}, {"a": 4 * S, "b": 4 * S}), now_ns=0)
    assert (r.rule, r.missing) == (MOVED_ON, {"b"})


def test_a_window_only_lagging_sources_reported_goes_and_holds_nobody() -> None:
    rules = Rules(S, 3 * S, 30 * S, required=frozenset({"slow", "a"}), clocked=frozenset({"slow", "a"}))
    windows = {1 * S: W(0, {"slow"}), 5 * S: W(0, {"a"})}
    got = releases(rules, windows, seen({"a", "slow"}, {"a": 5 * S, "slow": S}, lag=frozenset({"slow"})), now_ns=S)
    assert [(r.rule, r.missing) for r in got] == [(LAGGING_ONLY, {"a"}), (COMPLETE, frozenset())]


def test_past_the_bound_the_oldest_goes_as_it_is() -> None:
    rules = Rules(S, 100 * S, 100 * S, max_windows=2)
    windows = {w * S: W(0, {"a"}) for w in (1, 2, 3)}
    got = releases(rules, windows, seen({"a", "b"}, {"a": 3 * S}), now_ns=0)
    assert [(r.end_ns, r.rule, r.missing) for r in got] == [(S, OVERFLOW, {"b"})]


def test_max_windows_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_windows must be at least 1, not 0"):
        Rules(S, S, S, max_windows=0)


def test_lagging_threads_its_state_and_forgets_it_on_a_backlog() -> None:
    rules = Rules(S, 3 * S, 30 * S)
    since, out = lagging(rules, 100 * S, {"slow": 90 * S}, {}, now_ns=100 * S)
    assert (since, out) == ({"slow": (100 * S, 90 * S)}, frozenset())
    since, out = lagging(rules, 106 * S, {"slow": 90 * S}, since, now_ns=106 * S)
    assert out == {"slow"}, "behind for twice the grace without catching up"
    assert lagging(rules, 106 * S, {"slow": 90 * S}, since, now_ns=200 * S) == ({}, frozenset()), \
        "the median is not current: distances are read positions"


@pytest.mark.parametrize(("required", "expected_s"), [
    (frozenset(), 3),  # the window ends at 2 s, but the grace (3 s from its first record at 0) passes at 3 s
    (frozenset({"b"}), 30),  # b is required and missing: its grace
])
def test_next_due_is_the_first_clock_at_which_the_window_goes(required: frozenset[str], expected_s: int) -> None:
    rules = Rules(S, 3 * S, 30 * S, required=required)
    window = (2 * S, W(0, {"a"}))
    assert next_due(rules, window, seen({"a", "b"}, {"a": 2 * S}), S) == expected_s * S


def test_next_due_waits_for_an_upstream_partitions_silence() -> None:
    """attr:1 delivered a newer window at 50 s: the window is waited out 30 s after that, not after its first
    record."""
    rules = Rules(S, 6 * S, 30 * S, required=frozenset({"attr:0", "attr:1"}))
    window = (3 * S, W(10 * S, {"attr:0"}))
    state = seen({"attr:0", "attr:1"}, {"attr:0": 3 * S, "attr:1": 4 * S}, advanced_at={"attr:1": 50 * S})
    assert next_due(rules, window, state, 60 * S) == 80 * S
    assert next_due(rules, None, state, 60 * S) is None
