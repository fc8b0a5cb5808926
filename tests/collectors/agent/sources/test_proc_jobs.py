"""Job ids from /proc: the pure cgroup/environ parsers, and the cached reader over a proc-like tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.collectors.agent.sources.proc_jobs import ProcJobs, job_from_cgroup, job_from_environ

POD = "0f6f8a2e-3c1b-4d5e-9a7b-123456789abc"


@pytest.mark.parametrize(("text", "job"), [
    ("0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0\n", "1234"),
    ("0::/system.slice/node07_slurmstepd.scope/job_88/step_batch/user/task_0\n", "88"),  # multiple slurmd
    ("0::/system.slice/slurmstepd.scope/job_77\n", "77"),  # the job's own cgroup (no step yet)
    ("12:pids:/user.slice\n4:memory:/slurm/uid_1000/job_1234/step_0/task_0\n1:name=systemd:/user.slice\n", "1234"),
    ("4:freezer:/slurm_node07/uid_0/job_5/step_extern\n", "5"),
    (f"0::/kubepods/burstable/pod{POD}/0123abcd\n", f"k8s:pod{POD}"),
    (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD.replace('-', '_')}.slice/"
     "cri-containerd-0123.scope\n", f"k8s:pod{POD}"),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", None),  # an interactive login: no job
    ("0::/system.slice/cron.service/job_12\n", None),  # a job_ directory not under Slurm's is not a Slurm job
    ("", None),
    ("garbage without colons\n", None),
])
def test_job_from_cgroup(text: str, job: str | None) -> None:
    assert job_from_cgroup(text) == job


def test_slurm_wins_over_a_pod_on_another_line() -> None:
    assert job_from_cgroup(f"5:cpu:/kubepods/pod{POD}/x\n0::/system.slice/slurmstepd.scope/job_9/step_0\n") == "9"


@pytest.mark.parametrize(("data", "job"), [
    (b"PATH=/bin\0SLURM_JOB_ID=4711\0SLURM_STEP_ID=0\0", "4711"),
    (b"SLURM_JOB_ID=4711", "4711"),
    (b"SLURM_JOB_IDX=1\0HOME=/root\0", None),
    (b"SLURM_JOB_ID=\0", None),
    (b"", None),
])
def test_job_from_environ(data: bytes, job: str | None) -> None:
    assert job_from_environ(data) == job


def _proc(root: Path, pid: int, cgroup: str | None = None, environ: bytes | None = None) -> None:
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    if cgroup is not None:
        (d / "cgroup").write_text(cgroup)
    if environ is not None:
        (d / "environ").write_bytes(environ)


def test_reader_prefers_cgroup_falls_back_to_environ_and_caches_per_pid(tmp_path: Path) -> None:
    _proc(tmp_path, 100, "0::/system.slice/slurmstepd.scope/job_1/step_0/user/task_0\n", b"SLURM_JOB_ID=2\0")
    _proc(tmp_path, 200, "0::/user.slice\n", b"SLURM_JOB_ID=3\0")
    _proc(tmp_path, 300, "0::/user.slice\n")  # no job anywhere; 400 does not exist
    r = ProcJobs(tmp_path)
    assert r.jobs([100, 200, 300, 400, 0]) == {100: "1", 200: "3"}
    assert r.reads == 4  # pid 0 (kernel QPs) is never looked up
    (tmp_path / "100" / "cgroup").write_text("0::/system.slice/slurmstepd.scope/job_9/step_0\n")
    assert r.jobs([100, 200, 300, 400]) == {100: "1", 200: "3"} and r.reads == 4  # cached, no re-read


def test_reader_forgets_pids_gone_from_the_listing(tmp_path: Path) -> None:
    _proc(tmp_path, 100, "0::/system.slice/slurmstepd.scope/job_1/step_0\n")
    r = ProcJobs(tmp_path)
    assert r.jobs([100]) == {100: "1"}
    assert r.jobs([]) == {}
    (tmp_path / "100" / "cgroup").write_text("0::/system.slice/slurmstepd.scope/job_2/step_0\n")  # pid reused
    assert r.jobs([100]) == {100: "2"} and r.reads == 2


def test_reader_on_a_missing_root_names_no_job(tmp_path: Path) -> None:
    assert ProcJobs(tmp_path / "nowhere").jobs([1, 2]) == {}
