"""Which scheduler job a process belongs to, from what Linux shows under ``/proc/<pid>`` (docs/agent.md, Jobs).

Sources, first that answers wins:

* ``/proc/<pid>/cgroup``: the Slurm cgroup plugins put every task of a job under a ``job_<id>`` directory:
  cgroup v2 ``0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0`` (the scope may be
  ``<node>_slurmstepd.scope``), cgroup v1 ``4:memory:/slurm/uid_1000/job_1234/step_0/task_0`` (the root may be
  ``slurm_<node>``) (https://slurm.schedmd.com/cgroup_v2.html, https://slurm.schedmd.com/cgroups.html). A
  Kubernetes pod's containers sit under ``pod<uid>`` (cgroupfs driver: ``/kubepods/burstable/pod<uid>/<id>``,
  systemd driver: ``kubepods-burstable-pod<uid with _ for ->.slice``): the job is ``k8s:pod<uid>``.
* ``/proc/<pid>/environ`` (NUL-separated; readable by root or the process's owner): ``SLURM_JOB_ID``.
* Otherwise the caller's fallback (the agent's configured ``job_id``).

``job_from_cgroup`` and ``job_from_environ`` are pure; ``ProcJobs`` reads and caches per pid (a process does
not change job) and forgets the pids that left the QP listing, so a reused pid is read again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

_SLURM_JOB = re.compile(r"/job_([^/\s]+)(?:/|$)")
_K8S_POD = re.compile(r"pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})"
                      r"(?:\.slice)?(?:/|$)")
_MAX_READ = 1 << 16  # bytes read of one /proc file (an environ can be large; the variable is usually early)


def job_from_cgroup(text: str) -> str | None:
    """The job id a ``/proc/<pid>/cgroup`` names (``hierarchy:controllers:path`` per line), or None.

    A Slurm ``job_<id>`` directory counts only below a directory whose name contains ``slurm`` (so an
    unrelated ``job_x`` cgroup is not taken for a job); a Kubernetes ``pod<uid>`` gives ``k8s:pod<uid>``.
    """
    pod = None
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        m = _SLURM_JOB.search(path)
        if m is not None and "slurm" in path[:m.start()]:
            return m.group(1)
        if pod is None and (k := _K8S_POD.search(path)) is not None:
            pod = "k8s:pod" + k.group(1).replace("_", "-").lower()
    return pod


def job_from_environ(data: bytes) -> str | None:
    """``SLURM_JOB_ID`` of a ``/proc/<pid>/environ`` (NUL-separated ``NAME=value``), or None."""
    for entry in data.split(b"\0"):
        if entry.startswith(b"SLURM_JOB_ID="):
            value = entry[len(b"SLURM_JOB_ID="):].decode("utf-8", "replace").strip()
            return value or None
    return None


def _read(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(_MAX_READ)
    except OSError:  # gone, or not ours to read (environ of another user's process without root)
        return None


class ProcJobs:
    """Job id per pid from ``<root>/<pid>/cgroup`` and ``<root>/<pid>/environ``, cached per pid.

    ``root``: ``/proc`` on a host, the host's mounted proc in a container (``proc_root``), or the simulator's
    ``<host view>/proc``. ``reads`` counts the pids looked up (each at most once while it has QPs)."""

    def __init__(self, root: Path = Path("/proc")) -> None:
        self.root = Path(root)
        self._jobs: dict[int, str | None] = {}
        self.reads = 0

    def job(self, pid: int) -> str | None:
        """The job of ``pid`` (None: no source names one, or pid 0 = a kernel QP)."""
        if pid <= 0:
            return None
        if pid in self._jobs:
            return self._jobs[pid]
        self.reads += 1
        base = self.root / str(pid)
        cg = _read(base / "cgroup")
        job = job_from_cgroup(cg.decode("utf-8", "replace")) if cg is not None else None
        if job is None and (env := _read(base / "environ")) is not None:
            job = job_from_environ(env)
        self._jobs[pid] = job
        return job

    def jobs(self, pids: Iterable[int]) -> dict[int, str]:
        """The job of each of ``pids`` that has one; forgets the cached pids not among them (they left the
        QP listing: a later process reusing the number is read afresh)."""
        live = set(pids)
        for gone in [p for p in self._jobs if p not in live]:
            del self._jobs[gone]
        return {p: j for p in live if (j := self.job(p)) is not None}
