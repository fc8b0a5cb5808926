"""The agent's configuration model: the shipped sample loads, bad values name their field."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from flowtracer.collectors.agent import config as config_mod
from flowtracer.collectors.agent.config import ConfigError, load_config

SAMPLE = Path(config_mod.__file__).with_name("agent.sample.yaml")


def test_sample_config_loads() -> None:
    cfg = load_config(SAMPLE)
    assert cfg.source == "linux" and cfg.interval == timedelta(seconds=1) and cfg.interval_ns == 1_000_000_000
    assert cfg.rdma_command == ["rdma"] and cfg.initial_psn is None and cfg.frame_overhead_bytes == 62


def test_overrides_and_durations() -> None:
    cfg = load_config(SAMPLE, interval="250ms", kafka="127.0.0.1:1", source="sim")
    assert cfg.interval_ns == 250_000_000 and cfg.kafka == "127.0.0.1:1"


@pytest.mark.parametrize(("bad", "where"), [
    ({"interval": "3s7"}, "interval: '3s7' is not a duration"),
    ({"interval": "300ms"}, "interval: must divide a second"),
    ({"dscp": 64}, "dscp:"),
    ({"rdma_command": []}, "rdma_command: must name a program"),
    ({"colour": "blue"}, "colour: unknown setting"),
    ({"tracing": {"probe_form": "bth"}}, "tracing.probe_form: .*must be roce or udp, not 'bth'"),
])
def test_bad_values_name_the_field(bad: dict[str, object], where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        load_config(None, **bad)


def test_unreadable_or_wrong_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(tmp_path / "list.yaml")
