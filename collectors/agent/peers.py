"""Where a QP's peer is: the remote NIC (host, device, port, IP) of an RC connection.

``rdma res show qp`` gives the local and remote QP numbers but not the remote address. The peer is
the QP on another NIC whose lqpn is our rqpn and whose rqpn is our lqpn. An agent that sees the QP
tables of several hosts (the simulator's one process for all hosts, or any deployment that
shares them) finds it in this directory; hosts and NIC addresses come from the topology's host
inventory and the hosts' GID tables. A lone host agent knows only its own QPs: its flows keep an
empty ``dst_ip`` unless the peer is local (a QP between two NICs of the same host).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One end of an RC connection: a NIC port and the QP on it."""

    host: str
    device: str
    port: int
    ip: str


class PeerDirectory:
    """Index of QP ends by (lqpn, rqpn) over every host this agent sees."""

    def __init__(self) -> None:
        self._ends: dict[tuple[int, int], list[Endpoint]] = {}
        self.ambiguous = 0

    def add(self, end: Endpoint, lqpn: int, rqpn: int) -> None:
        """Record that NIC port ``end`` has QP ``lqpn`` connected to ``rqpn``."""
        lst = self._ends.get((lqpn, rqpn))
        if lst is None:
            self._ends[(lqpn, rqpn)] = [end]
        else:
            lst.append(end)

    def peer(self, end: Endpoint, lqpn: int, rqpn: int) -> Endpoint | None:
        """The remote end of QP ``lqpn`` -> ``rqpn`` on ``end``, or None when unknown or ambiguous."""
        found = self._ends.get((rqpn, lqpn))
        if not found:
            return None
        if len(found) == 1:
            return found[0]  # (loopback QPs, lqpn == rqpn, are never added)
        # QP numbers are per device, so two NICs can each have a QP pair with these numbers.
        others = [e for e in found if e != end]
        if len(others) == 1:
            return others[0]
        self.ambiguous += 1
        return None
