"""Replay metrics by hand: FIM, utilization, and completion time under max-min fair sharing (fluid, coupled rings)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_whatif_strategies import FOUR, UP1, UP2, B, S, fabric, flow, run

from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.whatif.fabric import ReplayFabric, parse_conditions
from flowtracer.whatif.record import Recording, Window
from flowtracer.whatif.replay import (
    Traffic,
    measured,
    processor_fim,
    replay,
    replay_all,
    rolling_windows,
    steady_runs,
)
from flowtracer.whatif.routes import demands
from flowtracer.whatif.strategies import parse_strategy, route_all


def test_collision_takes_twice_as_long_as_an_even_split() -> None:
    # All four flows on one 400G uplink: 100G each, 25 GB in 2 s. Split 2/2: the NICs (2 flows each) give 200G.
    ecmp, _ = run("ecmp")
    static, _ = run("static-dst")
    assert ecmp.completion_s == pytest.approx(B * 8 / 100e9)
    assert static.completion_s == pytest.approx(B * 8 / 200e9)
    assert ecmp.recorded_s == 1.0 and ecmp.total_bytes == 4 * B


def test_degraded_link_halves_its_capacity() -> None:
    # static: spine1's uplink at 200G carries the 2 flows to h3: 100G each -> 2 s; the flows to h4 are coupled
    # to nothing and finish in 1 s, so the window takes 2 s.
    r, _ = run("static-dst", degrade=("leaf1:Ethernet3=0.5",))
    assert r.completion_s == pytest.approx(2.0)
    assert r.max_util == pytest.approx(2 * B * 8 / 200e9)
    assert r.link_util[UP1] == pytest.approx(2.0)  # 50 GB in the 1 s window on 200G: twice what fits
    assert r.link_util[UP2] == pytest.approx(1.0)


def test_failed_host_link_makes_flows_unreachable() -> None:
    r, _ = run("ecmp", fail=("h3:mlx5_0",))
    assert r.unreachable_flows == 2
    assert r.unreachable_bytes == 2 * B
    assert math.isinf(r.completion_s)
    assert r.summary()["completion_s"] is None


def test_a_ring_channel_takes_as_long_as_its_slowest_edge() -> None:
    # X (h1->h3) and Y (h2->h4) are one ring channel; static pinning puts X on spine1, whose uplink is degraded
    # to 100G, and Y on spine2. Y could finish in 0.5 s, but the channel is done when X is: 25 GB at 100G.
    x = flow("h1", "h3", 50000, 1, 0x100, B, channel=0, comm="0xc0")
    y = flow("h2", "h4", 50002, 2, 0x200, B, channel=0, comm="0xc0")
    r, _ = run("static-dst", [x, y], degrade=("leaf1:Ethernet3=0.25",))
    assert r.completion_s == pytest.approx(B * 8 / 100e9)
    # A small flow of the channel (its clear-to-send stream) rides along at its share of the big ones' rate.
    cts = flow("h3", "h1", 50001, 3, 0x10, 1_000_000, channel=0, comm="0xc0")
    r, _ = run("static-dst", [x, y, cts], degrade=("leaf1:Ethernet3=0.25",))
    assert r.completion_s == pytest.approx(B * 8 / 100e9)


def test_small_flows_finish_and_free_their_share() -> None:
    # A big and a tiny flow from one NIC: 200G each until the tiny one is done, then 400G for the big one.
    tiny = 1_000_000
    flows = [flow("h1", "h3", 50000, 1, 0x100, 2 * B), flow("h1", "h4", 50002, 2, 0x200, tiny)]
    r, _ = run("static-dst", flows)
    t_tiny = tiny * 8 / 200e9
    assert r.completion_s == pytest.approx(t_tiny + (2 * B - tiny) * 8 / 400e9, rel=1e-9)


def test_steady_windows_are_moved_as_one_demand() -> None:
    b = np.array([[10.0, 20.0], [20.0, 40.0], [10.0, 0.0], [5.0, 10.0]])
    runs = steady_runs(b)
    assert [r.tolist() for r in runs] == [[30.0, 60.0], [10.0, 0.0], [5.0, 10.0]]
    windows = [Window(i * S, (i + 1) * S, (flow("h1", "h3", 50000, 1, 0x100, B),)) for i in range(3)]
    fab = fabric()
    rf = ReplayFabric(fab)
    r = replay(Traffic.of(windows), route_all(parse_strategy("ecmp"), demands(windows), rf), rf, "ecmp")
    assert r.completion_s == pytest.approx(3 * B * 8 / 400e9)
    assert r.recorded_s == 3.0


def test_fim_flows_is_the_mean_flow_count_per_member() -> None:
    # Window 1: both flows on spine1 (even ports); window 2: only the first. Mean counts [1.5, 0] -> FIM 1.
    w1 = Window(0, S, (flow("h1", "h3", 50000, 1, 0x100), flow("h1", "h4", 50002, 2, 0x200)))
    w2 = Window(S, 2 * S, (flow("h1", "h3", 50000, 1, 0x100),))
    rf = ReplayFabric(fabric())
    r = replay(Traffic.of([w1, w2]), route_all(parse_strategy("ecmp"), demands([w1, w2]), rf), rf, "ecmp")
    assert r.fim_flows == pytest.approx(1.0)
    assert r.group_member_bytes["leaf1:spine1|spine2"] == {UP1: 3 * B, UP2: 0.0}


def test_replay_all_orders_conditions_then_strategies() -> None:
    fab = fabric()
    windows = [Window(0, S, tuple(FOUR))]
    rfs = [ReplayFabric(fab), ReplayFabric(fab, parse_conditions(fab, fail=["leaf1:Ethernet3"]))]
    out = replay_all(windows, rfs, [parse_strategy("ecmp"), parse_strategy("spray")])
    assert [(r.conditions, r.strategy) for r in out] == [("healthy", "ecmp"), ("healthy", "spray"),
                                                          ("leaf1:Ethernet3 failed", "ecmp"),
                                                          ("leaf1:Ethernet3 failed", "spray")]


def _link_load(link: str, end: int, nbytes: int, valid: bool = True) -> analytics_pb2.LinkLoad:
    return analytics_pb2.LinkLoad(schema_version=1, window_start_ns=end - S, window_end_ns=end, link=link,
                                  measured_bytes=nbytes, measured_valid=valid, speed_bps=400_000_000_000)


def test_measured_fim_counts_a_group_window_only_when_every_member_is_trusted() -> None:
    rec = Recording(link_loads=[
        _link_load(UP1, S, 3 * B), _link_load(UP2, S, B),
        _link_load(UP1, 2 * S, 4 * B), _link_load(UP2, 2 * S, 0, valid=False),  # untrusted: window left out
    ])
    m = measured(rec, ReplayFabric(fabric()))
    assert m.group_fim["leaf1:spine1|spine2"] == pytest.approx(0.5)  # [3, 1] -> 0.5 (docs/fim.md)
    assert m.fim == pytest.approx(0.5)
    assert m.windows == 2
    assert m.max_util == pytest.approx((3 * B + 4 * B) * 8 / (400e9 * 2))


def test_processor_fim_and_rolling_windows() -> None:
    samples = [analytics_pb2.FimSample(schema_version=1, window_end_ns=5 * S, group="fabric", fim=f,
                                       basis=analytics_pb2.LOAD_BASIS_MEASURED) for f in (0.2, 0.3)]
    rec = Recording(fims=samples)
    found = processor_fim(rec, 5 * S)
    assert found is not None and found.fim == pytest.approx(0.3)  # a rewritten window: the last one stands
    assert processor_fim(rec, 4 * S) is None
    windows = [Window(i * S, (i + 1) * S, ()) for i in range(6)]
    assert [w.end_ns for w in rolling_windows(windows, 5 * S, 3 * S)] == [3 * S, 4 * S, 5 * S]


def test_link_bytes_cover_every_link_and_utilization_the_fabric_links() -> None:
    r, _ = run("spray")
    assert r.link_bytes[UP1] == pytest.approx(2 * B)
    assert r.link_bytes["h1:mlx5_0>leaf1:Ethernet1"] == pytest.approx(2 * B)
    rf = ReplayFabric(fabric())
    assert set(r.link_util) == {lid for i, lid in enumerate(rf.link_ids) if rf.fabric_link[i]}
    assert len(r.link_util) == 8  # 4 cables between switches, both directions
