"""Where the terminal view goes: redrawn in place on a terminal (``rich``'s Live display), compact lines otherwise.

:class:`LiveView` takes :class:`~flowtracer.demo.view_state.ViewState` frames from ``flowtracer demo`` or
``flowtracer top``. On a TTY it redraws one screen (demo/view_render.py's :func:`screen`), messages printed above
it; on a pipe, in CI or with ``--log-format json`` it writes only :func:`change_lines`, so a quiet run prints
little. Rich's Live: https://rich.readthedocs.io/en/stable/live.html.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

from rich.console import Console
from rich.live import Live

from flowtracer.demo.view_render import Reported, change_lines, screen
from flowtracer.demo.view_state import ViewState, first_seen


def redraws(out: TextIO, json_logs: bool) -> bool:
    """Whether frames on ``out`` are redrawn in place: a TTY that can move its cursor (``TERM=dumb``, e.g. Emacs'
    shell, cannot: it gets the compact lines), and no JSON logs asked for (a log shipper reads those)."""
    return out.isatty() and not json_logs and os.environ.get("TERM", "") != "dumb"


class LiveView:
    """Shows frames on ``out``: ``live`` redraws one screen in place, else compact lines of what changed."""

    def __init__(self, out: TextIO, live: bool) -> None:
        self.out = out
        self.live = live
        self.reported = Reported()
        self.seen: dict[str, int] = {}
        self.console = Console(file=out, force_terminal=live or None, highlight=False, soft_wrap=False)
        self._live: Live | None = None
        #: log handlers pointed at the live display while it runs, with the stream each had
        self._handlers: list[tuple[logging.StreamHandler[TextIO], TextIO]] = []

    def show(self, state: ViewState) -> None:
        """Draw ``state`` (a terminal), or write what changed since the last frame (anything else)."""
        self.seen = first_seen(self.seen, state)
        if not self.live:
            lines, self.reported = change_lines(self.reported, state)
            for line in lines:
                self.message(line)
            return
        view = screen(state, self.seen)
        if self._live is None:
            # redrawn only when a frame comes (no refresh thread): the demo and top decide the pace
            self._live = Live(view, console=self.console, auto_refresh=False, transient=False,
                              vertical_overflow="crop")
            self._live.start(refresh=True)
            self._logs_above()
        else:
            self._live.update(view, refresh=True)

    def message(self, text: str) -> None:
        """A line that stays: above the screen on a terminal, appended otherwise."""
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            self.out.write(text + "\n")
            self.out.flush()

    def _logs_above(self) -> None:
        """Send the process's log lines (stderr) through the live display, above the screen: written straight to
        the terminal they would land inside the screen and be overwritten (Live redirects ``sys.stderr``, but a
        handler keeps the stream it was made with)."""
        for h in logging.getLogger().handlers:
            if type(h) is logging.StreamHandler and h.stream is sys.__stderr__:
                self._handlers.append((h, h.stream))
                h.setStream(sys.stderr)

    def close(self) -> None:
        """Leave the last screen where it is; what follows prints below it."""
        for h, stream in self._handlers:
            h.setStream(stream)
        self._handlers.clear()
        if self._live is not None:
            self._live.stop()
            self._live = None
