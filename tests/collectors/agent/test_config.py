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
