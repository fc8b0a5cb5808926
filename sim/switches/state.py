"""Telemetry state of one simulated switch: written by the fabric engine, read by its gNMI server.

The engine advances traffic in ticks and, at the end of each tick, writes the new absolute
counters and the tick's end time (``timestamp_ns``) under the lock. The gNMI server never
computes anything: it reads consistent snapshots and turns them into notifications, stamped with
``timestamp_ns`` so that a sample's counters and its timestamp always agree with ground truth.

Events the server must push without waiting for a sample (oper-status changes, reboots) reach it
through listeners, called after the lock is released.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from flowtracer.schemas.openconfig import INTERFACE_COUNTERS, PFC_COUNTERS, QUEUE_COUNTERS


@dataclass
class InterfaceState:
    """One port. Counters are absolute (bytes / packets) and keyed by INTERFACE_COUNTERS names."""

    name: str
    speed_bps: int
    oper_up: bool = True
    last_change_ns: int = 0
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(INTERFACE_COUNTERS, 0))


@dataclass
class QueueState:
    """One egress queue of a port. Counters are absolute (packets / bytes), keyed by QUEUE_COUNTERS names;
    ``max_queue_len`` is the watermark in bytes (``None``: the switch does not report it)."""

    interface: str
    name: str
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(QUEUE_COUNTERS, 0))
    max_queue_len: int | None = None


@dataclass
class PfcState:
    """PFC pause frames of one port and priority (0-7), absolute, keyed by PFC_COUNTERS names (served). Other
    keys are kept but not served (the simulator's pause durations in µs, which SR Linux has no leaf for)."""

    interface: str
    priority: int
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PFC_COUNTERS, 0))


@dataclass
class NextHop:
    """One AFT next hop: where it goes and what it forwarded (absolute bytes / packets)."""

    index: int
    ip_address: str
    interface: str
    octets_forwarded: int = 0
    packets_forwarded: int = 0


@dataclass
class NextHopGroup:
    """One AFT next-hop group: member next-hop index -> weight. Ids change across reboots."""

    id: int
    next_hops: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LldpNeighbor:
    """What a port hears over LLDP from the device cabled to it (openconfig-lldp neighbor state).

    ``port_description`` carries a host NIC's RDMA device (``mlx5_0``), as lldpd's
    ``configure ports <netdev> lldp portdescription`` sets it; a switch sends its port name.
    ``management_address`` is the neighbor's address on this cable (a host: its NIC address).
    """

    system_name: str
    port_id: str
    chassis_id: str
    port_description: str = ""
    management_address: str = ""
    port_id_type: str = "INTERFACE_NAME"
    chassis_id_type: str = "MAC_ADDRESS"


@dataclass
class Snapshot:
    """A consistent copy of a switch's state at ``timestamp_ns`` (ns since the Unix epoch)."""

    name: str
    boot_epoch: int
    timestamp_ns: int
    last_clear_ns: int
    counter_bits: int
    interfaces: dict[str, InterfaceState]
    next_hops: dict[int, NextHop]
    groups: dict[int, NextHopGroup]
    queues: dict[tuple[str, str], QueueState] = field(default_factory=dict)
    pfc: dict[tuple[str, int], PfcState] = field(default_factory=dict)


class EventKind(Enum):
    OPER_STATUS = "oper-status"  # an interface went up or down; ``interface`` names it
    REBOOT = "reboot"  # the switch went away: streams must end, counters restart at 0
    SAMPLE = "sample"  # the engine finished a tick: a new timestamp_ns is readable


@dataclass(frozen=True)
class Event:
    kind: EventKind
    timestamp_ns: int
    interface: str = ""


Listener = Callable[[Event], None]


class SwitchState:
    """Thread-safe state of one switch. The engine mutates it inside ``with state.lock``."""

    def __init__(self, name: str, counter_bits: int = 64) -> None:
        self.name = name
        self.lock = threading.RLock()
        #: +1 on every reboot; a gNMI server ends its streams when it changes.
        self.boot_epoch = 0
        #: False while the switch is rebooting: the gNMI server answers UNAVAILABLE.
        self.available = True
        #: True while its gNMI server is hung (fault ``gnmi_silent``): sessions stay open, nothing is sent.
        self.silent = False
        #: End of the last engine tick, ns since the Unix epoch; 0 before the first tick.
        self.timestamp_ns = 0
        #: When counters were last cleared (boot time), ns since the Unix epoch.
        self.last_clear_ns = 0
        #: 64 normally; 32 in counter32 mode, where the engine wraps counters modulo 2**32.
        self.counter_bits = counter_bits
        self.interfaces: dict[str, InterfaceState] = {}
        self.next_hops: dict[int, NextHop] = {}
        self.groups: dict[int, NextHopGroup] = {}
        #: Static after start: port -> LLDP neighbor, port -> (IPv4 address, prefix length).
        self.lldp: dict[str, LldpNeighbor] = {}
        self.addresses: dict[str, tuple[str, int]] = {}
        #: AFT IPv4 entries: prefix ("10.0.0.1/32") -> next-hop group id; ids change with ``groups``.
        self.ipv4_entries: dict[str, int] = {}
        #: Congestion counters, written by whatever models congestion (the engine, or a test setting them):
        #: egress queues keyed (interface, queue name), PFC keyed (interface, priority). Empty: none served.
        self.queues: dict[tuple[str, str], QueueState] = {}
        self.pfc: dict[tuple[str, int], PfcState] = {}
        self._listeners: list[Listener] = []
        self._listeners_lock = threading.Lock()

    def snapshot(self) -> Snapshot:
        """A deep copy taken under the lock, so counters and timestamp belong to one tick."""
        with self.lock:
            return Snapshot(self.name, self.boot_epoch, self.timestamp_ns, self.last_clear_ns, self.counter_bits,
                            copy.deepcopy(self.interfaces), copy.deepcopy(self.next_hops),
                            copy.deepcopy(self.groups), copy.deepcopy(self.queues), copy.deepcopy(self.pfc))

    def add_listener(self, listener: Listener) -> None:
        with self._listeners_lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with self._listeners_lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def emit(self, event: Event) -> None:
        """Tell every listener; the engine calls this after releasing the lock."""
        with self._listeners_lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(event)
