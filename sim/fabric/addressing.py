"""Point-to-point addresses of the simulated switch links (what next hops point at).

Each switch-to-switch cable gets a /31 from 172.16.0.0/12 in topology order: cable i has
172.16.0.0 + 2i on its ``a`` end and + 2i + 1 on its ``b`` end (RFC 3021), enough for 524,288
cables. A next hop's IP is the neighbor's address on the member link.
"""

from __future__ import annotations

import ipaddress

from flowtracer.schemas.topology import Topology

P2P_BLOCK = ipaddress.IPv4Network("172.16.0.0/12")


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
