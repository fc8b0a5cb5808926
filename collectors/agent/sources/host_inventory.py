"""This host's inventory as its agent knows it (pure): RDMA devices, ports, netdevs and RoCE v2 addresses from
sysfs (``sysfs.py``), and the switch port each NIC hears over LLDP from ``lldpctl -f json``.

``lldpctl -f json`` (lldpd >= 1.0, ``src/client/json_writer.c``) prints ``{"lldp": {"interface": X}}`` where X
is ``{"<netdev>": {...}}`` for one interface and a list of such objects for several; each has
``"chassis": {"<system name>": {...}}`` and ``"port": {"id": {"type": "ifname", "value": "<port>"}}``.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from typing import Any

from flowtracer.collectors.agent.sources.sysfs import SysfsView
from flowtracer.fabric.host_inventory import HostInventory, InventoryNic


def lldp_switch_ports(text: str) -> dict[str, str]:
    """netdev -> ``switch:port`` heard on it, from ``lldpctl -f json``; ValueError (one line) if it is not that."""
    try:
        data = json.loads(text)
        ifaces: Any = data["lldp"].get("interface") or {}
    except (ValueError, KeyError, AttributeError, TypeError):
        raise ValueError("not the JSON of 'lldpctl -f json' (no lldp object)") from None
    out: dict[str, str] = {}
    for entry in ifaces if isinstance(ifaces, list) else [ifaces]:
        for netdev, nb in (entry.items() if isinstance(entry, dict) else ()):
            try:
                chassis = next(iter(nb["chassis"]))
                port = nb["port"]["id"]["value"]
            except (KeyError, TypeError, StopIteration):
                continue  # a neighbor without a system name or a port id places nothing
            out[netdev] = f"{chassis}:{port}"
    return out


def _ip(ips: list[str]) -> str | None:
    """The NIC's address: its first IPv4 RoCE v2 address, else its first one."""
    return next((ip for ip in ips if ipaddress.ip_address(ip).version == 4), ips[0] if ips else None)


def host_inventory(host: str, view: SysfsView, heard: Mapping[str, str]) -> HostInventory:
    """``host``'s NIC ports that have a RoCE v2 address, with the switch port each hears (``heard``: netdev ->
    ``switch:port``), in device and port order."""
    nics = []
    for (device, port), pv in sorted(view.ports.items()):
        ip = _ip(pv.roce_v2_ips())
        if ip is not None:
            nics.append(InventoryNic(rdma_device=device, port=port, netdev=pv.netdev, ip=ip,
                                     switch_port=heard.get(pv.netdev, "")))
    return HostInventory(host=host, nics=tuple(nics))
