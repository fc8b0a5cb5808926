"""Spreading policies, pure: round robin deals in turn, least-loaded equals the packet-by-packet rule, shares sum."""

from __future__ import annotations

import random

import pytest

from flowtracer.sim.fabric.spray import least_loaded, round_robin, share


def greedy(packets: int, packet_bytes: float, loads: list[float]) -> list[int]:
    """The rule as stated: each packet to the member with the fewest bytes so far, ties to the lowest index."""
    counts = [0] * len(loads)
    for _ in range(packets):
        i = min(range(len(loads)), key=lambda j: (loads[j] + counts[j] * packet_bytes, j))
        counts[i] += 1
    return counts


@pytest.mark.parametrize(("packets", "members", "cursor", "want"), [
    (10, 4, 0, [3, 3, 2, 2]), (10, 4, 3, [3, 2, 2, 3]), (3, 4, 6, [1, 0, 1, 1]), (0, 3, 1, [0, 0, 0]),
])
def test_round_robin_deals_in_turn_from_the_cursor(packets: int, members: int, cursor: int, want: list[int]) -> None:
    assert round_robin(packets, members, cursor) == want


def test_round_robin_across_ticks_keeps_members_within_one_packet() -> None:
    totals, cursor = [0, 0, 0], 0
    for pk in (7, 1, 5, 11, 2):
        for i, c in enumerate(round_robin(pk, 3, cursor)):
            totals[i] += c
        cursor = (cursor + pk) % 3
        assert max(totals) - min(totals) <= 1


def test_least_loaded_equals_the_packet_by_packet_rule() -> None:
    rng = random.Random(7)
    cases = [(5, 4096.0, [0.0, 0.0]), (3, 10.0, [25.0, 0.0, 10.0]), (8, 4.0, [4.0, 4.0, 0.0, 12.0])]
    cases += [(rng.randrange(0, 400), rng.choice([1.0, 64.0, 4158.0, 0.37]),
               [float(rng.randrange(0, 50_000)) for _ in range(rng.randrange(1, 9))]) for _ in range(300)]
    for packets, size, loads in cases:
        assert least_loaded(packets, size, loads) == greedy(packets, size, loads), (packets, size, loads)


def test_least_loaded_fills_the_emptier_member_first() -> None:
    # 5 packets level the loads, then they alternate from the lowest index: 3 more to member 0, 2 to member 1.
    assert least_loaded(10, 100.0, [500.0, 0.0]) == [3, 7]
    assert least_loaded(4, 100.0, [10_000.0, 0.0, 0.0]) == [0, 2, 2]


@pytest.mark.parametrize(("amount", "counts"), [(100, [1, 1, 1]), (4158 * 7 + 5, [3, 0, 4]), (9, [0, 0]), (0, [2, 5])])
def test_share_is_proportional_and_sums_exactly(amount: int, counts: list[int]) -> None:
    parts = share(amount, counts)
    assert sum(parts) == (amount if sum(counts) else 0)
    for p, c in zip(parts, counts, strict=True):
        assert abs(p - amount * c / max(sum(counts), 1)) < 1
        assert c or p == 0


def test_no_member_is_an_error() -> None:
    for call in (lambda: round_robin(1, 0, 0), lambda: least_loaded(1, 1.0, [])):
        with pytest.raises(ValueError, match="at least one member"):
            call()
    assert least_loaded(0, 1.0, [1.0, 2.0]) == [0, 0]
