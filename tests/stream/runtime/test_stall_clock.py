"""The window rules' clock stands still while the worker is cut off from Kafka, then catches up."""

from __future__ import annotations

from flowtracer.stream.runtime.stall_clock import StallClock

S = 1_000_000_000


def test_wall_clock_while_input_flows_or_outputs_are_acknowledged() -> None:
    clock = StallClock(3 * S)
    clock.received(100 * S)
    assert clock.now(100 * S, None) == 100 * S
    # The sources stopped, but every output is acknowledged: silent sources are waited out by the wall clock.
    assert clock.now(200 * S, None) == 200 * S
    # Input flows while a finalization waits for its acknowledgement: the wall clock too.
    clock.received(201 * S)
    assert clock.now(202 * S, 150 * S) == 202 * S


def test_stands_still_while_cut_off_then_catches_up_at_twice_the_wall_rate() -> None:
    clock = StallClock(3 * S)
    clock.received(100 * S)
    assert clock.now(100 * S, 100 * S) == 100 * S
    assert clock.now(103 * S, 100 * S) == 103 * S  # not yet stalled for 3 s
    seen = [clock.now(t * S, 100 * S) for t in range(104, 224)]  # the broker down for 2 minutes
    assert seen == [103 * S] * len(seen), "stands still"
    assert clock.lag_ns == 120 * S
    clock.received(224 * S)  # the broker is back
    assert clock.now(224 * S, 100 * S) == 105 * S  # the last second counts: input came in it
    assert clock.now(234 * S, None) == 125 * S  # twice the wall rate
    assert clock.now(344 * S, None) == 344 * S  # caught up: the wall clock again
    assert clock.lag_ns == 0


def test_a_worker_blocked_on_a_send_stands_still_though_buffered_input_follows() -> None:
    """A send to a gone broker blocks the worker for a minute; then it handles records fetched before the cut (input
    looks current) and asks its clock: the blocked minute must not count."""
    clock = StallClock(3 * S)
    clock.received(100 * S)
    assert clock.now(100 * S, None) == 100 * S
    clock.received(160 * S)  # a record read before the cut, handled once the send gave up
    assert clock.now(160 * S, 100 * S) == 100 * S
    assert clock.lag_ns == 60 * S
    # an ordinary gap (the worker idle, every output acknowledged) is the wall clock
    clock = StallClock(3 * S)
    clock.now(100 * S, None)
    clock.received(160 * S)
    assert clock.now(160 * S, None) == 160 * S


def test_no_input_and_no_broker_connection_is_cut_off_though_every_output_was_acknowledged() -> None:
    """Nothing in flight at the cut: the client's lost connection tells it from sources that went quiet."""
    clock = StallClock(3 * S)
    clock.received(100 * S)
    assert clock.now(100 * S, None) == 100 * S
    # not yet silent for 3 s at 102; from 104 on cut off, back to the last reading (102)
    assert [clock.now(t * S, None, unreachable=True) for t in (102, 104, 130)] == [102 * S, 102 * S, 102 * S]
    clock.received(131 * S)  # the broker is back: the last second counts twice (catching up)
    assert clock.now(131 * S, None) == 104 * S and clock.lag_ns == 27 * S
    # sources that went quiet while the broker stays reachable: the wall clock
    quiet = StallClock(3 * S)
    quiet.received(100 * S)
    assert [quiet.now(t * S, None, unreachable=False) for t in (104, 130)] == [104 * S, 130 * S]


def test_never_goes_backwards() -> None:
    clock = StallClock(S)
    clock.received(0)
    times = [clock.now(t * S // 2, 0 if t % 7 < 4 else None) for t in range(60)]
    assert times == sorted(times)


def test_does_not_catch_up_while_a_source_is_behind() -> None:
    """The lagging rule times how long a source stays behind by this clock: catching up then would hasten it."""
    clock = StallClock(S)
    clock.received(0)
    assert clock.now(S, 0) == S
    assert clock.now(10 * S, 0) == S  # cut off
    clock.received(11 * S)
    assert clock.now(11 * S, None, behind=True) == 2 * S  # the wall rate
    assert clock.now(12 * S, None, behind=False) == 4 * S  # twice the wall rate
