"""The RoCEv2 UDP source port Linux mlx5 derives from a QP pair (flow label 0)."""

import random

from flowtracer.fabric.roce import rocev2_udp_sport


def test_issue_example() -> None:
    assert rocev2_udp_sport(0x1A2, 0x3B4) == 52208


def test_symmetric_and_in_dynamic_range() -> None:
    rng = random.Random(1)
    for _ in range(2000):
        a, b = rng.randrange(1 << 24), rng.randrange(1 << 24)
        sport = rocev2_udp_sport(a, b)
        assert sport == rocev2_udp_sport(b, a)
        assert 0xC000 <= sport <= 0xFFFF
