"""Did the run keep real time: the simulator's lag behind the wall clock, and the CPU the run used
(the whole machine's busy share from ``/proc/stat``, and the stages' CPU seconds).

On the kernel data plane the veths forward in softirq context, which the kernel charges to whatever
runs on that CPU, so the machine-wide share is the honest number for "does this keep real time on
this box"; the stages' own CPU (user + system of the waited-for children) is what the processes did.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path


def _proc_stat() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs since boot, or None where /proc/stat is not readable."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


class CpuMeter:
    """Started at construction; ``stop()`` gives the machine's busy share over the interval."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._s0 = _proc_stat()

    def stop(self) -> dict[str, float | int | None]:
        """``machine_busy``: busy share of all CPUs, 0..1; ``cores``; ``interval_s``: wall seconds."""
        s1 = _proc_stat()
        busy = None
        if self._s0 is not None and s1 is not None and s1[1] > self._s0[1]:
            busy = round((s1[0] - self._s0[0]) / (s1[1] - self._s0[1]), 3)
        return {"machine_busy": busy, "cores": os.cpu_count(), "interval_s": round(time.monotonic() - self._t0, 1)}


def children_cpu_s() -> float:
    """User + system CPU seconds of every child process waited for so far (the stages and the broker)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(r.ru_utime + r.ru_stime, 1)


def sim_lag_s(ground_truth_dir: str | None, now_ns: int) -> float | None:
    """Seconds between ``now_ns`` (wall clock, ns) and the end of the newest tick the simulator wrote to
    ground truth (``ticks.jsonl``), read while it runs: a real-time simulator is at most about one tick
    (1 s) behind; more means it could not keep up. None without ground truth."""
    if not ground_truth_dir:
        return None
    try:
        with open(Path(ground_truth_dir) / "ticks.jsonl", "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - (1 << 20)))
            lines = f.read().split(b"\n")
    except OSError:
        return None
    for line in reversed(lines[1:-1] if len(lines) > 2 else lines[:-1]):  # whole lines only
        try:
            return round((now_ns - int(json.loads(line)["end_ns"])) / 1e9, 3)
        except (ValueError, KeyError):
            continue
    return None
