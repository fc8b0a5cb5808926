"""deploy/k8s: every stage runs as a user of its own, and each can read the Secrets mounted for it.

Kubernetes mounts a Secret volume's files with the volume's ``defaultMode`` (0440 here) and, when the pod sets
``fsGroup``, gives them that group and adds the group to the container's user; without ``fsGroup`` they stay
root:root and a non-root user cannot read them (the agent could not use SASL). The manifests are checked
statically, and the kernel's permission check is exercised for real: files laid out as the kubelet lays them out,
read as the agent's user (setpriv), which is what the pod does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_deploy_k8s import DOCS_K8S, POD_KINDS

STAGES = {"flowtracer-collector": "StatefulSet", "flowtracer-agent": "DaemonSet",
          "flowtracer-processor": "Deployment", "flowtracer-diagnose": "Deployment"}
"""The pods of the four stages, by name, and their kinds."""


def pod(name: str) -> dict[str, Any]:
    """The pod spec of the stage *name*."""
    docs = [d for _, d in DOCS_K8S if d["kind"] == STAGES[name] and d["metadata"]["name"] == name]
    assert len(docs) == 1, name
    return docs[0]["spec"]["template"]["spec"]


def secret_volumes(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod's Secret volumes."""
    return [v for v in spec.get("volumes", []) if "secret" in v]


def test_every_stage_has_a_uid_and_group_of_its_own() -> None:
    pods = [d for _, d in DOCS_K8S if d["kind"] in POD_KINDS]
    assert {d["metadata"]["name"] for d in pods} == set(STAGES), "a new pod: give it a user and add it here"
    users = {name: pod(name)["securityContext"] for name in STAGES}
    assert len({sc["runAsUser"] for sc in users.values()}) == len(STAGES), users
    assert len({sc["runAsGroup"] for sc in users.values()}) == len(STAGES), users
    for name, sc in users.items():
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] >= 10000, name
        assert sc["fsGroup"] == sc["runAsGroup"], f"{name}: its Secret files must belong to its own group"


def test_secret_volumes_are_group_readable_and_private() -> None:
    for name in STAGES:
        spec = pod(name)
        for v in secret_volumes(spec):
            mode = v["secret"]["defaultMode"]
            where = f"{name}: volume {v['name']}"
            assert mode & 0o040, f"{where}: mode {mode:o} is not group-readable, the stage's user cannot read it"
            assert not mode & 0o007, f"{where}: mode {mode:o} lets every user read it"
            assert not mode & 0o222, f"{where}: mode {mode:o}: a Secret is read, never written"
            assert "fsGroup" in spec["securityContext"], f"{where}: without fsGroup its files are root's"
    assert secret_volumes(pod("flowtracer-agent")), "the agent mounts the Kafka Secret (SASL password, CA)"


@pytest.fixture
def secret_dir() -> Iterator[Path]:
    """A directory that users other than root can reach (pytest's own is 0700), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("laying out files for another user and running as that user needs root")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run a command as the stage's user")
    top = Path(tempfile.mkdtemp(prefix="flowtracer-secret-"))
    try:
        top.chmod(0o755)
        yield top
    finally:
        shutil.rmtree(top)


def mount(top: Path, spec: dict[str, Any], volume: str, files: dict[str, str]) -> Path:
    """Lay out a Secret volume as the kubelet does for *spec*: files of ``defaultMode``, the volume's
    directory and files of group ``fsGroup`` (root's when the pod sets none)."""
    v = next(v for v in secret_volumes(spec) if v["name"] == volume)
    group = spec["securityContext"].get("fsGroup", 0)
    d = top / volume
    d.mkdir()
    os.chown(d, 0, group)
    d.chmod(0o750)
    for name, text in files.items():
        f = d / name
        f.write_text(text)
        os.chown(f, 0, group)
        f.chmod(v["secret"]["defaultMode"])
    return d


def read_as(spec: dict[str, Any], path: Path) -> subprocess.CompletedProcess[str]:
    """``cat path`` as the pod's user: its uid, its group and, as the kubelet adds it, ``fsGroup``."""
    sc = spec["securityContext"]
    groups = str(sc["fsGroup"]) if "fsGroup" in sc else None
    cmd = ["setpriv", f"--reuid={sc['runAsUser']}", f"--regid={sc['runAsGroup']}",
           f"--groups={groups}" if groups else "--clear-groups", "cat", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)


def test_the_agent_reads_its_mounted_kafka_secrets_as_its_own_user(secret_dir: Path) -> None:
    agent = pod("flowtracer-agent")
    d = mount(secret_dir, agent, "kafka", {"password": "s3cret\n", "ca.crt": "-----BEGIN CERTIFICATE-----\n"})
    for name, text in (("password", "s3cret\n"), ("ca.crt", "-----BEGIN CERTIFICATE-----\n")):
        got = read_as(agent, d / name)
        assert got.returncode == 0, f"the agent's user cannot read {name}: {got.stderr.strip()}"
        assert got.stdout == text


def test_without_fsgroup_the_agent_could_not_read_them(secret_dir: Path) -> None:
    """The counterfactual: the same pod without ``fsGroup`` (the shipped agent before) is refused."""
    agent = pod("flowtracer-agent")
    before = {**agent, "securityContext": {k: v for k, v in agent["securityContext"].items() if k != "fsGroup"}}
    d = mount(secret_dir, before, "kafka", {"password": "s3cret\n"})
    got = read_as(before, d / "password")
    assert got.returncode != 0 and "Permission denied" in got.stderr


def test_another_stage_cannot_read_the_agents_secrets(secret_dir: Path) -> None:
    d = mount(secret_dir, pod("flowtracer-agent"), "kafka", {"password": "s3cret\n"})
    for name in STAGES:
        if name != "flowtracer-agent":
            got = read_as(pod(name), d / "password")
            assert got.returncode != 0, f"{name} reads the agent's password"
