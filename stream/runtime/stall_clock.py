"""The clock the window rules wait by: wall time that stands still while the worker is cut off from Kafka (pure).

A window is waited out for a silent source after a grace of the worker's clock (stream/stages/window_policy.py).
When the broker is down, no source can reach the worker and the worker's own outputs cannot reach the broker (its
attributions and group FIMs go through Kafka to the stages that wait for them): every source is silent, and by the
wall clock a 2-minute outage would release the windows open at its start without the records in flight, which would
then come late. Nobody moved on in that time, so it must not count.

The worker is *cut off* when no input record came for ``stall_ns`` and its oldest unreleased finalization (outputs
not yet acknowledged, or not yet durable in the store) is older than ``stall_ns``: the input stopped because of
Kafka (or of the worker's own backpressure), not because the sources stopped, since then its outputs would be
acknowledged. While cut off the clock stands still; afterwards it runs at twice the wall rate until it has caught
up, so the records that were in flight get the grace they had left, and a source silent for good is still waited
out (later by at most the outage). While a source is behind the others (the backlog after the outage is being
read) it runs at the wall rate: at twice the rate the lagging rule would give up on that source in half the time.
When the sources alone stop, the clock is the wall clock.

Nothing may be in flight at the cut: every output acknowledged, the next windows' records on their way. Then the
worker's Kafka client holding no broker connection (``unreachable``, faust_driver.py) tells it apart from sources
that went quiet, and with no input for ``stall_ns`` it counts as cut off too.

The worker can also be *blocked*: a send to a broker that is gone waits up to a minute for metadata, and the
worker asks its clock nothing meanwhile. When it next asks, records it had fetched before the cut are being handled,
so input looks current. A gap between two readings longer than ``stall_ns`` while a finalization waited for its
acknowledgement longer than ``stall_ns`` is therefore counted as cut off too, whatever the input says; otherwise
the last window before an outage would be released without its attributions while the send waits.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class StallClock:
    """Wall time minus the time the worker was cut off from Kafka (being caught up at twice the wall rate).

    Args:
        stall_ns: how long no input and an unacknowledged output must last to count as cut off, ns.
    """

    def __init__(self, stall_ns: int) -> None:
        self.stall_ns = stall_ns
        #: How far the clock is behind the wall clock, ns.
        self.lag_ns = 0
        self._last_input_ns: int | None = None
        self._last_wall_ns: int | None = None
        self._cut_off = False

    def received(self, wall_ns: int) -> None:
        """An input record arrived (wall clock, ns)."""
        self._last_input_ns = wall_ns

    def now(self, wall_ns: int, oldest_unreleased_ns: int | None, behind: bool = False,
            unreachable: bool = False) -> int:
        """The clock at ``wall_ns``, given when the oldest finalization not yet released was published (None: none),
        whether a source is behind the others (then it does not catch up) and whether the worker's Kafka client
        holds no broker connection (faust_driver.py)."""
        elapsed = max(0, wall_ns - self._last_wall_ns) if self._last_wall_ns is not None else 0
        self._last_wall_ns = wall_ns
        unacked = oldest_unreleased_ns is not None and wall_ns - oldest_unreleased_ns > self.stall_ns
        silent = self._last_input_ns is not None and wall_ns - self._last_input_ns > self.stall_ns
        cut_off = silent and (unacked or unreachable)
        if unacked and elapsed > self.stall_ns and not self._cut_off:
            log.warning("the worker was blocked %.1f s with outputs unacknowledged (a send waiting for the broker): "
                        "that time is not waited out", elapsed / 1e9)
            self.lag_ns += elapsed
            elapsed = 0
        if cut_off != self._cut_off:
            if cut_off:
                log.warning("no input for %.1f s and %s: cut off from Kafka (or held by the store); windows are "
                            "not waited out until input resumes", (wall_ns - (self._last_input_ns or wall_ns)) / 1e9,
                            "outputs unacknowledged" if unacked else "no broker connection")
            else:
                log.warning("input resumed after a cut-off; the window clock is %.1f s behind and catches up",
                            self.lag_ns / 1e9)
            self._cut_off = cut_off
        # Standing still while cut off, catching up at twice the wall rate otherwise: never going backwards.
        if cut_off:
            self.lag_ns += elapsed
        elif not behind:
            self.lag_ns = max(0, self.lag_ns - elapsed)
        return wall_ns - self.lag_ns
