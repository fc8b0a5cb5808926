"""A spread flow's tree of paths and how a tick's packets go down it: pure, on generated fabrics, no engine."""

from __future__ import annotations

import numpy as np
import pytest

from flowtracer.fabric.ecmp_hash import HashMode, HeaderFields
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.spread import deal, spread_modes, spread_route

HEADERS = HeaderFields("10.0.0.1", "10.0.0.3", udp_src_port=0xC123, dst_qpn=0x345)


def setup(modes: dict[str, HashMode]) -> tuple[Fabric, dict[str, int]]:
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2, parallel_links=2))
    topo = topo.model_copy(update={"switches": tuple(
        s.model_copy(update={"hash_mode": modes[s.name]}) if s.name in modes else s for s in topo.switches)})
    fabric = Fabric(topo)
    return fabric, {lid: i for i, lid in enumerate(fabric.links)}


def test_two_spreading_tiers_make_one_path_per_member_combination() -> None:
    modes = {"leaf01": HashMode.SPRAY, "spine01": HashMode.SPRAY, "spine02": HashMode.ADAPTIVE}
    fabric, index = setup(modes)
    assert spread_modes(fabric.topology) == modes
    route = spread_route(fabric, modes, HEADERS, "host01:mlx5_0", "host03:mlx5_0", index)
    assert route is not None
    # leaf01 has 4 uplinks (2 per spine), each spine 2 links down to leaf02: 8 paths, each 1/8 of the flow.
    paths = set(fabric.equal_cost_paths("host01:mlx5_0", "host03:mlx5_0"))
    assert len(paths) == 8
    names = {i: lid for lid, i in index.items()}
    shares = {names[i]: s for i, s in route.link_shares.items()}
    assert shares[next(iter(paths))[0]] == 1.0 and shares[next(iter(paths))[-1]] == 1.0
    for p in paths:
        assert shares[p[1]] == pytest.approx(1 / 4) and shares[p[2]] == pytest.approx(1 / 4)
    # 80 packets: round robin at leaf01 gives 20 per uplink; each spine deals its 40 evenly over its 2 links.
    link_bytes = np.zeros(len(index), dtype=np.int64)
    cursors: dict[str, int] = {}
    dealt = deal(route, 80 * 4096, 80 * 4158, 80, link_bytes, cursors)
    got = {tuple(names[i] for i in p.links): (pl, w, k) for p, pl, w, k in dealt}
    assert set(got) == paths
    assert {k for _pl, _w, k in got.values()} == {10}
    assert sum(w for _pl, w, _k in got.values()) == 80 * 4158
    assert cursors["leaf01"] == 0 and cursors["spine01"] == 0 and "spine02" not in cursors  # adaptive has none
    for p in paths:  # the links carried the dealt bytes
        assert link_bytes[index[p[1]]] == 20 * 4158


def test_least_loaded_steers_around_a_busy_uplink_and_hashing_switches_stay_single_path() -> None:
    fabric, index = setup({"leaf01": HashMode.ADAPTIVE})
    route = spread_route(fabric, {"leaf01": HashMode.ADAPTIVE}, HEADERS, "host01:mlx5_0", "host03:mlx5_0", index)
    assert route is not None
    names = {i: lid for lid, i in index.items()}
    uplinks = [li for li, _ in route.root.branches]
    link_bytes = np.zeros(len(index), dtype=np.int64)
    link_bytes[uplinks[0]] = 30 * 1000  # other traffic this tick
    dealt = deal(route, 0, 60 * 1000, 60, link_bytes, {})
    # The water level (60 packets over the three idle uplinks) stays below the busy one's 30,000 bytes.
    per_uplink = {p.links[1]: k for p, _pl, _w, k in dealt}
    assert per_uplink == {u: 20 for u in uplinks[1:]}
    assert [int(link_bytes[u]) for u in uplinks] == [30_000, 20_000, 20_000, 20_000]
    # Below leaf01 the spines hash: one path per uplink, with the member the spine's hash model picks.
    for p, *_ in dealt:
        spine = fabric.links[names[p.links[1]]].dst_node
        members = fabric.next_hops(spine, "leaf02")
        assert names[p.links[2]] == members[fabric.hash_model(spine).member(HEADERS, len(members))].id
    # A flow that meets no spreading switch with a choice (leaf02 is its last hop) has no tree.
    assert spread_route(fabric, {"leaf02": HashMode.SPRAY}, HEADERS, "host01:mlx5_0", "host03:mlx5_0", index) is None
