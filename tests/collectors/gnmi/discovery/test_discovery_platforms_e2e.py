"""``topology discover`` of a mixed-platform fabric (real simulated switches, 16 hosts): each target is read
through its vendor profile, and what a profile cannot give is one line per target, never silently dropped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from discovery_sim import run, served_fabric

#: leaf02 (SONiC): neither LLDP nor AFT; leaf03 (SR Linux: native LLDP paths), leaf04: LLDP without management
#: addresses, no AFT groups; spine01: no AFT.
PLATFORMS = {"leaf02": "sonic", "leaf03": "nokia_srl", "leaf04": "arista_eos", "spine01": "cisco_nxos"}


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


def test_each_target_is_read_through_its_profile(mixed: tuple[Path, Path, dict], tmp_path: Path) -> None:
    """Without the hosts' inventories, what the profiles cannot give is reported, line by line."""
    generated, ready_file, _ = mixed
    out = tmp_path / "discovered.yaml"
    code, _, err = run("topology", "discover", "--targets", str(ready_file), "--out", str(out), "--name", "ft16")
    assert code == 0, err
    lines = err.splitlines()
    lacking = [w for w in lines if "its profile maps no" in w]
    assert [w.split(" ", 3)[1:3] for w in lacking] == [["leaf02", "(sonic):"], ["leaf03", "(nokia_srl):"],
                                                      ["leaf04", "(arista_eos):"], ["spine01", "(cisco_nxos):"]]
    assert "no LLDP" in lacking[0] and "hosts only from agent inventory" in lacking[0]
    assert all("ECMP groups are derived from the learnt links" in w for w in lacking)
    assert out.read_text().startswith("# ECMP groups derived from the links (no AFT routes read): "
                                      "leaf02, leaf03, leaf04, spine01\n")
    assert [w for w in lines if "NIC left out" in w] == [
        f"warning: {leaf}:Ethernet{i}: host host{first + i:02d} advertises no usable management address ('') and no "
        "inventory names this NIC: NIC left out" for leaf, first in (("leaf03", 8), ("leaf04", 12)) for i in range(1, 5)]
    # All 8 cables (leaf02's from its neighbors' side), every speed and every group but toward the leaves whose
    # hosts were not learnt are as generated; the hosts of leaf02, leaf03 and leaf04 are missing.
    _, diff, _ = run("topology", "diff", str(generated), str(out))
    assert [line for line in diff.splitlines() if not line.startswith("ecmp ")] == [
        f"host host{i:02d}: only in A" for i in range(5, 17)]


def test_the_agents_inventories_place_every_host(mixed: tuple[Path, Path, dict], tmp_path: Path) -> None:
    """Each host's agent writes what it knows (its NICs from sysfs, the switch port it hears over LLDP): with
    those, discovery places the hosts of the SONiC leaf and names those of the EOS leaf, and the diff is empty."""
    generated, ready_file, ready = mixed
    inventories = []
    for host, view in sorted(ready["host_view_dirs"].items()):
        inv = tmp_path / f"{host}.json"
        code, _, err = run("agent", "--inventory-out", str(inv), "--host", host,
                           "--sysfs-root", f"{view}/current/sys/class/infiniband",
                           "--lldp-json", f"{view}/static/lldpctl.json")
        assert code == 0 and "1 NIC(s), 1 with a switch port heard over LLDP" in err, err
        inventories += ["--inventory", str(inv)]
    out = tmp_path / "discovered.yaml"
    code, _, err = run("topology", "discover", "--targets", str(ready_file), "--out", str(out), "--name", "ft16",
                       "--rpc", "once", *inventories)  # Subscribe ONCE through the profiles, as Get above
    assert code == 0 and "NIC left out" not in err, err
    assert "discovered 6 switches, 8 links, 16 hosts, 4 ECMP groups" in err
    assert run("topology", "diff", str(generated), str(out)) == (0, "", "")
