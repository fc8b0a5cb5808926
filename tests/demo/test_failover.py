"""The failover scenario's judgement (pure): which outputs a pair missed, added or changed, and its takeover time."""

from __future__ import annotations

from datetime import datetime

from flowtracer.demo.failover import compare, steady, takeover_s

S = 1_000_000_000


def _outputs(ends: range, value: bytes = b"v", resolver: str = "hash") -> dict:
    return {("flowtracer.fim.v1", "fabric", e * S, 0, resolver): {value} for e in ends}


def test_the_first_windows_are_not_compared() -> None:
    one = _outputs(range(10))
    assert sorted(k[2] // S for k in steady(one)) == [5, 6, 7, 8, 9]
    assert steady({}) == {}


def test_a_pair_that_missed_added_or_changed_outputs_is_not_identical() -> None:
    one = _outputs(range(10)) | _outputs(range(10), resolver="infer")
    assert compare(one, dict(one)).identical
    two = {k: v for k, v in one.items() if k[2] != 7 * S}  # window 7 lost (both resolvers)
    two[("flowtracer.fim.v1", "fabric", 8 * S, 0, "hash")] = {b"other"}
    two[("flowtracer.fim.v1", "leaf01", 9 * S, 0, "hash")] = {b"v"}  # not the single worker's
    two[("flowtracer.fim.v1", "leaf01", 2 * S, 0, "hash")] = {b"v"}  # a partial window: not compared
    diff = compare(one, two)
    assert not diff.identical
    assert [k[2] // S for k in diff.missing] == [7, 7]
    assert [k[2] // S for k in diff.changed] == [8]
    assert [(k[1], k[2] // S) for k in diff.extra] == [("leaf01", 9)]
    assert [e // S for e in diff.windows_lost()] == [7, 8]
    assert compare(one, two, resolvers={"infer"}).missing == [("flowtracer.fim.v1", "fabric", 7 * S, 0, "infer")]


def test_the_takeover_ends_when_the_survivor_has_every_partition_of_the_victim() -> None:
    kill = datetime(2026, 11, 28, 11, 2, 0).timestamp()
    log = "\n".join([
        "2026-11-28 11:01:50,000 INFO    flowtracer.stream.runtime.processor: flows stage of partition 1: no saved "
        "state, starting afresh",
        "\x1b[?25h2026-11-28 11:02:05,500 INFO    flowtracer.stream.runtime.processor: flows stage of partition 0: restored, "
        "continuing after window end 1795862974000000000",
        "2026-11-28 11:02:06,000 WARNING flowtracer.stream.stages.window_tracker: links stage of partition 2: window "
        "ending 1 released without counters:leaf03",
        "2026-11-28 11:02:07,250 INFO    flowtracer.stream.runtime.processor: links stage of partition 2: restored, "
        "continuing after window end 1795862974000000000",
        "2026-11-28 11:02:09,000 INFO    flowtracer.stream.runtime.processor: flows stage of partition 2: restored, "
        "continuing after window end 1795862974000000000",
    ])
    assert takeover_s(log, frozenset({0, 2}), kill) == 7.25
    assert takeover_s(log, frozenset({0, 3}), kill) is None, "partition 3 never taken over"
    assert takeover_s(log, frozenset({1}), kill) is None, "partition 1's stage is from before the kill"
