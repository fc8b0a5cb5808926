"""``flowtracer diagnose``'s configuration: the sample is the defaults; a bad value or flag is exit 2 naming it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from config_samples import SAMPLES, spoiled

from flowtracer.cmd_diagnose import diagnose
from flowtracer.plumbing.component_config import load_component
from flowtracer.stream.diagnosis.config import DiagnoseSettings


def test_the_sample_is_the_models_defaults_where_it_sets_them() -> None:
    cfg = load_component(DiagnoseSettings, "diagnose", SAMPLES / "diagnose.yaml", environ={})
    assert cfg == DiagnoseSettings(topology=Path("/etc/flowtracer/fabric.yaml"), kafka="127.0.0.1:9092")
    env = {"FLOWTRACER_DIAGNOSE_GRACE_S": "2500ms", "FLOWTRACER_DIAGNOSE_INFLUX__URL": "http://influx:8086"}
    cfg = load_component(DiagnoseSettings, "diagnose", SAMPLES / "diagnose.yaml", environ=env)
    assert (cfg.grace_s, cfg.influx.url, cfg.influx.bucket) == (2.5, "http://influx:8086", "flowtracer")


def test_diagnose_names_the_file_line_and_field_or_the_flag(tmp_path: Path) -> None:
    path, n = spoiled("diagnose", "topic_wait_s: 30s", "topic_wait_s: -3", tmp_path / "d.yaml")
    r = CliRunner().invoke(diagnose, ["-c", str(path)])
    assert (r.exit_code, r.output) == (2, f"flowtracer diagnose: {path}:{n}: topic_wait_s: -3: a duration cannot "
                                          "be negative\n")
    r = CliRunner().invoke(diagnose, ["-c", str(SAMPLES / "diagnose.yaml"), "--kafka", "nowhere"])
    assert (r.exit_code, r.output) == (2, "flowtracer diagnose: --kafka: kafka: 'nowhere' is not host:port\n")
