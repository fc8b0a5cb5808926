"""Test helper: a command in a real terminal (a tmux pane of a given size), its screen read with capture-pane.

The tmux server runs on its own socket with no user configuration; the pane stays after its command exits
(remain-on-exit) so the last screen can be read. :meth:`Terminal.close` stops the pane's process and the server
by their process ids.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from waiting import wait_for


def tmux_or_none() -> str | None:
    """The tmux binary (Debian package tmux; ``make system-deps`` installs it), or None."""
    return shutil.which("tmux")


class Terminal:
    """``command`` (a shell line) running in a ``width`` x ``height`` tmux pane, started in ``cwd``."""

    def __init__(self, command: str, cwd: Path, width: int = 120, height: int = 40) -> None:
        self.socket = f"flowtracer-test-{uuid.uuid4().hex[:8]}"
        conf = cwd / "tmux.conf"
        conf.write_text("set -g remain-on-exit on\nset -g history-limit 5000\n")
        out = self._tmux("-f", str(conf), "new-session", "-d", "-x", str(width), "-y", str(height), "-c", str(cwd),
                         "-P", "-F", "#{pane_pid} #{pid}", command)
        pane, server = out.split()
        self.pane_pid, self.server_pid = int(pane), int(server)

    def _tmux(self, *args: str) -> str:
        # without COLUMNS and LINES: pytest-xdist's workers run with COLUMNS=80 and LINES=24 in their environment,
        # which the tmux server would hand the pane, and a terminal program takes them over the pane's real size
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True,
                              timeout=30, env=env).stdout

    def screen(self) -> str:
        """The visible screen, one line per row."""
        return self._tmux("capture-pane", "-p", "-t", "0")

    def scrollback(self) -> str:
        """Everything the pane printed, its history included."""
        return self._tmux("capture-pane", "-p", "-S", "-", "-t", "0")

    def exited(self) -> bool:
        return self._tmux("display-message", "-p", "-t", "0", "#{pane_dead}").strip() == "1"

    def wait_screen(self, cond: object, timeout: float, what: str) -> str:
        """Poll the screen until ``cond(screen)`` holds (or the command exits: the last screen is returned)."""
        seen = [""]

        def check() -> bool:
            seen[0] = self.screen()
            return bool(cond(seen[0])) or self.exited()  # type: ignore[operator]

        wait_for(check, timeout, what)
        return seen[0]

    def interrupt(self) -> None:
        """Ctrl-C, as a user types it."""
        self._tmux("send-keys", "-t", "0", "C-c")

    def close(self) -> None:
        """Stop the pane's process (SIGINT, then SIGKILL) and the tmux server, by their process ids."""
        for pid, sig in ((self.pane_pid, signal.SIGINT), (self.server_pid, signal.SIGTERM)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                deadline = time.monotonic() + 60
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1][:1] != "Z"  # a zombie has exited
    return True
