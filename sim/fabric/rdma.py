"""RDMA objects of the simulated hosts: QP number allocation, QP pairs and their two flow directions.

A QP pair joins QP ``a_qpn`` on NIC ``a`` with QP ``b_qpn`` on NIC ``b``. Both ends share one UDP
source port (Linux derives it from the product of the two QP numbers), so the ECMP hash of each
direction differs only by the swapped addresses. Data flows a -> b; NCCL's clear-to-send
messages (the receiver RDMA-writes the sender's FIFO) flow b -> a on the same pair.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.roce import IP_PROTO_UDP, ROCEV2_UDP_DPORT, rocev2_udp_sport

QPN_BITS = 24
QPN_MASK = (1 << QPN_BITS) - 1
PSN_MASK = (1 << 24) - 1


class QpnAllocator:
    """QP numbers of one RDMA device, as the NIC hands them out.

    Numbers start at a device-specific base and count up (24-bit, wrapping back to the base).
    With ``reuse=True`` a destroyed number is handed out again before fresh ones (lowest first),
    which is what a long run with communicator re-creation needs to exercise QP generations.
    """

    def __init__(self, base: int, reuse: bool = False) -> None:
        if not 0 < base < QPN_MASK:
            raise ValueError(f"QPN base {base} out of range")
        self.base = base
        self.reuse = reuse
        self._next = base
        self._in_use: set[int] = set()
        self._freed: list[int] = []

    def allocate(self) -> int:
        if self.reuse and self._freed:
            self._freed.sort()
            qpn = self._freed.pop(0)
            self._in_use.add(qpn)
            return qpn
        for _ in range(QPN_MASK):
            qpn = self._next
            self._next = self._next + 1 if self._next < QPN_MASK else self.base
            if qpn not in self._in_use:
                self._in_use.add(qpn)
                if qpn in self._freed:
                    self._freed.remove(qpn)
                return qpn
        raise RuntimeError("no free QP number")

    def free(self, qpn: int) -> None:
        if qpn in self._in_use:
            self._in_use.remove(qpn)
            self._freed.append(qpn)

    @property
    def in_use(self) -> int:
        return len(self._in_use)


@dataclass(frozen=True)
class NicEnd:
    """One RDMA NIC port of a host, as the engine addresses it."""

    host: str
    rdma_device: str
    port: int
    netdev: str
    ip: str

    @property
    def name(self) -> str:
        """The fabric's NIC name, ``host:rdma_device``."""
        return f"{self.host}:{self.rdma_device}"


@dataclass
class QpPair:
    """Two connected RC QPs and who owns them. ``*_psn0``: initial send PSN of each end."""

    id: int
    a: NicEnd
    b: NicEnd
    a_qpn: int
    b_qpn: int
    a_pid: int
    b_pid: int
    comm: str
    created_ns: int
    a_psn0: int
    b_psn0: int
    job: str = ""
    kind: str = ""  # "ring", "tree", "p2p", "background"
    channel: int = -1
    a_rank: int = -1
    b_rank: int = -1
    comm_id: int = 0
    destroyed_ns: int | None = None
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def udp_src_port(self) -> int:
        return rocev2_udp_sport(self.a_qpn, self.b_qpn)

    def headers(self, forward: bool) -> HeaderFields:
        """Header fields a switch hashes for the a -> b (forward) or b -> a direction."""
        src, dst, dst_qpn = (self.a, self.b, self.b_qpn) if forward else (self.b, self.a, self.a_qpn)
        return HeaderFields(src.ip, dst.ip, self.udp_src_port, ROCEV2_UDP_DPORT, IP_PROTO_UDP, dst_qpn)


def random_psn(rng: random.Random) -> int:
    """A random initial 24-bit send PSN (perftest's choice; NCCL itself starts at 0)."""
    return rng.randrange(PSN_MASK + 1)
