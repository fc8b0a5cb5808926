"""The reproduction's analysis on synthetic ring traffic of the 16-host fabric: phases, shape, statics, page."""

from __future__ import annotations

import pytest

from flowtracer.fabric.roce import rocev2_udp_sport
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.whatif.figures import Figure
from flowtracer.whatif.record import RecordedFlow, Recording, Window
from flowtracer.whatif.reproductions.flowtracer16 import (
    PAPER_REDUCTION,
    analyse,
    reduction,
    split_phases,
    stats,
    traffic_shape,
)
from flowtracer.whatif.reproductions.flowtracer16_page import markdown

S = 1_000_000_000
GB = 10_000_000_000


def ring(fabric: Fabric, order: list[int], comm: str, qpn0: int) -> list[RecordedFlow]:
    """Two ring channels over hosts in ``order`` (1-based host numbers): one flow per edge and channel."""
    out = []
    for ch in range(2):
        for i, a in enumerate(order):
            b = order[(i + 1) % len(order)]
            src, dst = fabric.nics[f"host{a:02d}:mlx5_0"], fabric.nics[f"host{b:02d}:mlx5_0"]
            lq, rq = qpn0 + 2 * a + ch, qpn0 + 1000 + 2 * b + ch
            out.append(RecordedFlow(f"{src.name}/{lq}/1", src.name, dst.name, src.nic.ip, dst.nic.ip,
                                    rocev2_udp_sport(lq, rq), 4791, lq, rq, GB, comm_id=comm, channel=ch))
    return out


@pytest.fixture(scope="module")
def setup() -> tuple[Fabric, list[Window]]:
    fabric = Fabric(generate(FabricSpec(hosts=16, leaves=4, spines=2)))
    leaf_order = ring(fabric, list(range(1, 17)), "0xa", 0x100)
    shuffled = ring(fabric, [1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 4, 8, 12, 16], "0xb", 0x4000)
    wins = [Window((e - 1) * S, e * S, tuple(leaf_order)) for e in range(1, 6)]
    wins.append(Window(5 * S, 6 * S, ()))
    wins += [Window((e - 1) * S, e * S, tuple(shuffled)) for e in range(7, 12)]
    return fabric, wins


def test_phases_are_the_windows_where_one_communicator_ran_alone(setup) -> None:
    _, wins = setup
    phases = split_phases(wins, [("a", "A"), ("b", "B")])
    assert [(p.key, [w.end_ns // S for w in p.windows]) for p in phases] == [("a", [2, 3, 4]), ("b", [8, 9, 10])]


def test_traffic_shape(setup) -> None:
    fabric, wins = setup
    a = traffic_shape(wins[:5], fabric)
    assert a == {"flows_per_leaf": "2", "destinations_per_leaf": "1", "offered_per_uplink_capacity": 0.5}
    b = traffic_shape(wins[6:], fabric)  # every edge crosses leaves: 4 NICs x 400G over 2 x 400G
    assert b == {"flows_per_leaf": "8", "destinations_per_leaf": "4", "offered_per_uplink_capacity": 2.0}


def test_reduction_and_stats() -> None:
    assert reduction(0.5, 0.35) == pytest.approx(PAPER_REDUCTION)
    assert reduction(0.005, 0.0) is None
    assert stats([1.0, 2.0, 3.0, float("inf")]) == {"n": 3, "min": 1.0, "q1": 1.5, "median": 2.0, "q3": 2.5,
                                                    "max": 3.0, "mean": 2.0}


def test_analysis_and_page(setup) -> None:
    fabric, wins = setup
    phases = split_phases(wins, [("leaf-order", "ranks in leaf order"), ("shuffled", "ranks shuffled")])
    exp = analyse(Recording(), fabric, phases, draws=4, seeds=3)
    d = exp.to_dict()
    a, b = d["phases"]
    healthy = a["cells"][0]
    fixed = {r["strategy"]: r for r in healthy["fixed"]}
    # Leaf order: each leaf's 2 flows go to one host, so destination pinning puts both on one uplink.
    assert fixed["static-dst"]["fim"] == pytest.approx(1.0)
    assert fixed["sport-plan"]["fim"] == pytest.approx(0.0)
    assert fixed["spray"]["fim"] == pytest.approx(0.0)
    assert healthy["seeds"]["distinct_fim"] == 1  # seeds relabel members, never separate flows
    assert len(healthy["draws"]["ecmp"]["fim"]) and healthy["draws"]["ecmp"]["fim"]["n"] == 4
    # Shuffled: 4 destinations per leaf, 2 on each spine by ordinal: pinning balances, and is as fast as spraying.
    fb = {r["strategy"]: r for r in b["cells"][0]["fixed"]}
    assert fb["static-dst"]["fim"] == pytest.approx(0.0)
    assert fb["static-dst"]["completion_s"] == pytest.approx(fb["spray"]["completion_s"])
    assert [c["conditions"] for c in b["cells"]] == ["healthy", "leaf01:Ethernet5 at 0.5", "leaf01:Ethernet5 failed"]
    page = markdown(exp, [Figure("repro-x", "a caption", b"", "")])
    assert page.startswith("# Reproduction: FlowTracer's ECMP-vs-static result, and beyond")
    assert "| ranks in leaf order | healthy | static-dst | " in page
    assert "![a caption](figures/repro-x.png)" in page
    assert "## Caveats" in page and "The FIM formula is ours" in page
