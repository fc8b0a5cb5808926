"""Where a QP's peer is: the remote NIC (host, device, port, IP) of an RC connection.

``rdma res show qp`` gives the local and remote QP numbers but not the remote address. The peer is
the QP on another NIC whose lqpn is our rqpn and whose rqpn is our lqpn. An agent that sees the QP
tables of several hosts (the simulator's one process for all hosts, or any deployment that
shares them) finds it in this directory; hosts and NIC addresses come from the topology's host
inventory and the hosts' GID tables. A lone host agent knows only its own QPs; the other hosts'
come from the QP ends the agents exchange over Kafka (``peer_ends``), as a ``remote`` directory
consulted for what the local one cannot answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_I64 = np.int64


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One end of an RC connection: a NIC port and the QP on it."""

    host: str
    device: str
    port: int
    ip: str


def _keys(a: np.ndarray | list[int], b: np.ndarray | list[int]) -> np.ndarray:
    """(a, b) pairs of QP numbers (0 <= n < 2^32) as one int64 each."""
    a = np.asarray(a, dtype=_I64)
    b = np.asarray(b, dtype=_I64)
    if len(a) and (int(min(a.min(), b.min())) < 0 or int(max(a.max(), b.max())) >> 32):
        raise ValueError("QP numbers must be 0 <= qpn < 2^32")
    return (a << 32) | b


class PeerDirectory:
    """Index of QP ends by (lqpn, rqpn) over every host this agent sees.

    Ends are added per NIC port in bulk (``add_many``) and looked up
    in bulk (``peers``): one sorted array of every end, built at the first lookup after an add.
    A QP this directory has no unambiguous end for is looked up in ``remote`` (the other hosts'
    exchanged ends); ids of remote ends follow the local ones.
    """

    def __init__(self, remote: PeerDirectory | None = None) -> None:
        self.remote = remote
        self._end_list: list[Endpoint] = []
        self._end_ids: dict[Endpoint, int] = {}
        self._chunks: list[tuple[int, np.ndarray]] = []  # (end id, keys lqpn << 32 | rqpn)
        self._index: tuple[np.ndarray, np.ndarray] | None = None  # sorted keys, their end ids
        self.ambiguous = 0

    def _id(self, end: Endpoint) -> int:
        i = self._end_ids.get(end)
        if i is None:
            i = self._end_ids[end] = len(self._end_list)
            self._end_list.append(end)
        return i

    def add_many(self, end: Endpoint, lqpns: np.ndarray, rqpns: np.ndarray) -> None:
        """``add`` for every (lqpns[i], rqpns[i]) of NIC port ``end``."""
        if len(lqpns):
            self._chunks.append((self._id(end), _keys(lqpns, rqpns)))
            self._index = None

    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        if self._index is None:
            keys = [k for _, k in self._chunks]
            ids = [np.full(len(k), i, _I64) for i, k in self._chunks]
            k = np.concatenate(keys) if keys else np.zeros(0, _I64)
            e = np.concatenate(ids) if ids else np.zeros(0, _I64)
            order = np.argsort(k, kind="stable")
            self._index = (k[order], e[order])
        return self._index

    def endpoint(self, i: int) -> Endpoint:
        """The end with id ``i`` (as returned by ``peers``)."""
        n = len(self._end_list)
        return self._end_list[i] if i < n or self.remote is None else self.remote.endpoint(i - n)

    def ips_of(self, ids: np.ndarray) -> list[str]:
        """IP of each end id in ``ids`` ("" for -1)."""
        return ["" if i < 0 else self.endpoint(i).ip for i in np.asarray(ids).tolist()]

    def peers(self, end: Endpoint, lqpns: np.ndarray, rqpns: np.ndarray) -> np.ndarray:
        """Id of the remote end of each QP ``lqpns[i]`` -> ``rqpns[i]`` on ``end``, -1 when unknown
        or ambiguous (``endpoint(id)`` gives the end)."""
        out = self._local_peers(end, lqpns, rqpns)
        if self.remote is not None and len(out):
            miss = np.flatnonzero(out < 0)
            if len(miss):
                r = self.remote.peers(end, np.asarray(lqpns)[miss], np.asarray(rqpns)[miss])
                hit = r >= 0
                out[miss[hit]] = r[hit] + len(self._end_list)
        return out

    def _local_peers(self, end: Endpoint, lqpns: np.ndarray, rqpns: np.ndarray) -> np.ndarray:
        n = len(lqpns)
        out = np.full(n, -1, _I64)
        k, e = self._sorted()
        if not n or not len(k):
            return out
        q = _keys(rqpns, lqpns)  # the peer's (lqpn, rqpn)
        lo = np.searchsorted(k, q, "left")
        count = np.searchsorted(k, q, "right") - lo
        one = count == 1
        out[one] = e[lo[one]]  # (loopback QPs, lqpn == rqpn, are never added)
        me = self._end_ids.get(end, -1)
        for i in np.flatnonzero(count > 1).tolist():
            # QP numbers are per device, so two NICs can each have a QP pair with these numbers.
            others = [x for x in e[lo[i]:lo[i] + count[i]].tolist() if x != me]
            if len(others) == 1:
                out[i] = others[0]
            else:
                self.ambiguous += 1
        return out

    def peer(self, end: Endpoint, lqpn: int, rqpn: int) -> Endpoint | None:
        """The remote end of QP ``lqpn`` -> ``rqpn`` on ``end``, or None when unknown or ambiguous."""
        (i,) = self.peers(end, np.array([lqpn], _I64), np.array([rqpn], _I64)).tolist()
        return None if i < 0 else self.endpoint(i)
