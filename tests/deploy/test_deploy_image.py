"""deploy/Dockerfile and .dockerignore: pinned bases, every COPY source inside the build context and
not ignored, every installed package copied, and the helper commands the deployments run installed."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import tomllib
from pathlib import Path

import yaml
from deploy_helpers import DEPLOY, ROOT

DOCKERFILE = (DEPLOY / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def _ignored(rel: str) -> bool:
    """Docker's .dockerignore semantics for the patterns used here: last match wins, ! re-includes."""
    ignored = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        pat = raw.strip()
        if not pat or pat.startswith("#"):
            continue
        neg = pat.startswith("!")
        pat = pat.lstrip("!").rstrip("/")
        if pat == "**" or fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(rel, pat + "/*") \
                or (pat.startswith("**/") and (fnmatch.fnmatch(rel, pat[3:]) or fnmatch.fnmatch(rel, pat))):
            ignored = not neg
    return ignored


def test_base_images_are_pinned() -> None:
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE, re.M))
    for op, rest in _instructions():
        if op == "FROM":
            image = rest.split()[0]
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
            assert re.fullmatch(r"[a-z0-9./-]+:\d+\.\d+\.\d+[-\w.]*", image), f"FROM {image} is not pinned"


def _tracked(src: str) -> list[str]:
    """The committed files at ``src`` (a file or folder), relative to the repository."""
    out = subprocess.run(["git", "ls-files", "--", src], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.split()


def test_copy_sources_exist_and_are_in_the_build_context() -> None:
    copied = set()
    for op, rest in _instructions():
        if op != "COPY" or "--from=" in rest:
            continue
        parts = [p for p in rest.split() if not p.startswith("--")]
        for src in parts[:-1]:
            assert (ROOT / src).exists(), f"COPY {src}: no such file"
            files = _tracked(src)
            assert files, f"COPY {src}: nothing committed there"
            for f in files:
                assert not _ignored(f), f"COPY {src}: {f} is .dockerignored"
            copied.add(src.rstrip("/"))
    package_dirs = set(PYPROJECT["tool"]["setuptools"]["package-dir"].values())
    assert package_dirs <= copied, f"the wheel needs {sorted(package_dirs - copied)}"
    assert {"pyproject.toml", "setup.py", "README.md"} <= copied  # setup.py: the compiled extension
    assert _ignored(".venv/bin/python") and _ignored("tests/conftest.py") and _ignored(".git/HEAD")
    # What a local editable install builds in the tree stays out: the image compiles its own.
    assert _ignored("collectors/gnmi/counters/native.cpython-311-x86_64-linux-gnu.so") and _ignored("collectors/gnmi/counters/native.c")


def test_the_helper_commands_the_deployments_run_are_installed() -> None:
    installed = {Path(rest.split()[-1]).name for op, rest in _instructions() if op == "COPY" and "/usr/local/bin/" in rest}
    installed.add("flowtracer")
    used: set[str] = set()
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    for svc in compose["services"].values():
        if svc["image"].startswith("flowtracer:"):
            argv = svc.get("entrypoint") or ["flowtracer"]
            used.add(argv[0] if argv[0] != "sh" else "flowtracer")
    for path in (DEPLOY / "k8s").glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            text = json.dumps(doc)
            used |= set(re.findall(r'"command": \["([\w-]+)"', text))
    assert used <= installed, f"not installed in the image: {sorted(used - installed)}"
    assert {"flowtracer-metrics-relay", "flowtracer-create-topics"} <= used


def test_the_image_runs_unprivileged_with_the_rdma_tool() -> None:
    users = [rest for op, rest in _instructions() if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert "iproute2" in DOCKERFILE, "the agent's linux source runs `rdma` (iproute2)"
