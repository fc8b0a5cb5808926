"""What a simulated RDMA host holds: its QPs, port counters and NCCL log, written by the engine.

``sim/host_views.py`` turns a ``HostState`` into the files the real tools would show on a Linux
host (``rdma -j resource show qp``, ``rdma -j statistic qp show``, sysfs, NCCL_DEBUG=INFO lines),
so the host agent's real parsers read them unchanged. Nothing here is read by the pipeline.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class QpState:
    """One RC queue pair on one NIC port. Byte and packet counters are absolute since creation."""

    rdma_device: str
    port: int
    netdev: str
    lqpn: int
    rqpn: int
    src_ip: str
    dst_ip: str
    udp_src_port: int
    pid: int
    comm: str
    created_ns: int
    #: Send / receive PSN (24-bit, wrapping); the send PSN advances by one per packet sent.
    sq_psn: int = 0
    rq_psn: int = 0
    tx_bytes: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    rx_packets: int = 0
    qp_type: str = "RC"
    state: str = "RTS"
    #: Path MTU in bytes (what a PSN estimate multiplies by).
    mtu: int = 4096
    #: Peer host / device (for ground truth and NCCL log lines; the agent never reads these).
    peer_host: str = ""
    peer_device: str = ""
    #: The job of the owning process (ground truth): the host view's ``proc/<pid>/cgroup`` names it.
    job: str = ""


@dataclass
class PortCounters:
    """sysfs-style per-port totals, absolute; bytes here, the writer converts to 4-byte words."""

    rdma_device: str
    port: int
    netdev: str
    tx_bytes: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    rx_packets: int = 0
    #: mlx5 hw_counters and ethtool PFC counters by name (docs/congestion.md); None while the congestion model
    #: is off. Replaced, never mutated, at each tick end (a shallow copy is a consistent snapshot).
    congestion: dict[str, int] | None = None


@dataclass
class NicInfo:
    """Static facts of one NIC port: what sysfs gids/gid_attrs show."""

    rdma_device: str
    port: int
    netdev: str
    ip: str
    speed_bps: int
    #: ``switch:port`` the NIC is cabled to: what the switch's LLDP frames on the wire say
    switch_port: str = ""


@dataclass
class HostState:
    """Everything one simulated host exposes. Mutated by the engine under ``lock``."""

    name: str
    nics: list[NicInfo] = field(default_factory=list)
    qps: dict[tuple[str, int], QpState] = field(default_factory=dict)  # (rdma_device, lqpn) -> QP
    ports: dict[tuple[str, int], PortCounters] = field(default_factory=dict)  # (rdma_device, port)
    #: NCCL_DEBUG=INFO lines emitted and not yet handed to the view writer (which appends them to the log file);
    #: without a runner (tests of the engine) every line emitted so far.
    nccl_log: list[str] = field(default_factory=list)
    #: Engine time of the last update, ns since the Unix epoch.
    timestamp_ns: int = 0
    #: False while the host's agent is stopped (fault ``agent_stop``): its view is not written this tick.
    reporting: bool = True
    #: Lines emitted before ``nccl_log[0]``: the runner drops the lines it handed to the view writer, so a long
    #: run keeps a tick's lines, not every line since the start (issue 27).
    nccl_log_dropped: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
