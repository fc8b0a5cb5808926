"""Window release rules: complete, moved on, overdue; strictly in order; late records counted."""

import pytest

from flowtracer.stream.stages.window_tracker import WindowTracker

S = 1_000_000_000


def test_first_window_waits_for_grace_then_completeness_releases_at_once() -> None:
    t = WindowTracker(hop_ns=S, grace_ns=3 * S)
    t.add(1 * S, "a", "a1", 1, now_ns=0)
    t.add(1 * S, "b", "b1", 2, now_ns=0)
    assert t.due(now_ns=S) == []  # nothing known about the expected sources yet
    assert t.due(now_ns=3 * S) == [S]
    assert t.pop(S) == (["a1", "b1"], [1, 2], frozenset({"a", "b"}))
    t.add(2 * S, "a", "a2", 3, now_ns=4 * S)
    assert t.due(now_ns=4 * S) == []  # b has not reported
    t.add(2 * S, "b", "b2", 4, now_ns=4 * S)
    assert t.due(now_ns=4 * S) == [2 * S]


def test_a_skipped_window_is_released_once_every_source_moved_on() -> None:
    t = WindowTracker(hop_ns=S, grace_ns=100 * S, lateness_hops=2)
    for w, srcs in ((1, "ab"), (2, "a"), (3, "ab"), (4, "ab")):
        for src in srcs:
            t.add(w * S, src, f"{src}{w}", w, 0)
    t.pop(S)  # as if window 1 had been released before
    # b skipped window 2; both have reported window 4 = 2 + lateness, so 2 may go, then 3 (complete).
    assert t.due(0) == [2 * S, 3 * S, 4 * S]


def test_a_fast_source_does_not_close_windows_a_slow_one_has_not_delivered() -> None:
    t = WindowTracker(hop_ns=S, grace_ns=100 * S, lateness_hops=2)
    t.add(S, "fast", 0, 0, 0)
    t.add(S, "slow", 0, 0, 0)
    t.pop(S)
    for w in range(2, 8):  # a backlog of one topic arrives first
        t.add(w * S, "fast", w, w, 0)
    assert t.due(0) == []
    t.add(2 * S, "slow", 2, 2, 0)
    assert t.due(0) == [2 * S]


def test_late_records_are_counted_not_reopened() -> None:
    t = WindowTracker(hop_ns=S, grace_ns=0)
    t.add(S, "a", 1, 1, 0)
    t.pop(t.due(S)[0])  # the window has ended on the clock
    assert t.add(S, "b", 2, 2, 0) is False
    assert t.late == 1


def test_a_redelivered_record_replaces_instead_of_adding() -> None:
    t = WindowTracker(hop_ns=S, grace_ns=0)
    t.add(S, "a", "first copy", 1, 0, identity="a#7")
    t.add(S, "a", "second copy", 2, 0, identity="a#7")
    t.add(S, "a", "another record", 3, 0, identity="a#8")
    items, tokens, _ = t.pop(t.due(S)[0])
    assert items == ["second copy", "another record"]
    assert tokens == [1, 2, 3]  # both deliveries are acked


def test_a_missing_required_source_is_waited_for_longer() -> None:
    t = WindowTracker(hop_ns=S, grace_ns=3 * S, required=frozenset({"upstream-0", "upstream-1"}),
                      required_grace_ns=30 * S)
    t.add(S, "upstream-0", 0, 0, now_ns=0)
    assert t.due(now_ns=10 * S) == []  # just started: upstream-1 will report (a backlog), wait for it
    assert t.due(now_ns=30 * S) == [S]  # but not for ever
    t.pop(S)
    t.add(2 * S, "upstream-0", 0, 0, now_ns=31 * S)
    assert t.due(now_ns=34 * S) == [2 * S]  # upstream-1 never reported: after start-up it holds nothing
    t.pop(2 * S)
    t.add(3 * S, "upstream-1", 0, 0, now_ns=35 * S)
    t.add(3 * S, "upstream-0", 0, 0, now_ns=35 * S)
    t.pop(t.due(now_ns=35 * S)[0])
    t.add(4 * S, "upstream-0", 0, 0, now_ns=36 * S)
    assert t.due(now_ns=46 * S) == []  # upstream-1 reported before and is being failed over: keep waiting
    assert t.due(now_ns=66 * S) == [4 * S]  # but not for ever


def test_a_window_stamped_ahead_of_the_clock_is_not_waited_out_before_it_ends() -> None:
    """One source with a fast clock opens a window 5 s ahead: grace passes, but releasing it would make every
    other source's next 5 s late, so it waits until the window has ended on the worker's clock."""
    t = WindowTracker(hop_ns=S, grace_ns=S)
    t.add(100 * S, "a", 1, 1, now_ns=99 * S)
    t.add(100 * S, "b", 1, 2, now_ns=99 * S)
    t.pop(t.due(100 * S)[0])
    t.add(106 * S, "fast-clock", 1, 3, now_ns=100 * S)  # 5 s ahead of the clock
    assert t.due(now_ns=103 * S) == []  # waited 3 s > grace, but the window ends at 106 s
    for end in (101 * S, 102 * S):
        assert t.add(end, "a", 1, 4, now_ns=end) and t.add(end, "b", 1, 5, now_ns=end)
    assert t.due(now_ns=103 * S) == [101 * S, 102 * S]
    assert t.late == 0


@pytest.mark.parametrize(("max_windows", "buffered", "released", "overflowed"), [
    (4, 4, [], 0),  # at the bound: nothing forced
    (4, 5, [2], 1),  # one over: the stuck oldest goes as it is
    (4, 9, [2, 3, 4, 5, 6], 5),
    (1, 3, [2, 3], 2),
])
def test_windows_behind_a_stuck_one_are_bounded(max_windows: int, buffered: int, released: list[int],
                                                overflowed: int) -> None:
    """From window 2 on, b is stuck and never reports, and grace never passes: past ``max_windows``
    buffered windows the oldest are released anyway, counted as overflowed and incomplete."""
    t = WindowTracker(hop_ns=S, grace_ns=1000 * S, lateness_hops=1000, max_windows=max_windows)
    t.add(S, "a", "a1", 1, 0)
    t.add(S, "b", "b1", 1, 0)
    t.pop(S)  # as if window 1 had been released: a and b are the expected sources
    for w in range(2, buffered + 2):
        t.add(w * S, "a", f"a{w}", w, 0)
    due = t.due(0)
    assert due == [w * S for w in released]
    for end in due:
        items, tokens, sources = t.pop(end)
        assert items == [f"a{end // S}"] and tokens == [end // S] and sources == {"a"}
    assert (t.overflowed, t.incomplete) == (overflowed, overflowed)
    assert len(t.pending_tokens()) == min(buffered, max_windows)
    assert t.add(2 * S, "b", "late", 99, 0) == (not released)  # a released window stays released


def test_max_windows_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_windows must be at least 1, not 0"):
        WindowTracker(hop_ns=S, grace_ns=S, max_windows=0)


def test_a_source_far_behind_the_others_does_not_hold_their_windows() -> None:
    """A switch whose clock runs 90 s behind: its windows hold nobody else, and its records for windows the
    others have closed are late (counted), instead of every current window queueing behind its old ones."""
    t = WindowTracker(hop_ns=S, grace_ns=3 * S)
    released: list[int] = []
    for now in range(1000, 1030):
        for src in ("a", "b", "c"):
            t.add(now * S, src, 1, 0, now_ns=now * S)
        t.add((now - 90) * S, "slow", 1, 0, now_ns=now * S)
        for end in t.due(now * S):
            t.pop(end)
            released.append(end)
    current = [e for e in released if e >= 1000 * S]
    assert current[-1] >= 1028 * S, "current windows were held behind the slow source's"
    assert t.incomplete <= 30 + 8, "beyond the slow source's own windows, only the first seconds were waited out"
    assert t.lagging(1030 * S) == frozenset({"slow"})
    assert t.late > 0  # the slow source's records for closed windows: counted, not reopened
    # Every current window carried all three punctual sources (none released without them).
    assert len(current) >= 25


def test_one_source_ahead_does_not_make_the_others_lag() -> None:
    t = WindowTracker(hop_ns=S, grace_ns=3 * S)
    for src in ("a", "b", "c"):
        t.add(100 * S, src, 1, 0, now_ns=100 * S)
    t.add(108 * S, "fast", 1, 0, now_ns=100 * S)  # 8 s ahead, within the processor's bound
    assert t.behind() == frozenset()


def test_a_source_catching_up_on_a_backlog_is_waited_for() -> None:
    """Behind only briefly (it replays faster than real time): not lagging, its windows are waited for."""
    t = WindowTracker(hop_ns=S, grace_ns=3 * S)
    for src in ("a", "b", "c"):
        t.add(100 * S, src, 1, 0, now_ns=100 * S)
    t.add(80 * S, "replaying", 1, 0, now_ns=100 * S)
    assert t.behind() == frozenset({"replaying"}) and t.lagging(100 * S) == frozenset()
    t.add(99 * S, "replaying", 1, 0, now_ns=101 * S)  # caught up a second later
    assert t.lagging(101 * S) == frozenset() and t.behind() == frozenset()


def _replay_behind_live_sources(t: WindowTracker) -> list[tuple[int, frozenset[str]]]:
    """Sources a, b, c live (window ``now`` at each second ``now``); ``r`` a partition taken over after a failover,
    replayed from 30 s back at 2 windows per second: it catches up, but only after 30 s, ten times the grace."""
    released: list[tuple[int, frozenset[str]]] = []
    r = 970
    for now in range(1000, 1045):
        for src in ("a", "b", "c"):
            t.add(now * S, src, 1, 0, now_ns=now * S)
        for _ in range(2 if r < now else 1):
            r += 1
            t.add(r * S, "r", 1, 0, now_ns=now * S)
        for end in t.due(now * S):
            released.append((end, t.pop(end)[2]))
    return released


def test_a_source_replaying_a_backlog_longer_than_twice_the_grace_is_still_waited_for() -> None:
    """A backlog replay that takes longer than twice the grace (a failover on a busy machine) is not a slow clock:
    it catches up, so it is waited for, and none of its records is late. Judged lagging, the windows the others
    completed were released without it and its records for them dropped: the outputs missing after a failover."""
    t = WindowTracker(hop_ns=S, grace_ns=3 * S, required=frozenset("abcr"), clocked=frozenset("abcr"))
    released = _replay_behind_live_sources(t)
    assert t.late == 0, "records of the replayed source were dropped as late"
    shared = [(end, sources) for end, sources in released if end >= 1000 * S]
    assert len(shared) >= 40 and all(sources == frozenset("abcr") for _, sources in shared)


def test_sources_of_a_replayed_recording_are_not_judged_by_their_distance() -> None:
    """A whole stage replaying old records (a restart after an outage, a recording): every source is far behind the
    worker's clock, and how far one is behind the others is where its partition is read, not its clock. Nobody
    lags, however long that lasts; the processor's own read order decides nothing."""
    t = WindowTracker(hop_ns=S, grace_ns=3 * S, required=frozenset("abcr"), clocked=frozenset("abcr"))
    for now in range(5000, 5030):  # stamps ~4900 s behind; r's partition read 10 windows behind the others'
        k = now - 5000
        for src in ("a", "b", "c"):
            t.add((100 + k) * S, src, 1, 0, now_ns=now * S)
        t.add((90 + k) * S, "r", 1, 0, now_ns=now * S)
        assert t.lagging(now * S) == frozenset()
    assert t.behind() == frozenset({"r"})


def test_a_lagging_source_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """Its records are dropped as late from then on: the log says which source and why, once, not per window."""
    t = WindowTracker(hop_ns=S, grace_ns=3 * S, name="links stage of partition 0")
    for now in range(1000, 1020):
        for src in ("a", "b", "c"):
            t.add(now * S, src, 1, 0, now_ns=now * S)
        t.add((now - 90) * S, "slow", 1, 0, now_ns=now * S)
        t.lagging(now * S)
    lines = [r.getMessage() for r in caplog.records if "lagging" in r.getMessage()]
    assert lines == ["links stage of partition 0: slow is lagging (90 s behind the median source, not catching up): "
                     "not waited for"]


def test_an_incomplete_window_is_logged_with_the_rule_that_released_it(caplog: pytest.LogCaptureFixture) -> None:
    """A window released without a source says which rule let it go: a source that skipped the window (moved on)
    is not one that was waited out, and a log that lumps them together cannot tell a slow source from a lost one."""
    t = WindowTracker(hop_ns=S, grace_ns=3 * S, name="links stage of partition 0")
    for w, srcs in ((1, "ab"), (2, "a"), (3, "ab"), (4, "ab"), (5, "a")):
        for src in srcs:
            t.add(w * S, src, 1, 0, now_ns=w * S)
    for end in t.due(4 * S):
        t.pop(end)
    for end in t.due(8 * S):  # b never reports window 5: waited out after the grace
        t.pop(end)
    lines = [r.getMessage() for r in caplog.records if "released without" in r.getMessage()]
    assert lines == [
        "links stage of partition 0: window ending 2000000000 released without b (they moved on: every source "
        "reported a window 2 hops newer)",
        "links stage of partition 0: window ending 5000000000 released without b (waited out: 3.0 s since its first "
        "record)"]


def backlog_tracker() -> WindowTracker:
    """A flows stage's tracker: two hosts and a leaf required (from the topology), 3 s grace, 30 s for required."""
    required = frozenset({"flows:h1", "flows:h2", "counters:leaf"})
    return WindowTracker(hop_ns=S, grace_ns=3 * S, required=required, required_grace_ns=30 * S, clocked=required)


def test_a_stream_not_read_yet_holds_its_windows_past_every_grace() -> None:
    """On a backlog the consumer reads the counters of twelve windows before any flows: the flows are not late,
    only unread. While the flows stream has unread records, its hosts are waited for (even after start-up, never
    having reported), and the windows are released complete once they are read."""
    t = backlog_tracker()
    for w in range(1, 13):
        t.add(w * S, "counters:leaf", w, w, now_ns=1000 * S)
    assert t.due(now_ns=1100 * S, unread=frozenset({"flows"})) == []  # 100 s: start-up and every grace passed
    for w in range(1, 13):
        for h in ("flows:h1", "flows:h2"):
            t.add(w * S, h, w, w, now_ns=1200 * S)
    assert t.due(now_ns=1200 * S) == [w * S for w in range(1, 13)]
    for w in range(1, 13):
        t.pop(w * S)
    assert (t.incomplete, t.late) == (0, 0)
    # Without the consumer's lag the same backlog is waited out by the wall clock: the old behaviour.
    t = backlog_tracker()
    for w in range(1, 13):
        t.add(w * S, "counters:leaf", w, w, now_ns=1000 * S)
    assert t.due(now_ns=1100 * S) == [w * S for w in range(1, 13)]


def test_a_source_silent_during_a_recording_is_waited_out_in_event_time() -> None:
    """h2 died during the recording: its stream keeps having unread records, but once the stream's median source
    has reported a window the grace beyond, h2 is waited out, without waiting for the backlog to be read."""
    t = backlog_tracker()
    for w in range(1, 6):
        t.add(w * S, "counters:leaf", w, w, now_ns=0)
        t.add(w * S, "flows:h1", w, w, now_ns=0)
    unread = frozenset({"flows"})
    assert t.due(now_ns=100 * S, unread=unread) == []  # window 1 + 30 s (h2 required) not reached in event time
    for w in range(6, 33):
        t.add(w * S, "counters:leaf", w, w, now_ns=100 * S)
        t.add(w * S, "flows:h1", w, w, now_ns=100 * S)
    assert t.frontier("flows") == 32 * S
    assert t.due(now_ns=100 * S, unread=unread) == [S, 2 * S]  # 32 >= 1 + 30 and 2 + 30, not 3 + 30


def test_a_source_whose_stage_on_this_worker_has_not_released_the_window_is_waited_for() -> None:
    """A links stage waits for attributions of flows partition 1, which a stage of this same worker produces: while
    that stage has not released the window, no grace waits it out; once it has, the grace counts from the release."""
    t = WindowTracker(hop_ns=S, grace_ns=6 * S, required=frozenset({"attr:0", "attr:1"}), required_grace_ns=60 * S)
    t.add(S, "attr:0", 0, 0, now_ns=0)
    assert t.due(now_ns=500 * S, upstream={"attr:1": 0}) == []  # its flows stage is still busy before window 1
    assert t.due(now_ns=500 * S, upstream={"attr:1": S}) == []  # just released: its output is on its way
    assert t.due(now_ns=559 * S) == []
    assert t.due(now_ns=560 * S) == [S]  # released 60 s ago and never came: waited out


def test_an_upstream_partition_still_delivering_is_waited_for() -> None:
    """A remote flows stage working through a backlog keeps sending newer windows' attributions (it skipped
    none: the window's are in flight): it is waited for while it delivers, and waited out after a silence."""
    t = WindowTracker(hop_ns=S, grace_ns=6 * S, required=frozenset({"attr:0", "attr:1"}), required_grace_ns=60 * S)
    for w in (1, 2):
        t.add(w * S, "attr:0", w, w, now_ns=0)
        t.add(w * S, "attr:1", w, w, now_ns=0)
    t.pop(t.due(now_ns=0)[0])
    t.pop(t.due(now_ns=0)[0])
    t.add(3 * S, "attr:0", 3, 3, now_ns=10 * S)
    t.add(4 * S, "attr:1", 4, 4, now_ns=65 * S)  # attr:1's window 3 is still coming (not skipped: lateness 2)
    assert t.due(now_ns=100 * S) == []  # 90 s after window 3 opened, but attr:1 delivered 35 s ago
    assert t.due(now_ns=125 * S) == [3 * S, 4 * S]  # silent for 60 s (and attr:0 for window 4 since 10 s)


def test_next_due_ns_says_when_to_check_again() -> None:
    """The earliest clock at which ``due`` can release a window: what a worker waits for instead of checking every
    stage after every record. A record or a release since the last check means: check again now."""
    t = WindowTracker(hop_ns=S, grace_ns=3 * S)
    assert t.next_due_ns() is None  # nothing buffered
    t.add(S, "a", 1, 1, now_ns=10 * S)
    t.add(S, "b", 1, 1, now_ns=10 * S)
    assert t.next_due_ns() == 10 * S  # never checked: now
    assert t.due(11 * S) == [] and t.next_due_ns() == 13 * S  # nothing known yet: the grace from the first record
    assert t.due(13 * S) == [S] and t.next_due_ns() == 13 * S  # released, not popped yet: now
    t.pop(S)
    assert t.next_due_ns() is None
    t.add(2 * S, "a", 1, 1, now_ns=14 * S)
    assert t.next_due_ns() == 13 * S  # a record since the last check: at once
    assert t.due(14 * S) == [] and t.next_due_ns() == 17 * S  # b missing: waited out after the grace
    t.add(2 * S, "b", 1, 1, now_ns=15 * S)
    assert t.due(15 * S) == [2 * S]  # complete before that


def test_next_due_ns_is_none_while_an_unread_stream_holds_the_window() -> None:
    """Held in event time (the stream's frontier), not by the clock: no clock releases it until records come."""
    t = backlog_tracker()
    t.add(S, "counters:leaf", 1, 1, now_ns=1000 * S)
    assert t.due(1100 * S, unread=frozenset({"flows"})) == []
    assert t.next_due_ns() is None
