"""What each simulated switch knows about its surroundings: LLDP neighbors and port addresses.

Derived from the topology, once: every switch-to-switch cable makes each end hear the other switch
(system name, port name as an ``INTERFACE_NAME`` port id, the neighbor's address on the cable as
management address); every host NIC makes its leaf port hear the host (system name = host name,
port id = the NIC's netdev, port description = its RDMA device, management address = the NIC's IP),
as lldpd on a host with ``configure ports <netdev> lldp portdescription <rdma_device>`` would.
Addresses follow the one plan in ``fabric/addressing.py`` (a /31 per port).
"""

from __future__ import annotations

import hashlib

from flowtracer.fabric.addressing import host_port_addresses, p2p_addresses
from flowtracer.fabric.topology import Topology
from flowtracer.sim.switches.state import LldpNeighbor

PREFIX_LENGTH = 31
"""Every numbered switch port is one end of a /31 (RFC 3021)."""


def chassis_mac(name: str) -> str:
    """A stable, locally administered MAC address for a device name (its LLDP chassis id)."""
    b = bytearray(hashlib.sha256(name.encode()).digest()[:6])
    b[0] = (b[0] & 0xFC) | 0x02  # unicast, locally administered
    return ":".join(f"{x:02x}" for x in b)


def lldp_neighbors(topology: Topology) -> dict[str, dict[str, LldpNeighbor]]:
    """switch -> port -> the neighbor that port hears."""
    out: dict[str, dict[str, LldpNeighbor]] = {s.name: {} for s in topology.switches}
    p2p = p2p_addresses(topology)
    for link in topology.links:
        a = tuple(link.a.split(":", 1))
        b = tuple(link.b.split(":", 1))
        for (here, port), (there, their_port) in ((a, b), (b, a)):
            out[here][port] = LldpNeighbor(there, their_port, chassis_mac(there), their_port,
                                           p2p[(there, their_port)])
    for host in topology.hosts:
        for nic in host.nics:
            leaf, port = nic.leaf.split(":", 1)
            out[leaf][port] = LldpNeighbor(host.name, nic.netdev, chassis_mac(host.name), nic.rdma_device, nic.ip)
    return out


def port_addresses(topology: Topology) -> dict[str, dict[str, tuple[str, int]]]:
    """switch -> port -> (IPv4 address, prefix length) of every numbered port."""
    out: dict[str, dict[str, tuple[str, int]]] = {s.name: {} for s in topology.switches}
    for (switch, port), ip in {**p2p_addresses(topology), **host_port_addresses(topology)}.items():
        out[switch][port] = (ip, PREFIX_LENGTH)
    return out
