"""``--kafka-config``: every Kafka client command refuses bad Kafka security settings with one line and exit 2,
before any connection; secrets are named by variable or file, never printed."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from flowtracer.cmd_agent import agent
from flowtracer.cmd_collect import collect
from flowtracer.cmd_export import export
from flowtracer.cmd_process import process

BAD = {
    "missing CA": ("security_protocol: SSL\nca_file: /nonexistent/ca.pem\n", "kafka ca_file: cannot read /nonexistent/ca.pem"),
    "missing password": ("security_protocol: SASL_SSL\nsasl_mechanism: SCRAM-SHA-256\nusername: u\n",
                         "environment variable FLOWTRACER_KAFKA_PASSWORD is not set"),
    "inline password": ("security_protocol: SASL_SSL\nsasl_mechanism: PLAIN\nusername: u\npassword: hunter2\n",
                        "passwords are not accepted inline"),
    "no mechanism": ("security_protocol: SASL_PLAINTEXT\nusername: u\n", "needs sasl_mechanism"),
}


def _argv(command: click.Command, tmp: Path) -> list[str]:
    topo = tmp / "topo.yaml"
    topo.write_text("name: t\nswitches: []\nlinks: []\n")
    return {
        "collect": ["--topology", str(topo)],
        "agent": ["--source", "sim", "--kafka", "127.0.0.1:1"],
        "process": ["--topology", str(topo), "--kafka", "127.0.0.1:1"],
        "export": ["--kafka", "127.0.0.1:1"],
    }[command.name or ""]


@pytest.mark.parametrize("command", [collect, agent, process, export], ids=lambda c: c.name)
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_kafka_settings_exit_2_in_one_line(command: click.Command, case: str, tmp_path: Path) -> None:
    text, message = BAD[case]
    cfg = tmp_path / "kafka.yaml"
    cfg.write_text(text)
    env = {"FLOWTRACER_KAFKA_PASSWORD": None, "FLOWTRACER_KAFKA_CONFIG": None}
    r = CliRunner().invoke(command, [*_argv(command, tmp_path), "--kafka-config", str(cfg)], env=env)
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert "hunter2" not in r.output


def test_fields_come_from_the_environment_too(tmp_path: Path) -> None:
    r = CliRunner().invoke(export, ["--kafka", "127.0.0.1:1"],
                           env={"FLOWTRACER_KAFKA_SECURITY_PROTOCOL": "SSL", "FLOWTRACER_KAFKA_CA_FILE": "/nope/ca.pem",
                                "FLOWTRACER_KAFKA_CONFIG": None})
    assert r.exit_code == 2 and "kafka ca_file: cannot read /nope/ca.pem" in r.output, r.output
