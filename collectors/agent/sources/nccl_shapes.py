"""Shapes of NCCL log lines the reader does not understand: what they are, how many, and one log line per new one.

A line's *shape* is its text with what varies from host to host and run to run masked, so that one unknown format
is one shape however many hosts, ranks, QPs and addresses print it: hex literals (``0x7f3a..`` -> ``<hex>``),
IPv4 addresses (``<ip>``), long hex runs such as GID halves (``1064A8C0FFFF0000`` -> ``#``) and every other run of
digits (``mlx5_3`` -> ``mlx#_#``, ``qpn 4711`` -> ``qpn #``); NCCL's own ``host:pid:tid [dev]`` becomes ``<nccl>``.
The shape starts with the family of line it failed in (``qp|``, ``channel|``, ``prefix|`` ...), at most
``MAX_SHAPE_CHARS`` characters.

``ShapeCounter`` keeps at most ``max_shapes`` shapes (further new ones are counted under ``OTHER_SHAPE``) and logs
the first line of each new shape, at most ``log_burst`` such log lines at once and one more per ``log_every_s``;
the ones held back are named by number in the next. Pure apart from that logging; the clock is injectable.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from flowtracer.collectors.bounded_counts import count_bounded

log = logging.getLogger(__name__)

MAX_SHAPE_CHARS = 160
"""Longest shape kept (a metric label value)."""
MAX_SHAPES = 200
"""Distinct shapes kept per reader; beyond, new shapes count as ``OTHER_SHAPE``."""
OTHER_SHAPE = "(more shapes than counted one by one)"
MAX_SHAPE_INPUT = 4 * MAX_SHAPE_CHARS
"""Characters of a line masked into its shape: its start is the shape, and masking a 64 KiB line whole costs
seconds (the masks' searches from every position)."""

_MASKS = (
    (re.compile(r"(?P<h>[^\s:\[\]()|]{1,255}):\d+:\d+ \[-?\d+\]"), "<nccl>"),
    (re.compile(r"0[xX][0-9A-Fa-f]+"), "<hex>"),
    (re.compile(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b"), "<ip>"),
    (re.compile(r"\b(?=[0-9A-Fa-f]*\d)[0-9A-Fa-f]{6,}\b"), "#"),
    (re.compile(r"\d+"), "#"),
    (re.compile(r"\s+"), " "),
)


def shape_of(family: str, text: str) -> str:
    """The shape of ``text`` (a message, a prefix or a whole line) failing in ``family``."""
    text = text[:MAX_SHAPE_INPUT]
    for rx, repl in _MASKS:
        text = rx.sub(repl, text)
    return f"{family}|{text.strip()}"[:MAX_SHAPE_CHARS]


def merge_counts(counters: list[ShapeCounter], max_shapes: int = MAX_SHAPES,
                 labelled: set[str] | None = None) -> dict[str, int]:
    """The counts of several readers (an agent's hosts) added by shape, at most ``max_shapes`` shapes: the rest,
    in the order met, under ``OTHER_SHAPE`` (the labels of one metric stay bounded).

    ``labelled``, kept by the caller from call to call, holds the shapes given a label of their own so far and is
    added to: a shape keeps its label for good, so a cumulative metric never counts one shape under two labels
    (which shapes fit would otherwise depend on each call's order)."""
    own = set() if labelled is None else labelled
    out: dict[str, int] = {}
    for c in counters:
        for shape, n in c.counts.items():
            if shape not in own and len(own) < max_shapes - 1:
                own.add(shape)
            key = shape if shape in own else OTHER_SHAPE
            out[key] = out.get(key, 0) + n
    return out


class ShapeCounter:
    """Counts of unknown line shapes (``counts``: shape -> lines), logging each new shape once, rate-limited."""

    def __init__(self, max_shapes: int = MAX_SHAPES, log_burst: int = 5, log_every_s: float = 12.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_shapes < 1 or log_burst < 1 or log_every_s <= 0:
            raise ValueError(f"max_shapes and log_burst must be at least 1 and log_every_s above 0, not "
                             f"{max_shapes}, {log_burst}, {log_every_s}")
        self.counts: dict[str, int] = {}
        self.max_shapes, self.log_burst, self.log_every_s = max_shapes, log_burst, log_every_s
        self._clock = clock
        self._tokens = float(log_burst)
        self._last = clock()
        #: New shapes whose log line was held back by the rate limit, not yet mentioned.
        self.held_back = 0

    def add(self, shape: str, line: str, where: object) -> None:
        """Count one line of ``shape``; ``line`` (its text) and ``where`` (``file:line``, formatted with ``str``
        only when logged) go into the log line of a new shape."""
        new = shape not in self.counts
        if not count_bounded(self.counts, shape, 1, self.max_shapes, OTHER_SHAPE) or not new:
            return
        now = self._clock()
        self._tokens = min(float(self.log_burst), self._tokens + (now - self._last) / self.log_every_s)
        self._last = now
        if self._tokens < 1:
            self.held_back += 1
            return
        self._tokens -= 1
        more = f" ({self.held_back} more new shapes were not logged)" if self.held_back else ""
        self.held_back = 0
        log.warning("%s: NCCL log line of a new shape this reader does not understand, counted by shape in "
                    "flowtracer_agent_nccl_unknown_lines_total{shape=%r}%s: %.200r", where, shape,
                    more, line)
