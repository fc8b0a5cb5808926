"""The record-identity key options (``flowtracer process --host-key-master-file``, ``flowtracer agent
--host-key-file``): a bad key file is one line and exit 2, naming the option and file, never the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from flowtracer.cmd_agent import agent
from flowtracer.cmd_process import process

ENV = {"FLOWTRACER_KAFKA_CONFIG": None, "FLOWTRACER_HOST_KEY_MASTER_FILE": None, "FLOWTRACER_HOST_KEY_FILE": None}


@pytest.mark.parametrize(("text", "message"), [
    (None, "host_key_master_file: cannot read"),
    ("ab" * 16, "holds 16 bytes, at least 32 are needed"),
    ("secret-" + "cd" * 40, "is not hex text"),
])
def test_the_processor_refuses_a_bad_master_key_in_one_line(tmp_path: Path, text: str | None, message: str) -> None:
    topo = tmp_path / "topo.yaml"
    topo.write_text("name: t\nswitches: []\nlinks: []\n")
    key = tmp_path / "master.key"
    if text is not None:
        key.write_text(text)
    r = CliRunner().invoke(process, ["--topology", str(topo), "--kafka", "127.0.0.1:1"], env={
        **ENV, "FLOWTRACER_HOST_KEY_MASTER_FILE": str(key)})
    assert r.exit_code == 2, r.output
    assert message in r.output and str(key) in r.output and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert "cdcd" not in r.output


def test_a_sim_agent_cannot_sign_as_one_host(tmp_path: Path) -> None:
    key = tmp_path / "host.key"
    key.write_text("ef" * 32)
    topo = tmp_path / "topo.yaml"
    topo.write_text("name: t\nswitches: []\nlinks: []\n")
    endpoints = tmp_path / "ready.json"
    endpoints.write_text("{}")
    r = CliRunner().invoke(agent, ["--source", "sim", "--kafka", "127.0.0.1:1", "--topology", str(topo),
                                   "--sim-endpoints", str(endpoints), "--host-key-file", str(key)], env=ENV)
    assert r.exit_code == 2, r.output
    assert "host_key_file signs as one host; source sim reads many" in r.output, r.output
    assert "efef" not in r.output
