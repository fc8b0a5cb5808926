"""Test helper shared by every stage's tests: wait for an outcome, not for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``cond`` every 20 ms until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)
