"""When a gNMI stream counts as stalled: silence the collector was running to see, not its own starvation (pure).

A session's watchdog wakes every ``period`` and cancels the call when nothing arrived for the liveness timeout (a
stalled stream: TCP alive, switch silent; session.py). Time since the last message alone does not say that the
switch was silent: when the collector itself was not running (a busy machine descheduled it, its event loop was
blocked), the switch's samples wait in the socket, unread, and the watchdog wakes to a long gap before the reader has
had its turn. Cancelling then throws those samples away and makes the next one a baseline: windows without a
measurement, though the switch sent every sample (stopping the collector for 4 s in a running pipeline lost four
windows of every switch this way; the likely cause of a leaf's unmeasured window on a CPU-loaded test machine).

So each wake counts at most one period of the time since the previous wake (or the last message): a wake later
than that was a gap the collector did not see, and the reader, delayed as much, reads what came meanwhile before the
next wake. A switch that really went silent is still found: each wake counts its period, so a stall is declared
after at most ``timeout / period`` + 1 wakes however busy the machine is (on an idle one, after the timeout as
before, give or take a period); the cost of a starved collector is latency, never a reconnect that loses samples.
"""

from __future__ import annotations


class Liveness:
    """The watchdog's view of one session's silence.

    Args:
        timeout_s: silence (seen while running) after which the stream counts as stalled, s.
        period_s: how often the watchdog wakes, s.
        start_s: when the session started (monotonic clock, s); it counts as the last message.
    """

    def __init__(self, timeout_s: float, period_s: float, start_s: float) -> None:
        self.timeout_s = timeout_s
        self.period_s = period_s
        self._checked_s = start_s
        self._last_rx_s = start_s
        #: Silence not seen since the last message: the parts of late wakes beyond one period, s.
        self.unseen_s = 0.0

    def silence(self, now_s: float, last_rx_s: float) -> float:
        """Record a wake at ``now_s`` given when the last message arrived (both monotonic, s); the silence since
        that message that the collector was running to see, s."""
        if last_rx_s > self._last_rx_s:  # a message since the last wake: earlier gaps do not count against it
            self._last_rx_s = last_rx_s
            self.unseen_s = 0.0
        elapsed = max(0.0, now_s - max(self._checked_s, self._last_rx_s))
        self.unseen_s += elapsed - min(elapsed, self.period_s)  # at most one period counted per wake
        self._checked_s = now_s
        return max(0.0, now_s - self._last_rx_s - self.unseen_s)

    def stalled(self, now_s: float, last_rx_s: float) -> bool:
        """Whether the stream counts as stalled at this wake (``silence`` beyond the timeout)."""
        return self.silence(now_s, last_rx_s) > self.timeout_s
