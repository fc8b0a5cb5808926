"""The source boundary: one failing read costs that part of one window, never the agent.

A source reads several parts of a host every window (the QP view and per-QP counters from
``rdma``, port counters from sysfs, the NCCL log). ``PartGuard.read`` runs one such read; an
exception from it (a parser bug, a kernel file that reads oddly, a recursion limit) is caught
there: the part is missing for this window, the failure is counted per part (``failures``, the
agent exports it as ``flowtracer_agent_source_failures_total{part}``), and the first failure of
each cause (part, exception type) is logged, later ones only counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from flowtracer.collectors.once import OncePerCause

log = logging.getLogger(__name__)

T = TypeVar("T")


class PartGuard:
    """Catches, counts and logs (once per cause) the failures of one source's reads."""

    def __init__(self, where: str) -> None:
        self.where = where
        #: Failed reads by part name (monotonic).
        self.failures: dict[str, int] = {}
        self._once = OncePerCause()  # (part, exception type)

    def read(self, part: str, fn: Callable[[], T], missing: T) -> T:
        """``fn()``, or ``missing`` when it raises (counted and logged as a failure of ``part``)."""
        try:
            return fn()
        except Exception as e:  # the boundary: any failure of one read is that part's, for one window
            self.fail(part, e)
            return missing

    def fail(self, part: str, e: BaseException) -> None:
        """Count a failure of ``part``; log it if it is the first of its cause."""
        self.failures[part] = self.failures.get(part, 0) + 1
        if not self._once.first((part, type(e).__name__)):
            return
        log.warning("%s: reading %s failed (%s: %s); it is missing for this window and the agent goes on; "
                    "further failures of this cause are only counted (flowtracer_agent_source_failures_total)",
                    self.where, part, type(e).__name__, e, exc_info=True)
