"""``flowtracer collect``: bad input exits 2 with one line naming the problem; flags override config."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from flowtracer.cmd_collect import build, collect
from flowtracer.collectors.gnmi.sharding import select

TOPO = """
name: t
defaults: {port_speed: 400G, credentials: {username: u, password_env: T_COLLECT_PW}}
switches:
  - {name: leaf1, role: leaf, gnmi: {address: 127.0.0.1, port: 50001}}
  - {name: leaf2, role: leaf, gnmi: {address: 127.0.0.1, port: 50002}}
  - {name: spine1, role: spine, gnmi: {address: 127.0.0.1, port: 50003}}
links:
  - {a: "leaf1:Ethernet1", b: "spine1:Ethernet1"}
  - {a: "leaf2:Ethernet1", b: "spine1:Ethernet2"}
"""


@pytest.fixture
def topo(tmp_path: Path) -> Path:
    p = tmp_path / "topo.yaml"
    p.write_text(TOPO)
    return p


@pytest.mark.parametrize(("args", "config", "message"), [
    (["--shard", "2/2"], None, "--shard: '2/2': need N >= 1 and 0 <= i < N"),
    ([], "gnmi:\n  sample: 1s\n", "cfg.yaml:2: gnmi.sample: unknown field 'sample'"),
    ([], None, "credentials.password_env: environment variable T_COLLECT_PW is not set"),
    (["--topology", "/nonexistent.yaml"], None, "/nonexistent.yaml: no such file"),
])
def test_bad_input_exits_2_with_one_line(topo: Path, tmp_path: Path, args: list[str], config: str | None,
                                         message: str) -> None:
    argv = ["--topology", str(topo), *args]
    if config is not None:
        (tmp_path / "cfg.yaml").write_text(config)
        argv += ["--config", str(tmp_path / "cfg.yaml")]
    r = CliRunner().invoke(collect, argv)
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output


def test_no_targets(tmp_path: Path) -> None:
    r = CliRunner().invoke(collect, [])
    assert r.exit_code == 2 and "no targets" in r.output


def test_flags_override_config(topo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_COLLECT_PW", "pw")
    svc = build(topo, None, "127.0.0.1:1", "1/2", 0, "cid", False)
    try:
        assert svc.cfg.kafka.bootstrap == "127.0.0.1:1" and svc.cfg.kafka.idempotence is False
        assert (svc.cfg.shard.index, svc.cfg.shard.count, svc.cfg.collector_id) == (1, 2, "cid")
        assert {t.name for t in svc.all_targets} == {"leaf1", "leaf2", "spine1"}
        assert svc.targets == select(svc.all_targets, 1, 2)
    finally:
        svc.sink.close(0.1)
