"""Run records: what a kernel data plane created, so exactly that is removed, also after a crash.

Before creating anything, a run writes ``<state dir>/<prefix>.json``: the run prefix, the owner
(pid and its start time, so a reused pid is not mistaken for the owner), every namespace it will
create and every process it starts (pid and start time). ``remove_run`` deletes exactly those
namespaces that still exist (deleting a namespace deletes its veths) and ends exactly those
processes that are still the ones it started. ``reap_stale`` does that for every record whose
owner is gone; records of live owners are left alone. Nothing is ever found by a name pattern.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

#: Where run records live (tmpfs: a reboot removes namespaces and records together).
STATE_DIR = Path(os.environ.get("FLOWTRACER_KERNEL_STATE_DIR", "/run/flowtracer-kernel"))
NETNS_DIR = Path("/run/netns")


def process_start(pid: int) -> int | None:
    """Start time of a process (clock ticks since boot, /proc/<pid>/stat field 22), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def alive(pid: int, start: int | None) -> bool:
    """True while ``pid`` runs and is the process that started at ``start``."""
    now = process_start(pid)
    return now is not None and (start is None or now == start)


@dataclass
class RunRecord:
    """One run's record (JSON)."""

    prefix: str
    owner_pid: int
    owner_start: int | None
    namespaces: list[str] = field(default_factory=list)
    pids: list[list[int]] = field(default_factory=list)  # [pid, start time]

    @property
    def path(self) -> Path:
        return STATE_DIR / f"{self.prefix}.json"

    def save(self) -> None:
        """Write atomically (a reader never sees half a record)."""
        STATE_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)), encoding="utf-8")
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    def owner_alive(self) -> bool:
        return alive(self.owner_pid, self.owner_start)


def new_record(prefix: str, namespaces: list[str]) -> RunRecord:
    pid = os.getpid()
    rec = RunRecord(prefix, pid, process_start(pid), list(namespaces))
    rec.save()
    return rec


def remove_run(rec: RunRecord) -> list[str]:
    """End the record's processes, delete its namespaces, drop the record; return what was removed."""
    removed = []
    for pid, start in rec.pids:
        if alive(pid, start):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            removed.append(f"pid {pid}")
    names = [ns for ns in rec.namespaces if (NETNS_DIR / ns).exists()]
    if names:
        res = subprocess.run(["ip", "-force", "-batch", "-"], input="".join(f"netns del {n}\n" for n in names),
                             capture_output=True, text=True, check=False)
        if res.returncode != 0:
            log.warning("deleting namespaces of %s: %s", rec.prefix, res.stderr.strip())
        removed += [n for n in names if not (NETNS_DIR / n).exists()]
    left = [n for n in names if (NETNS_DIR / n).exists()]
    if left:
        log.warning("run %s: namespaces not removed: %s", rec.prefix, " ".join(left))
        return removed
    with contextlib.suppress(FileNotFoundError):
        rec.path.unlink()
    return removed


def reap_stale() -> list[str]:
    """Remove the leftovers of previous runs whose owner is dead, from their records only; return them."""
    removed: list[str] = []
    if not STATE_DIR.is_dir():
        return removed
    for path in sorted(STATE_DIR.glob("*.json")):
        try:
            rec = RunRecord.load(path)
        except (OSError, ValueError, TypeError) as e:
            log.warning("unreadable run record %s: %s (left alone)", path, e)
            continue
        if rec.owner_alive():
            continue
        log.info("reaping run %s (owner pid %d is gone)", rec.prefix, rec.owner_pid)
        removed += remove_run(rec)
    return removed
