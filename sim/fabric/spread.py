"""Flows through spraying or adaptive switches: their tree of paths, and how a tick's bytes go down it.

A switch in hash mode ``spray`` or ``adaptive`` (``schemas.ecmp_hash.HashMode``) forwards no flow on one
member: it deals the flow's packets over all members of its group (``sim/fabric/spray.py`` has the two
policies). Every other switch hashes as ``Fabric.hash_path`` does. So a flow's route is a tree: hashed hops
down to the first spreading switch, one branch per member, and so on. Each leaf of the tree is one full
path, with the next-hop links and (ECMP group, member position) hops the counters and ground truth need.

Rates: the fluid model gives a spread flow one rate; each link carries it with weight equal to the flow's
expected share there (1/k per spreading hop of k members), the max-min solver's weighted entries. The bytes
of a tick are then dealt by the policies, whole packets, so per-member bytes follow the policy exactly and
sum to the flow's bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from flowtracer.fabric.ecmp_hash import SPREAD_MODES, HashMode, HeaderFields
from flowtracer.fabric.routing import Fabric, link_id
from flowtracer.fabric.topology import Topology
from flowtracer.sim.fabric.spray import least_loaded, round_robin, share


@dataclass(frozen=True)
class SpreadPath:
    """One full path of a spread flow: link indexes, its next-hop links and (group id, member position) hops."""

    links: tuple[int, ...]
    nh_hops: tuple[int, ...]
    group_hops: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class SpreadNode:
    """Where a flow's packets are dealt: ``switch`` in ``mode`` over ``branches`` (member order; each the
    member's link index and the subtree below it), or a leaf holding ``path``."""

    switch: str = ""
    mode: HashMode | None = None
    branches: tuple[tuple[int, SpreadNode], ...] = ()
    path: SpreadPath | None = None


@dataclass(frozen=True)
class SpreadRoute:
    """A spread flow's tree and what the rate model needs: every link with the flow's expected share on it."""

    root: SpreadNode
    link_shares: Mapping[int, float] = field(default_factory=dict)

    @property
    def links(self) -> tuple[int, ...]:
        return tuple(self.link_shares)


def ecmp_hops(fabric: Fabric, ids: tuple[str, ...], dst_leaf: str,
              link_index: Mapping[str, int]) -> tuple[tuple[int, ...], tuple[tuple[str, int], ...]]:
    """The hops of a path (directed link ids) that an ECMP group chose: next-hop link indexes and
    (group id, member position). A shrunk group still forwards through its remaining members."""
    nh, gh = [], []
    for lid in ids[1:-1]:
        group = fabric.group_of(fabric.links[lid].src_node, dst_leaf)
        pos = next((i for i, m in enumerate(group.members) if m.id == lid), None) if group else None
        if group is not None and pos is not None:
            nh.append(link_index[lid])
            gh.append((group.id, pos))
    return tuple(nh), tuple(gh)


def spread_route(fabric: Fabric, modes: Mapping[str, HashMode], headers: HeaderFields, src_nic: str, dst_nic: str,
                 link_index: Mapping[str, int], down: frozenset[str] = frozenset()) -> SpreadRoute | None:
    """The tree of a flow whose path crosses a spreading switch (``modes``: switch -> mode, spreading ones only);
    None when no spreading switch with more than one member is on its way or the destination is unreachable."""
    src, dst = fabric.nics[src_nic], fabric.nics[dst_nic]
    up = link_id(src.host, src.nic.rdma_device, src.leaf, src.leaf_port)
    last = link_id(dst.leaf, dst.leaf_port, dst.host, dst.nic.rdma_device)
    if up in down or last in down:
        return None
    shares: dict[int, float] = {}
    spreads = False

    def walk(at: str, ids: tuple[str, ...], weight: float, budget: int) -> SpreadNode | None:
        nonlocal spreads
        while at != dst.leaf:
            members = fabric.next_hops(at, dst.leaf, down)
            if not members or budget <= 0:
                return None
            budget -= 1
            if len(members) > 1 and modes.get(at) in SPREAD_MODES:
                spreads = True
                branches = []
                for m in members:
                    sub = walk(m.dst_node, (*ids, m.id), weight / len(members), budget)
                    if sub is None:
                        return None
                    branches.append((link_index[m.id], sub))
                return SpreadNode(at, modes[at], tuple(branches))
            hop = members[fabric.hash_model(at).member(headers, len(members))] if len(members) > 1 else members[0]
            ids = (*ids, hop.id)
            at = hop.dst_node
        full = (*ids, last)
        for lid in full:
            shares[link_index[lid]] = shares.get(link_index[lid], 0.0) + weight
        nh, gh = ecmp_hops(fabric, full, dst.leaf, link_index)
        return SpreadNode(path=SpreadPath(tuple(link_index[i] for i in full), nh, gh))

    root = walk(src.leaf, (up,), 1.0, len(fabric.out_links))
    if root is None or not spreads:
        return None
    return SpreadRoute(root, shares)


Dealt = list[tuple[SpreadPath, int, int, int]]
"""A tick of one spread flow: (path, payload bytes, frame bytes, packets) per path that carried packets."""


def deal(route: SpreadRoute, payload: int, wire: int, packets: int, link_bytes: np.ndarray,
         cursors: dict[str, int]) -> Dealt:
    """Deal one flow's tick (payload and frame bytes, packets) down its tree. ``link_bytes`` (bytes per link
    index, the tick so far) is what ``least_loaded`` compares and is updated with this flow's bytes;
    ``cursors`` (switch -> next member) is the flow's round-robin state, updated: one cursor per switch, as
    the switch deals the flow's packets in turn whichever member brought them."""
    out: Dealt = []
    packet_bytes = wire / packets if packets else 0.0

    def down(node: SpreadNode, pl: int, wb: int, pk: int) -> None:
        if node.path is not None:
            for li in node.path.links:
                link_bytes[li] += wb
            out.append((node.path, pl, wb, pk))
            return
        k = len(node.branches)
        if node.mode is HashMode.ADAPTIVE:
            counts = least_loaded(pk, packet_bytes, [float(link_bytes[li]) for li, _ in node.branches])
        else:
            cur = cursors.get(node.switch, 0)
            counts = round_robin(pk, k, cur)
            cursors[node.switch] = (cur + pk) % k
        for (_li, sub), c, p_l, w_b in zip(node.branches, counts, share(pl, counts), share(wb, counts), strict=True):
            if c > 0:
                down(sub, p_l, w_b, c)

    down(route.root, payload, wire, packets)
    return out


def spread_modes(topology: Topology) -> dict[str, HashMode]:
    """The spreading switches of a topology and their modes (empty for a fabric that only hashes)."""
    return {s.name: m for s in topology.switches if (m := topology.hash_mode(s.name)) in SPREAD_MODES}
