"""The NIC's congestion counters: ``ethtool -S`` parsing (table of cases, fuzz: never raises) and NicCongestion
deltas per port (exact, resets, counters a NIC does not expose stay absent)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowtracer.collectors.agent.nic_congestion import HW_COUNTERS, NicCongestionTracker
from flowtracer.collectors.agent.sources.ethtool_stats import parse_ethtool_stats, pfc_stats, read_ethtool_stats
from flowtracer.collectors.agent.sources.program import ProgramError
from flowtracer.schemas.v1.common_pb2 import DeltaStatus

OK, RESET, BASELINE = DeltaStatus.DELTA_STATUS_OK, DeltaStatus.DELTA_STATUS_RESET, DeltaStatus.DELTA_STATUS_BASELINE
S = 1_000_000_000
T0 = 1_700_000_000 * S

MLX5 = """NIC statistics:
     rx_packets: 1000
     rx_prio3_pause: 12
     rx_prio3_pause_duration: 3400
     tx_prio3_pause: 5
     tx_prio3_pause_duration: 800
     rx_prio3_pause_transition: 6
     rx_prio0_pause: 0
"""

CASES = [
    (MLX5, {"rx_packets": 1000, "rx_prio3_pause": 12, "rx_prio3_pause_duration": 3400, "tx_prio3_pause": 5,
            "tx_prio3_pause_duration": 800, "rx_prio3_pause_transition": 6, "rx_prio0_pause": 0}, 0),
    ("NIC statistics:\n  a: 1\n  garbage line\n  b: -3\n  c: 1.5\n  d: ²\n  e:\n", {"a": 1}, 5),
    ("  big: 18446744073709551615\n  bigger: 18446744073709551616\n  huge: " + "9" * 5000, {"big": 2**64 - 1}, 2),
    ("", {}, 0),
]


@pytest.mark.parametrize(("text", "stats", "malformed"), CASES)
def test_parse_table(text: str, stats: dict[str, int], malformed: int) -> None:
    assert parse_ethtool_stats(text) == (stats, malformed)


def test_pfc_stats_takes_the_mlx5_names_only() -> None:
    stats, _ = parse_ethtool_stats(MLX5 + "  rx_prio8_pause: 9\n  rx_pfc_pri3_pkt: 4\n")
    assert pfc_stats(stats) == {3: {0: 12, 1: 5, 2: 3400, 3: 800}, 0: {0: 0}}


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_parse_never_raises(text: str) -> None:
    stats, malformed = parse_ethtool_stats(text)
    assert all(0 <= v < 2**64 for v in stats.values()) and malformed >= 0
    pfc_stats(stats)


def test_a_missing_ethtool_is_one_clear_error() -> None:
    with pytest.raises(ProgramError, match="cannot run 'no-such-ethtool-here': not found"):
        read_ethtool_stats("eth0", ["no-such-ethtool-here"])


def test_deltas_per_port_with_a_reset_and_absent_counters() -> None:
    t = NicCongestionTracker()
    port, bare = ("mlx5_0", 1), ("mlx5_1", 1)
    hw = {"np_cnp_sent": 100, "rp_cnp_handled": 40, "lifespan": 10, "rx_write_requests": 5}
    first = t.update({port: hw, bare: {"rx_write_requests": 1}}, {port: {3: {0: 7, 2: 70}}}, T0)
    assert bare not in first  # exposes none of the congestion counters
    assert first[port].np_cnp_sent.status == BASELINE and first[port].pfc[0].rx_pause.status == BASELINE
    second = t.update({port: {**hw, "np_cnp_sent": 130, "rp_cnp_handled": 2}}, {port: {3: {0: 9, 2: 95}}}, T0 + S)
    c = second[port]
    assert (c.interval_ns, c.np_cnp_sent.value, c.np_cnp_sent.delta, c.np_cnp_sent.status) == (S, 130, 30, OK)
    assert (c.rp_cnp_handled.value, c.rp_cnp_handled.delta, c.rp_cnp_handled.status) == (2, 0, RESET)
    assert [f for f in HW_COUNTERS if c.HasField(f)] == ["np_cnp_sent", "rp_cnp_handled"]
    (p3,) = c.pfc
    assert (p3.priority, p3.rx_pause.delta, p3.rx_pause_duration_us.delta, p3.HasField("tx_pause")) == (3, 2, 25, False)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=12))
def test_deltas_are_exact_or_say_why_not(values: list[int]) -> None:
    """Every window's delta is the exact increase, or 0 with RESET when the counter went down."""
    t = NicCongestionTracker()
    port = ("mlx5_0", 1)
    prev = None
    for k, v in enumerate(values):
        c = t.update({port: {"np_ecn_marked_roce_packets": v}}, {}, T0 + k * S)[port].np_ecn_marked_roce_packets
        if prev is None:
            assert c.status == BASELINE
        elif v >= prev:
            assert (c.delta, c.status) == (v - prev, OK)
        else:
            assert (c.delta, c.status) == (0, RESET)
        prev = v
