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
    (["--shard", "2/2"], None, "--shard: shard: '2/2': need N >= 1 and 0 <= i < N"),
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


def test_credentials_over_plaintext_are_refused(topo: Path) -> None:
    r = CliRunner().invoke(collect, ["--topology", str(topo)], env={"T_COLLECT_PW": "pw"})
    assert r.exit_code == 2, r.output
    assert ("target leaf1: credentials would cross the network in clear (tls.enabled is false); enable TLS, or set "
            "gnmi.allow_insecure_credentials: true in a lab") in r.output
    assert "Traceback" not in r.output and "pw" not in r.output.replace("password", "")


def test_no_targets(tmp_path: Path) -> None:
    r = CliRunner().invoke(collect, [])
    assert r.exit_code == 2 and "no targets" in r.output


def test_plaintext_credentials_when_allowed_and_skip_verify_are_warned_once_per_target(
        topo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("T_COLLECT_PW", "pw")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("gnmi: {allow_insecure_credentials: true}\ntargets:\n"
                   "  - {name: spine1, tls: {enabled: true, skip_verify: true}}\n")
    svc = build(topo, cfg, "127.0.0.1:1", None, 0, "cid", None)
    try:
        text = caplog.text
        assert text.count("username/password sent over plaintext gRPC") == 2  # leaf1, leaf2
        assert text.count("tls.skip_verify") == 1 and "target spine1" in text
        assert "pw" not in text.replace("password", "")
    finally:
        svc.sink.close(0.1)


def test_flags_override_config(topo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_COLLECT_PW", "pw")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("gnmi: {allow_insecure_credentials: true}\n")
    svc = build(topo, cfg, "127.0.0.1:1", "1/2", 0, "cid", False)
    try:
        assert svc.cfg.kafka.bootstrap == "127.0.0.1:1" and svc.cfg.kafka.idempotence is False
        assert (svc.cfg.shard.index, svc.cfg.shard.count, svc.cfg.collector_id) == (1, 2, "cid")
        assert {t.name for t in svc.all_targets} == {"leaf1", "leaf2", "spine1"}
        assert svc.targets == select(svc.all_targets, 1, 2)
    finally:
        svc.sink.close(0.1)


def test_the_sample_names_its_bad_value_and_the_environment_sits_between_file_and_flags(tmp_path: Path) -> None:
    from config_samples import spoiled

    path, n = spoiled("collector", "  connect_timeout: 10s", "  connect_timeout: forever", tmp_path / "c.yaml")
    r = CliRunner().invoke(collect, ["--config", str(path)])
    assert (r.exit_code, r.output) == (
        2, f"flowtracer collect: {path}:{n}: gnmi.connect_timeout: 'forever' is not a duration (e.g. 250ms, 1s, 2m)\n")
    # A shard from the environment is checked as the flag's is, and named by its variable; the flag wins over it.
    r = CliRunner().invoke(collect, ["--config", str(path)], env={"FLOWTRACER_COLLECTOR_GNMI__CONNECT_TIMEOUT": "5s",
                                                                  "FLOWTRACER_COLLECTOR_SHARD": "3/2"})
    assert (r.exit_code, r.output) == (
        2, "flowtracer collect: FLOWTRACER_COLLECTOR_SHARD: shard: '3/2': need N >= 1 and 0 <= i < N\n")
    r = CliRunner().invoke(collect, ["--config", str(path), "--shard", "1/2", "--topology", str(tmp_path / "no.yaml")],
                           env={"FLOWTRACER_COLLECTOR_GNMI__CONNECT_TIMEOUT": "5s", "FLOWTRACER_COLLECTOR_SHARD": "3/2"})
    assert (r.exit_code, r.output) == (2, f"flowtracer collect: {tmp_path / 'no.yaml'}: no such file\n")
