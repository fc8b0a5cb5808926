"""The agent's configuration model: the shipped sample loads, bad values name their field."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from flowtracer.collectors.agent.config import ConfigError, load_config
from flowtracer.plumbing.component_config import Override

SAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "config" / "agent.yaml"


def flags(**values: object) -> list[Override]:
    return [Override((k,), v, f"--{k}") for k, v in values.items()]


def test_sample_config_loads() -> None:
    cfg = load_config(SAMPLE)
    assert cfg.source == "linux" and cfg.interval == timedelta(seconds=1) and cfg.interval_ns == 1_000_000_000
    assert cfg.rdma_command == ["rdma"] and cfg.initial_psn is None and cfg.frame_overhead_bytes == 62


def test_overrides_and_durations() -> None:
    cfg = load_config(SAMPLE, flags(interval="250ms", kafka="127.0.0.1:1", source="sim"))
    assert cfg.interval_ns == 250_000_000 and cfg.kafka == "127.0.0.1:1"


@pytest.mark.parametrize(("bad", "where"), [
    ({"interval": "3s7"}, "interval: '3s7' is not a duration"),
    ({"interval": "300ms"}, "interval: must divide a second"),
    ({"dscp": 64}, "dscp:"),
    ({"rdma_command": []}, "rdma_command: must name a program"),
    ({"colour": "blue"}, "colour: unknown field 'colour'"),
    ({"tracing": {"probe_form": "bth"}}, "tracing.probe_form: .*must be roce or udp, not 'bth'"),
])
def test_bad_values_name_the_field(bad: dict[str, object], where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        load_config(None, flags(**bad))


def test_unreadable_or_wrong_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(tmp_path / "list.yaml")


def test_agent_names_the_samples_bad_value_and_a_bad_variable(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from config_samples import spoiled

    from flowtracer.cmd_agent import agent

    path, n = spoiled("agent", "dscp: 0", "dscp: 64", tmp_path / "a.yaml")
    r = CliRunner().invoke(agent, ["-c", str(path)])
    assert (r.exit_code, r.output) == (2, f"flowtracer agent: {path}:{n}: dscp: Input should be less than or equal "
                                          "to 63\n")
    # The variable mends the file's dscp and the flag the variable's interval: the configuration is valid, and
    # the agent gets as far as its next check.
    r = CliRunner().invoke(agent, ["-c", str(path), "--interval", "2s", "--source", "sim"],
                           env={"FLOWTRACER_AGENT_DSCP": "8", "FLOWTRACER_AGENT_INTERVAL": "3s7"})
    assert (r.exit_code, r.output) == (
        2, "flowtracer agent: source sim needs --topology (the simulated fabric's topology file)\n")


def test_the_rdma_command_is_split_as_a_shell_would(tmp_path: Path) -> None:
    cfg = load_config(None, flags(rdma_command="nsenter -t 1 -n rdma"), environ={
        "FLOWTRACER_AGENT_ETHTOOL_COMMAND": "[nsenter, -t, '1', ethtool]"})
    assert cfg.rdma_command == ["nsenter", "-t", "1", "-n", "rdma"]
    assert cfg.ethtool_command == ["nsenter", "-t", "1", "ethtool"]
