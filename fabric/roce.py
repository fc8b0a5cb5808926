"""RoCEv2 constants and the UDP source port Linux derives from a QP pair."""

from __future__ import annotations

ROCEV2_UDP_DPORT = 4791
"""IANA UDP destination port of RoCEv2; every RoCEv2 packet carries it."""

IP_PROTO_UDP = 17

FRAME_OVERHEAD_BYTES = 62
"""Frame bytes per RoCEv2 packet besides payload: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4."""

ROCE_PRIORITY = 3
"""The PFC priority and egress queue RoCE traffic uses by convention (the simulator's and the processor's)."""


def rocev2_udp_sport(lqpn: int, rqpn: int) -> int:
    """UDP source port of a RoCEv2 RC QP with flow label 0, as upstream Linux mlx5 computes it.

    ``rdma_calc_flow_label`` folds the 48-bit product of the two QP numbers to a 20-bit flow
    label, and ``rdma_flow_label_to_udp_sport`` folds that to 14 bits in the dynamic range
    0xC000-0xFFFF. The product makes it symmetric: both ends of a QP pair use the same port.
    """
    fl = lqpn * rqpn
    fl ^= fl >> 20
    fl ^= fl >> 40
    fl &= 0xFFFFF
    return ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000
