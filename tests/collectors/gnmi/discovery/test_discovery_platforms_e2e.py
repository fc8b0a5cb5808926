"""``topology discover`` of a mixed-platform fabric (real simulated switches, 16 hosts): each target is read
through its vendor profile, and what a profile cannot give is one line per target, never silently dropped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from discovery_sim import served_fabric

from flowtracer.main import cli

#: leaf04 has LLDP but no management address in its profile; spine01 no AFT; spine02 (SONiC) neither LLDP nor AFT.
PLATFORMS = {"leaf04": "arista_eos", "spine01": "cisco_nxos", "spine02": "sonic"}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict]]:
    def edit(data: dict) -> None:
        for s in data["switches"]:
            if s["name"] in PLATFORMS:
                s["gnmi"] = {**(s.get("gnmi") or {}), "platform": PLATFORMS[s["name"]]}

    d = tmp_path_factory.mktemp("discovery-platforms")
    with served_fabric(d, edit, host_views=True) as (generated, ready, _):
        ready_file = d / "ready.json"  # names each switch's platform: discovery reads it from here
        ready_file.write_text(json.dumps(ready))
        yield generated, ready_file, ready


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_each_target_is_read_through_its_profile(mixed: tuple[Path, Path, dict], tmp_path: Path) -> None:
    generated, ready_file, _ = mixed
    out = tmp_path / "discovered.yaml"
    code, _, err = run("topology", "discover", "--targets", str(ready_file), "--out", str(out), "--name", "ft16")
    assert code == 0, err
    lines = err.splitlines()
    lacking = [w for w in lines if "its profile maps no" in w]
    assert [w.split(" ", 3)[1:3] for w in lacking] == [["leaf04", "(arista_eos):"], ["spine01", "(cisco_nxos):"],
                                                      ["spine02", "(sonic):"]]
    assert "no LLDP" in lacking[2] and "cables are learnt from its neighbors' LLDP" in lacking[2]
    assert all("ECMP groups are derived from the learnt links" in w for w in lacking)
    assert out.read_text().startswith("# ECMP groups derived from the links (no AFT routes read): "
                                      "leaf04, spine01, spine02\n")
    # All 8 cables (SONiC's from its neighbors' side), every speed and every group but toward leaf04, whose
    # hosts' LLDP has no address (said per NIC) are as generated.
    assert [w for w in lines if "NIC left out" in w] == [
        f"warning: leaf04:Ethernet{i}: host host{12 + i} advertises no usable management address (''): NIC left out"
        for i in range(1, 5)]
    assert run("topology", "diff", str(generated), str(out)) == (1, "".join(
        [f"ecmp {leaf} toward leaf04: group of Ethernet5, Ethernet6 only in A\n" for leaf in ("leaf01", "leaf02",
                                                                                              "leaf03")]
        + [f"host host{i}: only in A\n" for i in range(13, 17)]), "")
