"""Generated fabrics validate and have the equal-cost path counts a leaf-spine of that shape must have."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flowtracer.fabric.routing import Fabric, summarize
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.fabric.topology_generate import FabricSpec, generate


@pytest.mark.parametrize(("spec", "groups", "paths"), [
    # 4 leaves x 2 spines: every leaf spreads over both spines; 2 paths between leaves.
    (FabricSpec(hosts=16, leaves=4, spines=2), 4, 2),
    # Parallel links: 4 spines x 2 cables up x 2 cables down = 16 paths; spines get groups too.
    (FabricSpec(hosts=8, leaves=2, spines=4, parallel_links=2), 2 + 4 * 2, 16),
    # Rail-optimized 8 NICs: 8 rails x 2 leaves each, 4 spines.
    (FabricSpec(hosts=16, nics_per_host=8, rails=8, leaves=16, spines=4), 16, 4),
])
def test_generated_fabric_shape(spec: FabricSpec, groups: int, paths: int) -> None:
    topo = generate(spec)
    fabric = Fabric(topo)
    assert len(topo.hosts) == spec.hosts
    assert len(fabric.nics) == spec.hosts * spec.nics_per_host
    assert len(fabric.ecmp_groups) == groups
    assert summarize(fabric)["paths_between_leaves"] == [paths, paths]
    first, last = topo.hosts[0], topo.hosts[-1]
    src, dst = f"{first.name}:mlx5_0", f"{last.name}:mlx5_0"
    same_leaf = first.nics[0].leaf.split(":")[0] == last.nics[0].leaf.split(":")[0]
    assert len(fabric.equal_cost_paths(src, dst)) == (1 if same_leaf else paths)


def test_rail_optimized_nic_k_on_rail_k() -> None:
    topo = generate(FabricSpec(hosts=4, nics_per_host=4, rails=4, leaves=4, spines=2))
    for host in topo.hosts:
        assert [n.rail for n in host.nics] == [0, 1, 2, 3]
        assert [n.leaf.split(":")[0] for n in host.nics] == ["leaf01", "leaf02", "leaf03", "leaf04"]
    fabric = Fabric(topo)
    # Same rail: one leaf, one path; across rails: via a spine.
    assert len(fabric.equal_cost_paths("host01:mlx5_2", "host04:mlx5_2")) == 1
    assert len(fabric.equal_cost_paths("host01:mlx5_0", "host04:mlx5_1")) == 2


def test_impossible_spec_is_rejected() -> None:
    with pytest.raises(TopologyError, match="--leaves 3 is not a multiple of --rails 2"):
        generate(FabricSpec(hosts=4, nics_per_host=2, rails=2, leaves=3, spines=2))


def test_cli_generates_the_issue_fabrics(tmp_path: Path) -> None:
    small = subprocess.run([sys.executable, "-m", "flowtracer", "topology", "generate", "--hosts", "16",
                            "--nics-per-host", "1", "--leaves", "4", "--spines", "2"],
                           capture_output=True, text=True, timeout=120, check=True)
    (tmp_path / "f16.yaml").write_text(small.stdout)
    assert len(load_topology(tmp_path / "f16.yaml").hosts) == 16
    big = tmp_path / "f512.yaml"
    subprocess.run([sys.executable, "-m", "flowtracer", "topology", "generate", "--hosts", "512",
                    "--nics-per-host", "8", "--leaves", "128", "--spines", "32", "-o", str(big)],
                   capture_output=True, text=True, timeout=120, check=True)
    check = subprocess.run([sys.executable, "-m", "flowtracer", "topology", "check", str(big), "--json"],
                           capture_output=True, text=True, timeout=120, check=True)
    import json

    summary = json.loads(check.stdout)
    assert summary["nics"] == 4096 and summary["rails"] == 8
    assert summary["switches"] == {"leaf": 128, "spine": 32}
    assert summary["paths_between_leaves"] == [32, 32]
    assert summary["oversubscription"] == 1.0
