"""The ack ledger acks a partition's records in offset order, whatever order stages release them in."""

from __future__ import annotations

import pytest

from flowtracer.stream.runtime.ack_ledger import AckLedger


def test_a_record_released_early_waits_for_every_lower_offset() -> None:
    ledger = AckLedger()
    held = ledger.receive("counters", 0, 10, "e10")  # window W, still buffered
    ahead = ledger.receive("counters", 0, 11, "e11")  # window W+1 of a faster switch
    ledger.accepted(held, 1)
    ledger.accepted(ahead, 0)  # nothing kept it (a late record): done at once
    assert ledger.ackable() == [], "offset 11 must not be acked while 10 is held: a commit would pass 10"
    ledger.release(held)
    assert ledger.ackable() == ["e10", "e11"]
    assert ledger.held() == 0


def test_partitions_are_independent_and_two_holds_need_two_releases() -> None:
    ledger = AckLedger()
    a = ledger.receive("counters", 0, 5, "a")
    b = ledger.receive("counters", 1, 9, "b")
    ledger.accepted(a, 2)  # the flows stage and the links stage both buffered it
    ledger.accepted(b, 1)
    ledger.release(b)
    assert ledger.ackable() == ["b"]
    ledger.release(a)
    assert ledger.ackable() == []
    ledger.release(a)
    assert ledger.ackable() == ["a"]


def test_a_replayed_lower_offset_read_after_a_higher_one_is_acked_first() -> None:
    ledger = AckLedger()
    stale = ledger.receive("flows", 2, 50, "stale")  # read before a rebalance, processed after it
    replay = ledger.receive("flows", 2, 40, "replay")  # the replay from the committed offset
    ledger.accepted(stale, 0)
    ledger.accepted(replay, 1)
    assert ledger.ackable() == []
    ledger.release(replay)
    assert ledger.ackable() == ["replay", "stale"]


def test_records_of_a_revoked_partition_are_never_acked() -> None:
    ledger = AckLedger()
    mine = ledger.receive("flows", 0, 1, "mine")
    gone = ledger.receive("flows", 3, 1, "gone")
    for h in (mine, gone):
        ledger.accepted(h, 1)
    ledger.revoke({("flows", 3)})
    assert ledger.partitions() == {("flows", 0)}
    ledger.release(gone)
    ledger.release(mine)
    assert ledger.ackable() == ["mine"]
    assert gone.dropped and not mine.dropped


@pytest.mark.parametrize(("max_held", "received", "full", "overflows"), [
    (3, 2, False, 0),
    (3, 3, True, 0),  # at the bound: the reader waits before the next record
    (3, 5, True, 2),  # records read past the bound anyway are counted
    (1, 1, True, 0),
])
def test_a_stuck_record_bounds_its_partition(max_held: int, received: int, full: bool, overflows: int) -> None:
    ledger = AckLedger(max_held=max_held)
    stuck = ledger.receive("counters", 0, 0, "e0")  # its window never completes
    ledger.accepted(stuck, 1)
    for offset in range(1, received):
        ledger.accepted(ledger.receive("counters", 0, offset, f"e{offset}"), 0)  # done at once, but behind e0
    assert ledger.ackable() == []
    assert (ledger.full("counters", 0), ledger.overflows) == (full, overflows)
    assert not ledger.full("counters", 1)  # other partitions read on
    ledger.release(stuck)
    assert ledger.ackable() == [f"e{i}" for i in range(received)]
    assert not ledger.full("counters", 0)
