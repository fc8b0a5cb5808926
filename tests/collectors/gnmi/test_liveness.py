"""The liveness rule: a stream is stalled after silence the collector was running to see, not after its own
starvation."""

from flowtracer.collectors.gnmi.liveness import Liveness

TIMEOUT, PERIOD = 3.0, 0.75


def wakes(watch: Liveness, last_rx: float, times: list[float]) -> list[bool]:
    return [watch.stalled(t, last_rx) for t in times]


def test_a_silent_switch_is_stalled_after_the_timeout_give_or_take_a_period() -> None:
    watch = Liveness(TIMEOUT, PERIOD, start_s=100.0)
    got = wakes(watch, 100.0, [100.0 + PERIOD * k for k in range(1, 7)])
    assert got == [False, False, False, False, True, True]  # 3.75 s of silence > 3 s


def test_a_starved_collector_does_not_count_its_own_gap_as_the_switch_silence() -> None:
    """The collector was descheduled 4 s just after a sample: its watchdog wakes 4 s late, before the reader has
    read the samples waiting in the socket. Today that gap alone reconnects the session and loses them."""
    watch = Liveness(TIMEOUT, PERIOD, start_s=100.0)
    assert not watch.stalled(100.75, 100.5)
    assert not watch.stalled(104.75, 100.5)  # 4 s late: one period of it counts
    assert not watch.stalled(105.5, 104.9)  # the reader read the waiting samples: silence starts again


def test_a_switch_silent_for_good_is_found_however_late_every_wake_is() -> None:
    """On a loaded machine every wake is late by a period or more: the stall is found in a bounded number of
    wakes (each counts its period), later than on an idle machine, but found."""
    watch = Liveness(TIMEOUT, PERIOD, start_s=0.0)
    got = wakes(watch, 0.0, [2.0 * k for k in range(1, 8)])
    assert got.index(True) == 4  # the fifth wake: 5 x 0.75 s counted > 3 s
    assert watch.silence(30.0, 0.0) > TIMEOUT


def test_silence_before_a_starvation_still_counts() -> None:
    """A switch silent 2.25 s, then the collector starved: the silence it saw and a period per wake count."""
    watch = Liveness(TIMEOUT, PERIOD, start_s=0.0)
    assert not any(wakes(watch, 0.0, [0.75, 1.5, 2.25]))
    assert not watch.stalled(5.0, 0.0)  # 2.25 s seen + one period of the 2.75 s gap: 3 s, not beyond
    assert watch.stalled(5.75, 0.0)  # the next wake on time: stalled
