"""The fabric's interface addresses: what next hops point at and what traced hops answer from.

A topology names NIC addresses but no switch addresses, so switch ports are numbered by one plan that
simulator, host agents (to map a traced hop's address back to a switch port) and processor share:

- each switch-to-switch cable gets a /31 from 172.16.0.0/12 in topology order: cable i has
  172.16.0.0 + 2i on its ``a`` end and + 2i + 1 on its ``b`` end (RFC 3021), enough for 524,288 cables;
- each leaf port facing a host NIC gets an address from 100.64.0.0/10 (RFC 6598) in topology order of the
  NICs: NIC i's leaf port has 100.64.0.0 + 2i (the host's gateway; the NIC keeps its own topology address).

A switch answers a traced probe from the address of the port the probe came in on (Linux:
``net.ipv4.icmp_errors_use_inbound_ifaddr=1``), so ``port_by_address`` turns each hop into the link the
flow crossed to reach it.
"""

from __future__ import annotations

import ipaddress

from flowtracer.fabric.topology import Topology

P2P_BLOCK = ipaddress.IPv4Network("172.16.0.0/12")
HOST_PORT_BLOCK = ipaddress.IPv4Network("100.64.0.0/10")


def p2p_addresses(topology: Topology) -> dict[tuple[str, str], str]:
    """``(switch, port) -> IPv4 address`` for both ends of every switch-to-switch cable."""
    base = int(P2P_BLOCK.network_address)
    if 2 * len(topology.links) > P2P_BLOCK.num_addresses:
        raise ValueError(f"{len(topology.links)} cables do not fit the /31 plan in {P2P_BLOCK}")
    out: dict[tuple[str, str], str] = {}
    for i, link in enumerate(topology.links):
        a_node, a_port = link.a.split(":", 1)
        b_node, b_port = link.b.split(":", 1)
        out[(a_node, a_port)] = str(ipaddress.IPv4Address(base + 2 * i))
        out[(b_node, b_port)] = str(ipaddress.IPv4Address(base + 2 * i + 1))
    return out


def host_port_addresses(topology: Topology) -> dict[tuple[str, str], str]:
    """``(leaf, port) -> IPv4 address`` of every leaf port facing a host NIC (the NIC's gateway)."""
    base = int(HOST_PORT_BLOCK.network_address)
    nics = [nic for host in topology.hosts for nic in host.nics]
    if 2 * len(nics) > HOST_PORT_BLOCK.num_addresses:
        raise ValueError(f"{len(nics)} NICs do not fit the host-port plan in {HOST_PORT_BLOCK}")
    out: dict[tuple[str, str], str] = {}
    for i, nic in enumerate(nics):
        leaf, port = nic.leaf.split(":", 1)
        out[(leaf, port)] = str(ipaddress.IPv4Address(base + 2 * i))
    return out


def interface_addresses(topology: Topology) -> dict[tuple[str, str], str]:
    """``(switch, port) -> IPv4 address`` of every switch port the plan numbers."""
    return {**p2p_addresses(topology), **host_port_addresses(topology)}


def port_by_address(topology: Topology) -> dict[str, tuple[str, str]]:
    """``IPv4 address -> (switch, port)``: who answered a traced hop."""
    return {ip: where for where, ip in interface_addresses(topology).items()}
