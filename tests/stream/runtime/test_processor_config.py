"""The processor's configuration: the fetch wait's default follows the broker."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from flowtracer.stream.runtime.config import KAFKA_FETCH_WAIT_MS, TANSU_FETCH_WAIT_MS, ProcessorConfig


def test_the_fetch_wait_is_short_on_tansu_and_fausts_elsewhere_unless_set() -> None:
    cfg = {"topology": Path("fabric.yaml"), "kafka": "127.0.0.1:9092"}
    assert ProcessorConfig(**cfg).fetch_wait_ms == KAFKA_FETCH_WAIT_MS == 1_500
    assert ProcessorConfig(**cfg, tansu=True).fetch_wait_ms == TANSU_FETCH_WAIT_MS == 100
    assert ProcessorConfig(**cfg, tansu=True, fetch_wait_ms=None).fetch_wait_ms == TANSU_FETCH_WAIT_MS
    assert ProcessorConfig(**cfg, tansu=True, fetch_wait_ms=700).fetch_wait_ms == 700
    with pytest.raises(ValidationError, match="fetch_wait_ms"):
        ProcessorConfig(**cfg, fetch_wait_ms=0)


def test_the_sample_is_the_models_defaults_where_it_sets_them() -> None:
    from config_samples import SAMPLES

    from flowtracer.plumbing.component_config import load_component

    cfg = load_component(ProcessorConfig, "processor", SAMPLES / "processor.yaml", environ={})
    assert cfg == ProcessorConfig(topology=Path("/etc/flowtracer/fabric.yaml"), kafka="127.0.0.1:9092")


def test_process_names_the_file_line_and_field_or_the_flag_and_flags_win(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from config_samples import spoiled

    from flowtracer.cmd_process import process

    path, n = spoiled("processor", "kafka: 127.0.0.1:9092", "kafka: nowhere", tmp_path / "p.yaml")
    # The variable's bad hop is overridden by the flag, so only the file's bad bootstrap is left.
    r = CliRunner().invoke(process, ["-c", str(path), "--hop", "2"], env={"FLOWTRACER_PROCESSOR_HOP_S": "soon"})
    assert (r.exit_code, r.output) == (2, f"flowtracer process: {path}:{n}: kafka: 'nowhere' is not host:port\n")
    r = CliRunner().invoke(process, ["-c", str(path), "--kafka", "k:1", "--rolling-window", "2.5"])
    assert (r.exit_code, r.output) == (
        2, f"flowtracer process: {path}: processor: rolling_window_s 2.5 is not a multiple of hop_s 1.0\n")
