"""Reader for the RDMA sysfs tree: per-port counters and the GID table.

Layout (``drivers/infiniband/core/sysfs.c``), under a root that defaults to
``/sys/class/infiniband`` and is configurable so tests and the simulator point it elsewhere::

    <dev>/ports/<n>/counters/port_xmit_data      PMA counters, decimal; *_data in 4-byte words
    <dev>/ports/<n>/hw_counters/<name>           driver counters, decimal (``lifespan`` is ms)
    <dev>/ports/<n>/gids/<i>                     GID i as 8 groups of 4 hex digits (%pI6)
    <dev>/ports/<n>/gid_attrs/types/<i>          "RoCE v2" or "IB/RoCE v1" (unreadable when empty)
    <dev>/ports/<n>/gid_attrs/ndevs/<i>          netdev of GID i

A RoCE v2 GID is the NIC's IP address: IPv4 as an IPv4-mapped IPv6 address
(``0000:0000:0000:0000:0000:ffff:0a00:0001`` = 10.0.0.1), IPv6 as itself. Everything here is
world-readable on Linux; no privilege is needed.

The functions never raise on a damaged tree: unreadable or unparsable files are skipped and
counted in ``malformed`` (a PMA counter that says ``N/A (no PMA)`` is absent, not malformed).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_ROOT = Path("/sys/class/infiniband")

ROCE_V2 = "RoCE v2"
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


@dataclass(frozen=True, slots=True)
class Gid:
    """One populated GID table entry."""

    index: int
    gid: str  # as sysfs prints it
    gid_type: str  # "RoCE v2", "IB/RoCE v1", or "" when unreadable
    netdev: str

    @property
    def ip(self) -> str | None:
        """The IP address a RoCE GID encodes (dotted quad for IPv4-mapped), else None."""
        try:
            addr = ipaddress.IPv6Address(self.gid)
        except ValueError:
            return None
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        if addr.is_link_local or addr.is_unspecified:
            return None  # fe80:: GIDs are derived from the MAC, not an address on the fabric
        return str(addr)


@dataclass(slots=True)
class PortView:
    """One RDMA port: its counters (absolute values as read) and its GID table."""

    device: str
    port: int
    counters: dict[str, int] = field(default_factory=dict)
    hw_counters: dict[str, int] = field(default_factory=dict)
    gids: list[Gid] = field(default_factory=list)
    netdev_mtu: int | None = None  # bytes, from /sys/class/net/<netdev>/mtu when readable

    @property
    def netdev(self) -> str:
        """The netdev of the port's RoCE GIDs (v2 first), "" when none is populated."""
        for g in sorted(self.gids, key=lambda g: g.gid_type != ROCE_V2):
            if g.netdev:
                return g.netdev
        return ""

    def roce_v2_ips(self) -> list[str]:
        """IP addresses of the port's RoCE v2 GIDs, in GID index order, each once."""
        seen: dict[str, None] = {}
        for g in sorted(self.gids, key=lambda g: g.index):
            if g.gid_type == ROCE_V2 and (ip := g.ip) is not None:
                seen.setdefault(ip)
        return list(seen)

    # Port totals in bytes / packets. port_xmit_data counts 4-byte words (IBA PortXmitData).
    @property
    def tx_bytes(self) -> int | None:
        v = self.counters.get("port_xmit_data")
        return None if v is None else v * 4

    @property
    def rx_bytes(self) -> int | None:
        v = self.counters.get("port_rcv_data")
        return None if v is None else v * 4

    @property
    def tx_packets(self) -> int | None:
        return self.counters.get("port_xmit_packets")

    @property
    def rx_packets(self) -> int | None:
        return self.counters.get("port_rcv_packets")


@dataclass(slots=True)
class SysfsView:
    """Every port found under one sysfs root, and how many files could not be read or parsed."""

    ports: dict[tuple[str, int], PortView] = field(default_factory=dict)
    malformed: int = 0
    root_exists: bool = True


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(4096)
    except OSError:
        return None


def _counter_dir(d: str, view: SysfsView) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for name in names:
        if name == "lifespan":
            continue  # hw_counters/lifespan is the refresh interval (ms), not a counter
        text = _read(f"{d}/{name}")
        if text is None:
            view.malformed += 1
            continue
        text = text.strip()
        if text.startswith("N/A"):
            continue  # "N/A (no PMA)": the device does not implement this counter
        try:
            value = int(text)
        except ValueError:
            view.malformed += 1
            continue
        if value < 0:
            view.malformed += 1
            continue
        out[name] = value
    return out


def _gids(port_dir: str, view: SysfsView) -> list[Gid]:
    out: list[Gid] = []
    try:
        names = os.listdir(f"{port_dir}/gids")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        text = _read(f"{port_dir}/gids/{name}")
        if text is None:
            continue  # a GID that vanished between listdir and read
        gid = text.strip().lower()
        if gid == _ZERO_GID or not gid:
            continue
        if gid.count(":") != 7:
            view.malformed += 1
            continue
        gid_type = (_read(f"{port_dir}/gid_attrs/types/{name}") or "").strip()
        netdev = (_read(f"{port_dir}/gid_attrs/ndevs/{name}") or "").strip()
        out.append(Gid(int(name), gid, gid_type, netdev))
    return out


def read_sysfs(root: Path = DEFAULT_ROOT, net_root: Path | None = None, *, gids: bool = True) -> SysfsView:
    """Read every ``<dev>/ports/<n>`` under ``root``: counters, hw_counters and (``gids``) the GID table.

    ``net_root`` is the ``/sys/class/net`` to read netdev MTUs from (default: ``root/../net``).
    A missing root gives an empty view with ``root_exists`` False.
    """
    # Paths as plain strings: the simulator's agent reads ~20 files a host for hundreds of hosts every window, and
    # building Path objects cost about a quarter of it.
    view = SysfsView()
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        view.root_exists = False
        return view
    net = os.fspath(net_root if net_root is not None else Path(root).parent / "net")
    for dev in devices:
        ports_dir = f"{os.fspath(root)}/{dev}/ports"
        try:
            port_names = os.listdir(ports_dir)
        except OSError:
            continue
        for pname in port_names:
            if not pname.isdigit():
                view.malformed += 1
                continue
            pdir = f"{ports_dir}/{pname}"
            pv = PortView(dev, int(pname))
            pv.counters = _counter_dir(f"{pdir}/counters", view)
            pv.hw_counters = _counter_dir(f"{pdir}/hw_counters", view)
            if gids:
                pv.gids = _gids(pdir, view)
                nd = pv.netdev
                if nd:
                    mtu = _read(f"{net}/{nd}/mtu")
                    if mtu is not None and mtu.strip().isdigit():
                        pv.netdev_mtu = int(mtu)
            view.ports[(dev, pv.port)] = pv
    return view


_IB_MTUS = (4096, 2048, 1024, 512, 256)
# IB_GRH_BYTES + IB_UDP_BYTES + IB_BTH_BYTES + IB_EXT_XRC_BYTES + IB_EXT_ATOMICETH_BYTES + IB_ICRC_BYTES
_IBOE_OVERHEAD = 40 + 8 + 12 + 4 + 28 + 4


def roce_path_mtu(netdev_mtu: int) -> int:
    """The RoCE path MTU (bytes of payload per packet) Linux derives from a netdev MTU (``iboe_get_mtu``).

    9000 -> 4096, 4200 -> 4096, 1500 -> 1024.
    """
    usable = netdev_mtu - _IBOE_OVERHEAD
    for m in _IB_MTUS:
        if usable >= m:
            return m
    return 256
