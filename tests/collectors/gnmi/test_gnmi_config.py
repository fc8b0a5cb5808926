"""Collector configuration: the sample loads and equals the defaults, bad values name field and
line, secrets come from env/files and never show in reprs, topology targets merge with YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.collectors.gnmi.config import (
    CollectorConfig,
    ConfigError,
    Credentials,
    Mode,
    TargetMode,
    load_config,
    parse_config,
    parse_duration,
    resolve_targets,
)
from flowtracer.fabric.topology import parse_topology

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "deploy" / "config" / "collector.yaml"

TOPO = """
name: t
defaults: {port_speed: 400G}
switches:
  - {name: leaf1, role: leaf, gnmi: {address: 127.0.0.1, port: 50001}}
  - {name: leaf2, role: leaf, gnmi: {address: 127.0.0.1, port: 50002, tls: {enabled: true, skip_verify: true}}}
  - {name: spine1, role: spine}
links:
  - {a: "leaf1:Ethernet1", b: "spine1:Ethernet1"}
  - {a: "leaf2:Ethernet1", b: "spine1:Ethernet2"}
"""


def test_sample_config_loads_and_matches_the_defaults() -> None:
    cfg = load_config(SAMPLE)
    d = CollectorConfig()
    assert (cfg.kafka, cfg.gnmi, cfg.shard, cfg.metrics, cfg.targets) == (d.kafka, d.gnmi, d.shard, d.metrics, ())


def test_defaults_cover_interfaces_and_both_next_hop_trees() -> None:
    subs = {s.name: s for s in CollectorConfig().gnmi.subscriptions}
    assert subs["interface-counters"].mode is Mode.SAMPLE and subs["interface-counters"].sample_interval == 1.0
    assert "/afts/next-hops/next-hop[index=*]/state/counters" in subs["next-hop-counters"].path
    assert "/afts/counters/next-hops/" in subs["aft-counters"].path
    assert subs["oper-status"].mode is Mode.ON_CHANGE
    assert CollectorConfig().gnmi.liveness_s() == 3.0


@pytest.mark.parametrize(("text", "message"), [
    ("gnmi:\n  subscriptions:\n    - name: a\n      path: /x\n      sample_interval: fast\n",
     "<config>:5: gnmi.subscriptions[0].sample_interval: 'fast' is not a duration"),
    ("gnmi:\n  encodng: proto\n", "<config>:2: gnmi.encodng: unknown field 'encodng'"),
    ("gnmi:\n  encoding: xml\n", "<config>:2: gnmi.encoding: 'xml' is not one of: 'proto', 'json_ietf' or 'json'"),
    ("gnmi:\n  subscriptions:\n    - name: a\n      path: /x[k=1\n", "<config>:4: gnmi.subscriptions[0].path: unbalanced"),
    ("shard: {index: 2, count: 2}\n", "shard.count: shard index 2 is not below the shard count 2"),
    ("targets:\n  - {name: x, port: 99999}\n", "<config>:2: targets[0].port: Input should be less than or equal to 65535"),
    ("credentials: {username: u, password: hunter2}\n", "credentials: passwords are not accepted inline; use password_env or password_file"),
    ("kafka: [1]\n", "kafka: Input should be a valid dictionary"),
    ("gnmi: {a: [}\n", "<config>:1: YAML syntax error"),
])
def test_bad_config_names_the_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(text)
    assert message in str(e.value)
    assert "hunter2" not in str(e.value)


def test_durations() -> None:
    assert [parse_duration(v) for v in ("250ms", "1s", "2m", 1.5, "500us")] == [0.25, 1.0, 120.0, 1.5, 5e-4]


def test_passwords_from_env_and_file_are_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_GNMI_PW", "s3cret-env")
    user, pw = Credentials(username="u", password_env="T_GNMI_PW").resolve()  # type: ignore[misc]
    assert (user, pw.get_secret_value()) == ("u", "s3cret-env")
    assert "s3cret" not in repr(pw) and "s3cret" not in str(pw)
    f = tmp_path / "pw"
    f.write_text("s3cret-file\n")
    assert Credentials(username="u", password_file=f).resolve()[1].get_secret_value() == "s3cret-file"  # type: ignore[index]
    with pytest.raises(ConfigError, match="environment variable T_GNMI_MISSING is not set"):
        Credentials(username="u", password_env="T_GNMI_MISSING").resolve()
    assert Credentials().resolve() is None


def test_targets_from_topology_with_overrides() -> None:
    topo = parse_topology(TOPO)
    cfg = parse_config("targets:\n  - {name: leaf1, counter_bits: 32}\n  - {name: lab, address: 192.0.2.1}\n")
    targets = {t.name: t for t in resolve_targets(cfg, topo)}
    assert sorted(targets) == ["lab", "leaf1", "leaf2"]  # spine1 has no gnmi endpoint
    assert (targets["leaf1"].port, targets["leaf1"].counter_bits) == (50001, 32)
    assert targets["leaf2"].tls.enabled and targets["leaf2"].tls.skip_verify
    assert targets["lab"].port == 57400
    with pytest.raises(ConfigError, match="targets\\[0\\]: 'nope' is not a topology switch"):
        resolve_targets(parse_config("targets: [{name: nope}]"), topo)
    with pytest.raises(ConfigError, match="counter_bits"):
        resolve_targets(parse_config("targets: [{name: leaf1, counter_bits: 16}]"), topo)


def test_target_modes_and_intervals() -> None:
    topo = parse_topology(TOPO)
    cfg = parse_config("targets:\n  - {name: leaf1, mode: POLL, interval: 500ms}\n"
                       "  - {name: lab, address: 192.0.2.1, mode: get, interval: 2s}\n")
    targets = {t.name: t for t in resolve_targets(cfg, topo)}
    assert (targets["leaf1"].mode, targets["leaf1"].interval_ns, targets["leaf1"].polled) == (
        TargetMode.POLL, 500_000_000, True)
    assert (targets["lab"].mode, targets["lab"].interval) == (TargetMode.GET, 2.0)
    assert targets["leaf2"].mode is TargetMode.STREAM and not targets["leaf2"].polled
    for text, message in [
        ("targets: [{name: leaf1, mode: once, interval: 0s}]",
         "targets[0] (leaf1).interval: mode once needs an interval > 0"),
        ("targets: [{name: lab, address: 192.0.2.1, mode: poll, interval: 0}]",
         "targets[0] (lab).interval: mode poll needs an interval > 0"),
    ]:
        with pytest.raises(ConfigError) as e:
            resolve_targets(parse_config(text), topo)
        assert str(e.value) == message
    with pytest.raises(ConfigError) as e:
        parse_config("targets:\n  - {name: leaf1, mode: sample}\n")
    assert "\n" not in str(e.value) and "targets[0].mode" in str(e.value) and ":2:" in str(e.value)
