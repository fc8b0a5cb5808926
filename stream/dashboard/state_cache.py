"""The dashboard's ``/api/state`` body, its windowed part encoded once per finalization instead of per request.

The page polls once a second from every open browser, and the state of a large fabric is large: every link of
512 hosts x 8 NICs (16,384 directed links) with 600 windows of FIM per shown group is 1.5 to 2 MB of JSON, and
building and encoding it took about 185 ms (measured on the test machine) of the worker's event loop, per request,
while records waited. What changes between finalizations is only the clock and the counters (``live``: now, lag,
health, incidents, a few hundred bytes), so :class:`StateCache` keeps the rest (``windowed``) encoded and rebuilds
it only when the state has observed a new finalization (``observed`` moved): per request it encodes the live part
and joins the two. Pure apart from reading the state's clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol


class Snapshots(Protocol):
    """What the cache reads of a ``DashboardState``."""

    observed: int
    clock_ns: Callable[[], int]

    def live(self, now_ns: int) -> dict[str, Any]: ...

    def windowed(self, top_groups: int = 8) -> dict[str, Any]: ...


def encode(obj: dict[str, Any]) -> bytes:
    """Compact JSON of a non-empty dict, UTF-8."""
    return json.dumps(obj, separators=(",", ":")).encode()


class StateCache:
    """The state view's body: ``live`` per call, ``windowed`` once per observed finalization (``rebuilds``)."""

    def __init__(self, state: Snapshots) -> None:
        self.state = state
        self.version = -1  # the state's ``observed`` the cached part was built at
        self.windowed = b""
        self.rebuilds = 0

    def body(self) -> bytes:
        """The whole snapshot as one JSON object (the keys of ``live`` and ``windowed``)."""
        s = self.state
        if s.observed != self.version or not self.windowed:
            self.windowed = encode(s.windowed())
            self.version = s.observed
            self.rebuilds += 1
        live = encode(s.live(s.clock_ns()))
        return live[:-1] + b"," + self.windowed[1:]
