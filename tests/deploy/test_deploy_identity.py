"""The operators' identity tools: deploy/kafka_acls.py prints the shipped ACL plan as kafka-acls.sh commands,
deploy/host_keys.py writes each host's record key (0400, derived from the master, never printed)."""

from __future__ import annotations

import importlib.util
import shlex
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest
from deploy_helpers import DEPLOY

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.plumbing.kafka_acls import plan
from flowtracer.schemas.record_identity import host_key


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"deploy_{name}", DEPLOY / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def topology(tmp_path: Path) -> Path:
    path = tmp_path / "fabric.yaml"
    path.write_text(generate(FabricSpec(hosts=4, leaves=2, spines=2, name="id4")).to_yaml())
    return path


def test_acl_commands_are_the_plan_with_prefixed_patterns(capsys: pytest.CaptureFixture[str], topology: Path) -> None:
    acls = _module("kafka_acls")
    assert acls.main(["--bootstrap-server", "kafka:9093", "--command-config", "/etc/kafka/admin.properties"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(plan())
    argv = [shlex.split(line) for line in lines]
    assert all(a[:5] == ["kafka-acls.sh", "--bootstrap-server", "kafka:9093", "--command-config",
                         "/etc/kafka/admin.properties"] for a in argv)
    agent = [a for a in argv if "User:flowtracer-agent" in a and "Write" in a]
    assert sorted(a[a.index("--topic") + 1] for a in agent) == [
        "flowtracer.flows.v1", "flowtracer.path-traces.v1", "flowtracer.qp-ends.v1"]
    assert any("flowtracer-processor" in a and "prefixed" in a and "--group" in a for a in argv)
    assert acls.main(["--bootstrap-server", "k:9093", "--command-config", "a.properties",
                      "--agent-hosts-from", str(topology)]) == 0
    out = capsys.readouterr().out
    assert "User:flowtracer-agent-host01" in out and "User:flowtracer-agent " not in out


def test_host_keys_are_written_0400_from_the_master(tmp_path: Path, topology: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    keys = _module("host_keys")
    master = tmp_path / "master.key"
    master.write_text(("5a" * 32) + "\n")
    out = tmp_path / "keys"
    assert keys.main(["--master-file", str(master), "--topology", str(topology), "--out-dir", str(out)]) == 0
    files = sorted(out.iterdir())
    assert [f.name for f in files] == ["host01.key", "host02.key", "host03.key", "host04.key"]
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o400 for f in files)
    assert (out / "host02.key").read_text().strip() == host_key(bytes.fromhex("5a" * 32), "host02").hex()
    printed = capsys.readouterr()
    assert "5a5a" not in printed.out + printed.err
    assert keys.main(["--master-file", str(master), "--host", "host01", "--out-dir", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert keys.main(["--master-file", str(tmp_path / "none"), "--host", "h", "--out-dir", str(out)]) == 2
