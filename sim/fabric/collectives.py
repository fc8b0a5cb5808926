"""Which NIC talks to which, and how many bytes, when NCCL runs a collective on a rail-optimized fabric.

Pure functions, no state. A job has ``nodes`` hosts with ``rails`` NICs each; GPU k of node i is
rank ``i * rails + k`` and uses NIC k (rail k), so every network connection joins NIC k of one node
to NIC k of another and rings stay on their rail. Intra-node hops ride NVLink and are not on the
fabric; only the inter-node edges are modelled.

Per-rank volumes are NCCL's, for a per-rank buffer of S bytes and n = nodes x rails ranks:
ring all-reduce sends 2(n-1)/n x S, all-gather and reduce-scatter (n-1)/n x S, all-to-all S/n to
each peer, send/recv S to the peer. A node's share of ring traffic is spread over its rails (each
NIC carries 1/rails of it) and over ``channels`` parallel rings per NIC; each connection is
striped over ``qps`` QPs (NCCL_IB_QPS_PER_CONNECTION). All-to-all uses PXN: the data of all local
GPUs for GPU k of a remote node leaves through NIC k, so NIC pairs stay on their rail.

A ``CoupledSet`` is a set of connections whose QPs move the same bytes and progress together (a
ring step finishes when its slowest edge finishes); the engine gives each set one max-min rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Collective(StrEnum):
    ALLREDUCE = "allreduce"
    ALLGATHER = "allgather"
    REDUCESCATTER = "reducescatter"
    ALLTOALL = "alltoall"
    SENDRECV = "sendrecv"  # pipeline parallelism: each stage sends to the next, gradients come back


class Algorithm(StrEnum):
    RING = "ring"
    TREE = "tree"


#: NCCL's name of each collective in COLL log lines; all-to-all and send/recv log Send/Recv.
NCCL_OP_NAMES = {Collective.ALLREDUCE: "AllReduce", Collective.ALLGATHER: "AllGather",
                 Collective.REDUCESCATTER: "ReduceScatter"}


@dataclass(frozen=True, order=True)
class Conn:
    """One directed NCCL network connection (send comm -> recv comm) between two NICs of a job.

    ``kind`` is "ring", "tree" or "p2p"; ``channel`` is the NCCL channel id (unique per rail).
    """

    kind: str
    rail: int
    channel: int
    src_node: int
    dst_node: int


@dataclass(frozen=True)
class CoupledSet:
    """Connections whose every QP carries ``bytes_per_qp`` payload bytes at one common rate."""

    conns: tuple[Conn, ...]
    bytes_per_qp: int


def btree(nranks: int, rank: int) -> tuple[int, int, int]:
    """NCCL's binary tree (src/graph/trees.cc ncclGetBtree): (parent, child0, child1), -1 = none.

    Root 0; the tree is built on the bit pattern of ranks so that it is balanced for any nranks.
    """
    bit = 1
    while bit < nranks:
        if bit & rank:
            break
        bit <<= 1
    if rank == 0:
        return -1, -1, (bit >> 1) if nranks > 1 else -1
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    lowbit = bit >> 1
    down0 = -1 if lowbit == 0 else rank - lowbit
    down1 = -1 if lowbit == 0 else rank + lowbit
    while down1 >= nranks:
        down1 = -1 if lowbit == 0 else rank + lowbit
        lowbit >>= 1
    return up, down0, down1


def dtree_parents(nranks: int) -> tuple[list[int], list[int]]:
    """Parent of every rank in NCCL's double binary tree (ncclGetDtree): tree 0, tree 1 (-1 = root).

    Tree 1 is tree 0 mirrored (even nranks) or shifted by one (odd), so that a rank that is a leaf
    in one tree is an inner node of the other.
    """
    t0 = [btree(nranks, r)[0] for r in range(nranks)]
    t1 = []
    for r in range(nranks):
        if nranks % 2 == 1:
            u = btree(nranks, (r - 1 + nranks) % nranks)[0]
            t1.append(-1 if u == -1 else (u + 1) % nranks)
        else:
            u = btree(nranks, nranks - 1 - r)[0]
            t1.append(-1 if u == -1 else nranks - 1 - u)
    return t0, t1


def ring_order(nodes: int) -> list[tuple[int, int]]:
    """Inter-node ring edges (src_node, dst_node) of one rail: 0 -> 1 -> ... -> n-1 -> 0."""
    if nodes < 2:
        return []
    return [(i, (i + 1) % nodes) for i in range(nodes)]


def per_rank_bytes(collective: Collective, size: int, nranks: int) -> float:
    """Bytes one rank sends in total for a per-rank buffer of ``size`` bytes (NCCL ring volumes).

    All-reduce 2(n-1)/n S, all-gather / reduce-scatter (n-1)/n S, all-to-all (n-1)/n S (S/n to
    each peer), send/recv S.
    """
    n = nranks
    if collective is Collective.ALLREDUCE:
        return 2 * (n - 1) / n * size
    if collective in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLTOALL):
        return (n - 1) / n * size
    return float(size)


def op_sets(collective: Collective, algorithm: Algorithm, size: int, nodes: int, rails: int,
            channels: int, qps: int) -> list[CoupledSet]:
    """The network transfers of one collective of ``size`` bytes per rank (see module docstring)."""
    n = nodes * rails
    if nodes < 2 or size <= 0:
        return []  # everything stays inside the node (NVLink)
    split = rails * channels * qps
    sets: list[CoupledSet] = []
    if collective is Collective.ALLREDUCE and algorithm is Algorithm.TREE:
        # Each of the two trees reduces half the buffer up and broadcasts it down, pipelined:
        # every edge carries the half in both directions and the tree runs at its slowest edge.
        per_qp = round(size / (2 * split))
        parents = dtree_parents(nodes)
        for k in range(rails):
            for j in range(channels):
                for t, parent in enumerate(parents):
                    ch = 2 * j + t
                    conns = []
                    for child, p in enumerate(parent):
                        if p >= 0:
                            conns.append(Conn("tree", k, ch, child, p))
                            conns.append(Conn("tree", k, ch, p, child))
                    sets.append(CoupledSet(tuple(conns), per_qp))
        return sets
    if collective in (Collective.ALLREDUCE, Collective.ALLGATHER, Collective.REDUCESCATTER):
        per_qp = round(per_rank_bytes(collective, size, n) / split)
        for k in range(rails):
            for j in range(channels):
                conns = tuple(Conn("ring", k, j, a, b) for a, b in ring_order(nodes))
                sets.append(CoupledSet(conns, per_qp))
        return sets
    if collective is Collective.ALLTOALL:
        # PXN: NIC k of node a carries what all `rails` local GPUs send to GPU k of node b.
        per_qp = round(rails * size / n / (channels * qps))
        for k in range(rails):
            for j in range(channels):
                for a in range(nodes):
                    for b in range(nodes):
                        if a != b:
                            sets.append(CoupledSet((Conn("p2p", k, j, a, b),), per_qp))
        return sets
    # Send/recv between pipeline stages (stage i = node i): activations forward, gradients back.
    per_qp = round(size / (channels * qps))
    for k in range(rails):
        for j in range(channels):
            for a in range(nodes - 1):
                sets.append(CoupledSet((Conn("p2p", k, j, a, a + 1),), per_qp))
                sets.append(CoupledSet((Conn("p2p", k, j, a + 1, a),), per_qp))
    return sets
