"""What one gNMI Notification says, typed (``Samples``): the decoder's output and the assembly's input, with the
names of the interface-state and next-hop attribute fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Interface state fields (Samples.if_state): values are ints (OperStatus, ns, bit/s).
OPER_STATUS, LAST_CHANGE_NS, LAST_CLEAR_NS, SPEED_BPS = "oper_status", "last_change_ns", "last_clear_ns", "speed_bps"
# Next-hop attribute fields (Samples.nh_info).
NH_IP, NH_INTERFACE = "ip", "interface"


@dataclass(slots=True)
class Samples:
    """Everything one Notification says, typed. Counter values are raw (bytes or packets).

    ``timestamp_ns``: the notification's timestamp, ns since the Unix epoch (device clock).
    """

    timestamp_ns: int
    #: (interface, index into INTERFACE_COUNTERS, value)
    if_counters: list[tuple[str, int, int]] = field(default_factory=list)
    #: (interface, OPER_STATUS | LAST_CHANGE_NS | LAST_CLEAR_NS | SPEED_BPS, value)
    if_state: list[tuple[str, str, int]] = field(default_factory=list)
    #: (network instance, next-hop index, index into NEXT_HOP_COUNTERS, value, from the newer
    #: afts/counters tree)
    nh_counters: list[tuple[str, int, int, int, bool]] = field(default_factory=list)
    #: (network instance, next-hop index, NH_IP | NH_INTERFACE, value)
    nh_info: list[tuple[str, int, str, str]] = field(default_factory=list)
    #: (network instance, group id, next-hop index, weight)
    nhg_members: list[tuple[str, str, int, int]] = field(default_factory=list)
    #: ("interface", name) | ("next-hop", ni, index) | ("group", ni, id) | ("member", ni, id, index)
    deletes: list[tuple[Any, ...]] = field(default_factory=list)
    #: (interface, queue name, index into QUEUE_COUNTERS, value)
    queue_counters: list[tuple[str, str, int, int]] = field(default_factory=list)
    #: (interface, queue name, max-queue-len in bytes)
    queue_watermarks: list[tuple[str, str, int]] = field(default_factory=list)
    #: (interface, PFC priority 0-7, index into PFC_COUNTERS, value)
    pfc_counters: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: One line per update that could not be decoded (path and reason).
    errors: list[str] = field(default_factory=list)
    #: Updates that decoded but are not leaves we use (other counters, other models).
    ignored: int = 0
    #: ``ignored`` by the shape of the path (``path_shape``), so an unknown kind of data is named, not lost.
    ignored_shapes: dict[str, int] = field(default_factory=dict)

    @property
    def counter_updates(self) -> int:
        """Counter leaves in this notification (interface + next-hop)."""
        return len(self.if_counters) + len(self.nh_counters)

    @property
    def congestion_updates(self) -> int:
        """Queue and PFC leaves in this notification (counters and watermarks)."""
        return len(self.queue_counters) + len(self.queue_watermarks) + len(self.pfc_counters)
