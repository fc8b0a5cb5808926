"""Spreading policies: how a spraying or adaptive switch deals one flow's packets over a group's members.

Pure computation on counts (no fabric, no servers). A tick's packets of one flow at one switch are dealt
in whole packets:

- ``round_robin``: packet after packet to the next member, the flow's cursor carried from tick to tick
  (per-packet spraying as Ultra Ethernet's packet spraying or a round-robin ECMP set does);
- ``least_loaded``: every packet to the member that has carried the fewest bytes so far in the tick
  (ties: lowest member index), the fluid form of adaptive routing / dynamic load balancing, which steers
  each packet (or flowlet) to the least-occupied egress.

``share`` turns packet counts into byte (or payload) counts that sum exactly to the flow's.
"""

from __future__ import annotations

from collections.abc import Sequence


def round_robin(packets: int, members: int, cursor: int) -> list[int]:
    """Packets per member when ``packets`` are dealt one by one starting at member ``cursor`` (mod members).

    The flow's next cursor is ``(cursor + packets) % members``.
    """
    if members <= 0:
        raise ValueError("a group needs at least one member")
    base, extra = divmod(max(packets, 0), members)
    start = cursor % members
    return [base + (1 if (i - start) % members < extra else 0) for i in range(members)]


def least_loaded(packets: int, packet_bytes: float, loads: Sequence[float]) -> list[int]:
    """Packets per member when each of ``packets`` packets (``packet_bytes`` bytes each) goes to the member with
    the least bytes so far (``loads``, bytes, plus what this call has given it), ties to the lowest index.

    Equal to that packet-by-packet rule, in O(members^2): the water level first gives every member the whole
    packets that lie strictly below it (a prefix of the packet-by-packet order), then at most ``members``
    packets are dealt one by one.
    """
    k = len(loads)
    if k == 0:
        raise ValueError("a group needs at least one member")
    if packets <= 0:
        return [0] * k
    if packet_bytes <= 0:
        return round_robin(packets, k, 0)
    order = sorted(range(k), key=lambda i: loads[i])
    total = packets * packet_bytes
    level = loads[order[0]] + total
    prefix = 0.0
    for m, i in enumerate(order, start=1):
        prefix += loads[i]
        level = (total + prefix) / m
        if m == k or level <= loads[order[m]]:
            break
    counts = [max(0, int((level - loads[i]) // packet_bytes) - 1) for i in range(k)]
    left = packets - sum(counts)
    while left > 0:
        i = min(range(k), key=lambda j: (loads[j] + counts[j] * packet_bytes, j))
        counts[i] += 1
        left -= 1
    return counts


def share(amount: int, counts: Sequence[int]) -> list[int]:
    """``amount`` (bytes) split in proportion to ``counts`` (packets), largest remainders first: sums to
    ``amount`` exactly; all zero when no packet was dealt."""
    total = sum(counts)
    if total <= 0:
        return [0] * len(counts)
    parts = [amount * c // total for c in counts]
    rest = amount - sum(parts)
    by_rest = sorted(range(len(counts)), key=lambda i: (-(amount * counts[i] % total), i))
    for i in by_rest[:rest]:
        parts[i] += 1
    return parts
