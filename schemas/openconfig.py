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

DEFAULT_AFT = "/network-instances/network-instance[name=default]/afts"
"""The AFT of the default network instance (openconfig-network-instance, openconfig-aft)."""

LLDP_NEIGHBOR_STATE: tuple[str, ...] = (
    "id", "system-name", "chassis-id", "chassis-id-type", "port-id", "port-id-type", "port-description",
    "management-address",
)
"""Leaves under /lldp/interfaces/interface/neighbors/neighbor/state (openconfig-lldp) that the simulator serves
and discovery reads (``management-address`` is the 0.2.x leaf that 1.0.0 deprecates)."""

QUEUE_COUNTERS: tuple[str, ...] = (
    "transmit-pkts", "transmit-octets", "dropped-pkts", "dropped-octets", "ecn-marked-pkts", "ecn-marked-octets",
)
"""openconfig-qos counter leaves under /qos/interfaces/interface/output/queues/queue/state that CongestionBatch
carries, in the order of the QueueCounters fields (index = position here)."""

QUEUE_WATERMARK = "max-queue-len"
"""openconfig-qos queue watermark leaf (bytes; a high-water mark, not a counter)."""

PFC_COUNTERS: tuple[str, ...] = ("pfc-pause-frames-received", "pfc-pause-frames-generated")
"""Per-priority PFC leaves under /qos/interfaces/interface/pfc/statistics/pfc-priority[index] (SR Linux's layout;
OpenConfig has none), in the order of the PfcCounters fields (received = rx, generated = tx)."""
