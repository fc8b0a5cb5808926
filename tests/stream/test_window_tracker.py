"""Window release rules: complete, moved on, overdue; strictly in order; late records counted."""

from flowtracer.stream.window_tracker import WindowTracker

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


def test_stream_moving_on_releases_and_order_is_kept() -> None:
    t = WindowTracker(hop_ns=S, grace_ns=100 * S, lateness_hops=2)
    t.add(1 * S, "a", 1, 1, 0)
    t.add(2 * S, "a", 2, 2, 0)
    assert t.due(0) == []
    t.add(3 * S, "a", 3, 3, 0)
    assert t.due(0) == [S]  # window 1 is two hops behind the newest
    t.pop(S)
    assert t.due(0) == [2 * S, 3 * S]  # complete now: "a" is the only expected source


def test_late_records_are_counted_not_reopened() -> None:
    t = WindowTracker(hop_ns=S, grace_ns=0)
    t.add(S, "a", 1, 1, 0)
    t.pop(t.due(0)[0])
    assert t.add(S, "b", 2, 2, 0) is False
    assert t.late == 1
