"""``flowtracer path`` on bad input and an unreachable broker: a clear error naming what was wrong, never a
traceback (the reading itself is tested on a real demo: tests/e2e/test_demo_flow_paths.py)."""

from __future__ import annotations

import socket
import subprocess
import sys


def _path(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowtracer", "path", *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_bad_flow_is_refused_naming_the_option_and_the_part() -> None:
    res = _path("--kafka", "127.0.0.1:1", "--flow", "10.0.0.1,10.0.0.x,52208")
    assert res.returncode == 2, res.stderr
    assert "flowtracer path: --flow '10.0.0.1,10.0.0.x,52208': destination IP '10.0.0.x' is not an IP address" \
        in res.stderr and "Traceback" not in res.stderr


def test_an_unreachable_broker_exits_1_naming_it() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = _path("--kafka", f"127.0.0.1:{port}", "--job", "j")
    assert res.returncode == 1, res.stderr
    assert "flowtracer path: cannot consume the output topics" in res.stderr and "Traceback" not in res.stderr
