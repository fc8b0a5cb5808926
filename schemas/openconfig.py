"""OpenConfig leaf lists the contract is built on: what the collectors read and the simulator serves."""

from __future__ import annotations

INTERFACE_COUNTERS: tuple[str, ...] = (
    "in-octets", "out-octets", "in-pkts", "out-pkts", "in-unicast-pkts", "out-unicast-pkts",
    "in-discards", "out-discards", "in-errors", "out-errors",
)
"""Leaves under /interfaces/interface/state/counters that CounterBatch carries, in the order of the
InterfaceCounters fields (index = position here)."""

NEXT_HOP_COUNTERS: tuple[str, ...] = ("octets-forwarded", "packets-forwarded")
"""Next-hop counter leaves (openconfig-aft), index = position."""
