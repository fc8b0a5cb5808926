"""``flowtracer agent --inventory-out``: the host's NICs from sysfs and the switch ports it hears over LLDP, and
``topology discover --inventory`` refusing a bad file in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flowtracer.collectors.agent.sources.host_inventory import lldp_switch_ports
from flowtracer.main import cli

ONE = {"lldp": {"interface": {"ens1": {"chassis": {"leaf1": {}}, "port": {"id": {"type": "ifname", "value": "E1"}}}}}}


def test_lldpctl_json_one_interface_or_several() -> None:
    assert lldp_switch_ports(json.dumps(ONE)) == {"ens1": "leaf1:E1"}
    several = {"lldp": {"interface": [ONE["lldp"]["interface"], {"ens2": {"chassis": {}, "port": {}}},
                                      {"ens3": {"chassis": {"leaf2": {}}, "port": {"id": {"value": "E7"}}}}]}}
    assert lldp_switch_ports(json.dumps(several)) == {"ens1": "leaf1:E1", "ens3": "leaf2:E7"}
    assert lldp_switch_ports('{"lldp": {}}') == {}
    with pytest.raises(ValueError, match="lldpctl -f json"):
        lldp_switch_ports("[1]")


@pytest.mark.parametrize(("args", "message"), [
    (["agent", "--lldp-json", "{d}/lldp.json"], "lldp.json: not the JSON of 'lldpctl -f json'"),
    (["agent", "--lldp-json", "{d}/none.json"], "none.json: no such file"),
    (["agent", "--sysfs-root", "{d}/empty"], "no RDMA port with a RoCE v2 address"),
    (["topology", "discover", "--targets", "{d}/t.yaml", "--inventory", "{d}/inv.json"], "inv.json: nics"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "lldp.json").write_text("{}")
    (tmp_path / "inv.json").write_text('{"host": "h1", "nics": [{"rdma_device": "mlx5_0"}]}')
    (tmp_path / "empty").mkdir()
    argv = [a.format(d=tmp_path) for a in args]
    if argv[0] == "agent":
        argv += ["--inventory-out", str(tmp_path / "out.json"), "--host", "h1"]
    r = CliRunner().invoke(cli, argv)
    assert r.exit_code in (2, 4) and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "out.json").exists()
