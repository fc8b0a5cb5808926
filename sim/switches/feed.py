"""The asyncio side of the gNMI servers: one event loop per process and one feed per switch.

Internal to :mod:`flowtracer.sim.switches.server`. :class:`LoopThread` runs the loop every server of
the process shares (started by the first server, ended by the last). A :class:`Feed` is one
switch as that loop sees it: it listens to the engine's events (in the engine's thread, handing
them over with ``call_soon_threadsafe``), reads each tick once for all streams, owns the
switch's shared :class:`~flowtracer.sim.switches.encode.UpdateEncoder`, and wakes the
:class:`Stream` of every Subscribe call; servers over the same state share its feed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import threading
from collections.abc import Awaitable
from typing import Any

from flowtracer.sim.switches.encode import UpdateEncoder
from flowtracer.sim.switches.schema import Tick, read_tick
from flowtracer.sim.switches.state import Event, EventKind, SwitchState
from flowtracer.sim.switches.subscription import GnmiError

# -- one asyncio loop per process -------------------------------------------------------------


class LoopThread:
    """The event loop all servers of the process run on; started by the first, ended by the last."""

    _lock = threading.Lock()
    _current: LoopThread | None = None

    def __init__(self) -> None:
        self.users = 0
        self.loop = asyncio.new_event_loop()
        self.feeds: dict[int, tuple[Feed, int]] = {}  # id(state) -> (feed, servers using it)
        self.thread = threading.Thread(target=self._run, name="gnmi-server-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.close()

    @classmethod
    def acquire(cls) -> LoopThread:
        with cls._lock:
            if cls._current is None:
                cls._current = cls()
            cls._current.users += 1
            return cls._current

    def release(self) -> None:
        with self._lock:
            self.users -= 1
            if self.users > 0:
                return
            type(self)._current = None
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    def run(self, coro: Awaitable[Any], timeout: float | None = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def feed(self, state: SwitchState, clock_offset_ns: int = 0) -> Feed:
        with self._lock:
            feed, n = self.feeds.get(id(state), (None, 0))
            if feed is None:
                feed = Feed(state, self.loop, clock_offset_ns)
            self.feeds[id(state)] = (feed, n + 1)
            return feed

    def drop_feed(self, state: SwitchState) -> None:
        with self._lock:
            feed, n = self.feeds[id(state)]
            if n > 1:
                self.feeds[id(state)] = (feed, n - 1)
                return
            del self.feeds[id(state)]
        feed.close()


# -- per switch: events in, shared ticks and encodings out ------------------------------------


class Stream:
    """What the loop tells one Subscribe call: a tick happened, an interface changed, end now."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()
        self.sample = False
        # Bounded: a client too slow for a flapping link loses the oldest changes, not the server's memory.
        self.opers: collections.deque[tuple[int, str, str, int]] = collections.deque(maxlen=10_000)
        self.polls = 0
        self.half_closed = False
        self.end: GnmiError | None = None
        self.wants_oper = False

    def stop(self, error: GnmiError) -> None:
        if self.end is None:
            self.end = error
        self.wake.set()


class Feed:
    """One switch as the loop sees it: its streams, its latest tick and its encoder.

    ``clock_offset_ns`` is how far this switch's clock is off (ns, > 0: ahead): every timestamp it
    sends (samples, oper changes, Get) is the engine's plus this, as a switch with a wrong clock would.
    """

    def __init__(self, state: SwitchState, loop: asyncio.AbstractEventLoop, clock_offset_ns: int = 0) -> None:
        self.state = state
        self.loop = loop
        self.clock_offset_ns = clock_offset_ns
        self.streams: set[Stream] = set()
        self.encoder = UpdateEncoder()
        self._tick: Tick | None = None
        self._raw_ns = 0  # the engine's timestamp of ``_tick`` (before the clock offset)
        self._last_sample_ns = 0
        #: Half the engine's tick (ns), learnt from SAMPLE events: the sampling tolerance.
        self.tolerance_ns = 0
        state.add_listener(self._on_event)

    def close(self) -> None:
        self.state.remove_listener(self._on_event)

    def tick(self) -> Tick:
        """The switch's latest tick, read once per engine tick (loop thread only)."""
        st, t = self.state, self._tick
        if t is None or self._raw_ns != st.timestamp_ns or t.boot_epoch != st.boot_epoch:
            new = read_tick(st)
            self._raw_ns = new.timestamp_ns
            if self.clock_offset_ns and new.timestamp_ns:
                new = dataclasses.replace(new, timestamp_ns=new.timestamp_ns + self.clock_offset_ns)
            if t is not None and new.boot_epoch != t.boot_epoch:
                self.encoder.reset()
            self._tick = t = new
        return t

    def _on_event(self, event: Event) -> None:
        """Engine thread: hand the event to the loop (capturing an oper change while it is current)."""
        if not self.streams:
            return
        captured = None
        if event.kind is EventKind.OPER_STATUS:
            with self.state.lock:
                i = self.state.interfaces.get(event.interface)
                if i is not None:
                    captured = ("UP" if i.oper_up else "DOWN", i.last_change_ns)
        with contextlib.suppress(RuntimeError):  # the loop is gone: the servers are stopping
            self.loop.call_soon_threadsafe(self._dispatch, event, captured)

    def _dispatch(self, event: Event, captured: tuple[str, int] | None) -> None:
        if event.kind is EventKind.SAMPLE:
            if self._last_sample_ns and event.timestamp_ns > self._last_sample_ns:
                self.tolerance_ns = (event.timestamp_ns - self._last_sample_ns) // 2
            self._last_sample_ns = event.timestamp_ns
            for s in self.streams:
                s.sample = True
                s.wake.set()
        elif event.kind is EventKind.OPER_STATUS:
            if captured is None:
                return
            for s in self.streams:
                if s.wants_oper:
                    s.opers.append((event.timestamp_ns + self.clock_offset_ns, event.interface, *captured))
                    s.wake.set()
        elif event.kind is EventKind.REBOOT:
            self._last_sample_ns = 0
            for s in list(self.streams):
                s.stop(GnmiError("UNAVAILABLE", f"switch {self.state.name} is rebooting"))
