"""Where the view goes (no servers): a terminal gets one screen redrawn in place, anything else compact lines of
what changed."""

from __future__ import annotations

import io
import os
from dataclasses import replace

import pytest
from test_view_state import T0, observed

from flowtracer.demo.live_view import LiveView, redraws
from flowtracer.demo.view_state import view_state

S = 1_000_000_000


def test_not_a_terminal_gets_compact_lines_only_when_something_changes() -> None:
    out = io.StringIO()
    view = LiveView(out, live=False)
    v = view_state(observed(), "t", "5s", now_ns=T0 + 6 * S)
    view.show(v)
    first = out.getvalue().splitlines()
    assert len(first) == 2 and "fabric FIM measured 0.500" in first[0] and "+ collision" in first[1]
    for _ in range(10):  # the same fabric, frame after frame: nothing more is printed
        view.show(v)
    view.message("done")
    view.close()
    assert out.getvalue().splitlines() == [*first, "done"]
    assert "\x1b[" not in out.getvalue()


def test_a_terminal_gets_one_screen_redrawn_in_place_with_messages_above() -> None:
    out = io.StringIO()
    view = LiveView(out, live=True)
    v = view_state(observed(), "flowtracer demo", "5s", now_ns=T0 + 6 * S)
    view.show(v)
    drawn = out.getvalue()
    assert "fabric FIM" in drawn and "collisions" in drawn
    view.message("a line that stays")
    view.show(replace(v, clock="6s"))
    view.close()
    rest = out.getvalue()[len(drawn):]
    # rich moves the cursor up over the previous screen and erases it before drawing the next (ESC[nA, ESC[2K)
    assert "\x1b[1A" in rest and "\x1b[2K" in rest
    assert "a line that stays" in rest and rest.rindex("6s") > rest.index("a line that stays")


def test_only_a_terminal_that_can_move_its_cursor_is_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = os.openpty()  # a real terminal device, as over SSH
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            monkeypatch.setenv("TERM", "xterm-256color")
            assert redraws(tty, json_logs=False)
            assert not redraws(tty, json_logs=True)  # a log shipper reads the lines
            monkeypatch.setenv("TERM", "dumb")  # Emacs' shell, some CI consoles: no cursor movement
            assert not redraws(tty, json_logs=False)
        assert not redraws(io.StringIO(), json_logs=False)  # a pipe or a file
    finally:
        os.close(master)
        os.close(slave)
