"""`flowtracer demo` in a terminal and in a pipe (real pipeline): on a 120x40 terminal one screen is redrawn in
place and holds the whole view; piped, a 60 s run prints under 100 lines, only what changed."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from terminal import Terminal, tmux_or_none

pytestmark = pytest.mark.slow

SECTIONS = ("fabric FIM   measured", "collisions   ", "incidents    ", "health       lag")


def _demo(run_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "flowtracer", "demo", "--web-port", "0", "--run-dir", str(run_dir), *args]


def test_on_a_120x40_terminal_the_demo_redraws_the_whole_view_in_one_screen(tmp_path: Path) -> None:
    if tmux_or_none() is None:
        pytest.skip("tmux is not installed (`make system-deps` installs it)")
    # Degraded early so that the screen also holds the degraded cable's incident; Ctrl-C ends the run once seen.
    cmd = "exec " + shlex.join(_demo(tmp_path / "run", "--duration", "120", "--degrade-at", "8",
                                     "--status-every", "1"))
    term = Terminal(cmd, tmp_path, 120, 40)
    try:
        screen = term.wait_screen(lambda s: all(x in s for x in SECTIONS) and "degraded_link since" in s, 150,
                                  "the view with the fabric FIM and the degraded cable's incident")
        (tmp_path / "screen.txt").write_text(screen)
        rows = screen.splitlines()
        assert len(rows) <= 40 and max(len(r) for r in rows) <= 120
        assert not term.exited(), term.scrollback()[-3000:]
        # the whole view, one section after another, on the one screen
        at = [next(i for i, r in enumerate(rows) if r.startswith(x)) for x in SECTIONS]
        assert at == sorted(at), screen
        assert re.search(r"^flowtracer demo: 16 hosts, known-collision\s+\d+s/120s$", screen, re.M), screen
        assert re.search(r"^  [▁▂▃▄▅▆▇█]+  last \d+ windows, min \d\.\d{3} max \d\.\d{3}$", screen, re.M), screen
        assert re.search(r"^. leaf01:spine01\|spine02: 3 flows on leaf01:Ethernet5>spine01:Ethernet1 \d+% HARMFUL while",
                         screen, re.M), screen
        assert re.search(r"^. degraded_link since \S+: top suspect cable:leaf03:Ethernet5~spine01:Ethernet3 ", screen,
                         re.M), screen
        assert re.search(r"^health       lag \d+\.\ds, windows \d+, switches reporting \d, dead letters 0, 4 stages up$",
                         screen, re.M), screen
        # redrawn in place: the view is on the terminal once, not once per refresh
        history = term.scrollback()
        assert history.count("fabric FIM   measured") == 1, history[-4000:]
        term.interrupt()
        term.wait_screen(lambda s: False, 120, "the demo to stop after Ctrl-C")
        assert "every process stopped" in term.scrollback()
    finally:
        term.close()


def test_piped_a_60_s_demo_prints_under_100_lines_of_what_changed(tmp_path: Path) -> None:
    res = subprocess.run(_demo(tmp_path / "run", "--duration", "60"), capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    assert len(lines) < 100, res.stdout
    assert "\x1b[" not in res.stdout  # no cursor movement in a pipe
    text = res.stdout
    assert re.search(r"^\[\d+s/60s\] fabric FIM measured 0\.\d{3} attributed 0\.\d{3}$", text, re.M), text
    assert re.search(r"^\[\d+s/60s\] \+ collision leaf01:spine01\|spine02: 3 flows on ", text, re.M), text
    assert re.search(r"^\[\d+s/60s\] \+ incident degraded_link since ", text, re.M), text  # degraded at 30 s
    assert "every process stopped" in text
    # each collision is announced once: the fabric's state, not a line per refresh
    assert len(re.findall(r"\+ collision leaf01:spine01\|spine02", text)) == 1, text
