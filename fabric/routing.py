"""Routing questions about a validated topology: links, equal-cost paths and ECMP groups.

Model: every cable is two directed links, named ``"<node>:<port>><node>:<port>"`` (transmitting
end first); a host NIC's end is ``"<host>:<rdma_device>"``. Switches route on shortest paths
towards the destination leaf (as BGP in a Clos does); at each switch the equal-cost next hops
toward a destination form an ECMP group. A group is identified by its switch and the set of
neighbor switches it spreads over, ``"leaf1:spine1|spine2"``, because counters can only measure
per member link, not per destination: all destinations that share a member set share the group.

Member order (what ``member index`` refers to in the hash models) is by neighbor name, then port
name, in natural order ("Ethernet2" before "Ethernet10").
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from flowtracer.fabric.ecmp_hash import EcmpHash, HeaderFields
from flowtracer.fabric.topology import Nic, Role, Topology


@functools.lru_cache(maxsize=1 << 16)
def natural_key(s: str) -> tuple[object, ...]:
    """Sort key that orders embedded numbers numerically: Ethernet2 < Ethernet10 (cached: node and port
    names repeat millions of times while a large fabric's groups are built)."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s))


def link_id(src_node: str, src_port: str, dst_node: str, dst_port: str) -> str:
    return f"{src_node}:{src_port}>{dst_node}:{dst_port}"


@dataclass(frozen=True)
class DirectedLink:
    """One direction of a cable. ``speed_bps`` in bit/s."""

    id: str
    src_node: str
    src_port: str
    dst_node: str
    dst_port: str
    speed_bps: int
    host_link: bool  # one end is a host NIC

    @property
    def reverse_id(self) -> str:
        return link_id(self.dst_node, self.dst_port, self.src_node, self.src_port)


@dataclass(frozen=True)
class NicRef:
    """A host NIC with where it attaches."""

    host: str
    nic: Nic

    @property
    def name(self) -> str:
        """``"<host>:<rdma_device>"``, the NIC's node:port name in link ids."""
        return f"{self.host}:{self.nic.rdma_device}"

    @property
    def leaf(self) -> str:
        return self.nic.leaf.split(":", 1)[0]

    @property
    def leaf_port(self) -> str:
        return self.nic.leaf.split(":", 1)[1]


@dataclass(frozen=True)
class EcmpGroup:
    """The equal-cost member links of one switch toward a set of destinations."""

    id: str
    switch: str
    members: tuple[DirectedLink, ...]  # in member order
    destinations: tuple[str, ...] = field(default=())  # destination leaves served


@dataclass
class Fabric:
    """Graph view of a ``Topology``. Paths and groups are computed lazily and cached."""

    topology: Topology
    links: dict[str, DirectedLink] = field(init=False)
    out_links: dict[str, list[DirectedLink]] = field(init=False)
    nics: dict[str, NicRef] = field(init=False)
    nic_by_ip: dict[str, NicRef] = field(init=False)

    def __post_init__(self) -> None:
        topo = self.topology
        self.links = {}
        self.out_links = {s.name: [] for s in topo.switches}
        self.nics = {}
        self.nic_by_ip = {}
        default = topo.defaults.port_speed
        switches = {s.name: s for s in topo.switches}
        for link in topo.links:
            (a, pa), (b, pb) = (link.a.split(":", 1), link.b.split(":", 1))
            speed = link.speed or switches[a].ports.get(pa) or switches[b].ports.get(pb) or default
            assert speed is not None  # the loader guarantees one
            for s, sp, d, dp in ((a, pa, b, pb), (b, pb, a, pa)):
                dl = DirectedLink(link_id(s, sp, d, dp), s, sp, d, dp, speed, False)
                self.links[dl.id] = dl
                self.out_links[s].append(dl)
        for h in topo.hosts:
            for nic in h.nics:
                ref = NicRef(h.name, nic)
                self.nics[ref.name] = ref
                self.nic_by_ip[str(ipaddress.ip_address(nic.ip))] = ref
                up = DirectedLink(link_id(h.name, nic.rdma_device, ref.leaf, ref.leaf_port),
                                  h.name, nic.rdma_device, ref.leaf, ref.leaf_port, nic.speed, True)
                down = DirectedLink(up.reverse_id, ref.leaf, ref.leaf_port, h.name, nic.rdma_device,
                                    nic.speed, True)
                self.links[up.id] = up
                self.links[down.id] = down
                self.out_links[ref.leaf].append(down)
        for lst in self.out_links.values():
            lst.sort(key=lambda d: (natural_key(d.dst_node), natural_key(d.dst_port)))
        self._routes: dict[frozenset[str], dict[tuple[str, str], tuple[DirectedLink, ...]]] = {}
        self._paths: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {}
        self._path_counts: dict[str, dict[str, int]] = {}

    # -- nodes ----------------------------------------------------------------------------------

    @cached_property
    def leaves(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.topology.switches if s.role is Role.LEAF)

    @cached_property
    def switch_names(self) -> frozenset[str]:
        return frozenset(s.name for s in self.topology.switches)

    def hash_model(self, switch: str) -> EcmpHash:
        return self._hash_models[switch]

    @cached_property
    def _hash_models(self) -> dict[str, EcmpHash]:
        return {s.name: self.topology.ecmp_hash(s.name) for s in self.topology.switches}

    # -- routing --------------------------------------------------------------------------------

    def _distances(self, dst_leaf: str, down: frozenset[str]) -> dict[str, int]:
        """Hop count from every switch to ``dst_leaf`` over switch links that are up."""
        dist = {dst_leaf: 0}
        queue = deque([dst_leaf])
        while queue:
            node = queue.popleft()
            for out in self.out_links[node]:
                # Only the neighbor's link toward node matters: a next hop withdrawn at node (one direction, the
                # cable up) leaves the neighbor's route to node intact; a cable down has both directions in down.
                if out.host_link or (down and out.reverse_id in down):
                    continue
                # out goes node -> neighbor; the neighbor reaches node over its reverse link.
                if out.dst_node not in dist:
                    dist[out.dst_node] = dist[node] + 1
                    queue.append(out.dst_node)
        return dist

    def next_hops(self, switch: str, dst_leaf: str, down: frozenset[str] = frozenset()) -> tuple[DirectedLink, ...]:
        """Equal-cost egress links of ``switch`` toward ``dst_leaf`` (member order); () if none."""
        table = self._routes.setdefault(down, {})
        key = (switch, dst_leaf)
        if key not in table:
            dist = self._distances(dst_leaf, down)
            for sw in self.out_links:
                if sw == dst_leaf or sw not in dist:
                    table[(sw, dst_leaf)] = ()
                    continue
                table[(sw, dst_leaf)] = tuple(
                    o for o in self.out_links[sw]
                    if not o.host_link and o.id not in down and dist.get(o.dst_node, -2) == dist[sw] - 1
                )
        return table[key]

    def equal_cost_paths(self, src_nic: str, dst_nic: str) -> tuple[tuple[str, ...], ...]:
        """Every shortest path from one NIC to another, each an ordered tuple of directed link ids."""
        key = (src_nic, dst_nic)
        if key not in self._paths:
            src, dst = self.nics[src_nic], self.nics[dst_nic]
            up = link_id(src.host, src.nic.rdma_device, src.leaf, src.leaf_port)
            down = link_id(dst.leaf, dst.leaf_port, dst.host, dst.nic.rdma_device)
            self._paths[key] = tuple((up, *mid, down) for mid in self._switch_paths(src.leaf, dst.leaf))
        return self._paths[key]

    def _switch_paths(self, at: str, dst_leaf: str) -> Iterator[tuple[str, ...]]:
        if at == dst_leaf:
            yield ()
            return
        for hop in self.next_hops(at, dst_leaf):
            for rest in self._switch_paths(hop.dst_node, dst_leaf):
                yield (hop.id, *rest)

    def path_count(self, src_leaf: str, dst_leaf: str) -> int:
        """Number of equal-cost switch paths from one leaf to another (1 when they are the same)."""
        memo = self._path_counts.setdefault(dst_leaf, {dst_leaf: 1})

        def count(at: str) -> int:
            if at not in memo:
                memo[at] = sum(count(hop.dst_node) for hop in self.next_hops(at, dst_leaf))
            return memo[at]

        return count(src_leaf)

    def hash_path(self, headers: HeaderFields, src_nic: str, dst_nic: str,
                  down: frozenset[str] = frozenset(),
                  hash_models: dict[str, EcmpHash] | None = None,
                  weights: Mapping[str, int] | None = None) -> tuple[str, ...] | None:
        """The path a flow takes when every switch applies its ECMP hash, hop by hop.

        ``down`` holds directed link ids that are out of service (groups shrink and flows
        rehash); ``hash_models`` overrides the topology's hash per switch (what-if); ``weights``
        gives a member link's weight in its group (absent: 1), see ``weighted_members``. Returns
        None when the destination is unreachable.
        """
        models = hash_models or self._hash_models
        src, dst = self.nics[src_nic], self.nics[dst_nic]
        up = link_id(src.host, src.nic.rdma_device, src.leaf, src.leaf_port)
        down_link = link_id(dst.leaf, dst.leaf_port, dst.host, dst.nic.rdma_device)
        if up in down or down_link in down:
            return None
        path = [up]
        at = src.leaf
        for _ in range(len(self.out_links)):
            if at == dst.leaf:
                path.append(down_link)
                return tuple(path)
            members = self.next_hops(at, dst.leaf, down)
            if not members:
                return None
            if weights:
                members = weighted_members(members, weights)
            hop = members[models[at].member(headers, len(members))] if len(members) > 1 else members[0]
            path.append(hop.id)
            at = hop.dst_node
        return None

    # -- ECMP groups ----------------------------------------------------------------------------

    @cached_property
    def ecmp_groups(self) -> dict[str, EcmpGroup]:
        """Every ECMP group with more than one member, by id, with the destinations it serves."""
        found: dict[str, tuple[str, tuple[DirectedLink, ...], list[str]]] = {}
        for dst in self.leaves:
            for sw in self.out_links:
                members = self.next_hops(sw, dst)
                if len(members) < 2:
                    continue
                gid = group_id(sw, (m.dst_node for m in members))
                entry = found.setdefault(gid, (sw, members, []))
                entry[2].append(dst)
        return {gid: EcmpGroup(gid, sw, members, tuple(dsts)) for gid, (sw, members, dsts) in sorted(found.items())}

    def group_of(self, switch: str, dst_leaf: str) -> EcmpGroup | None:
        """The group ``switch`` uses toward ``dst_leaf``, or None when there is a single next hop."""
        members = self.next_hops(switch, dst_leaf)
        if len(members) < 2:
            return None
        return self.ecmp_groups[group_id(switch, (m.dst_node for m in members))]

    def switch_links(self) -> Iterable[DirectedLink]:
        return (dl for dl in self.links.values() if not dl.host_link)


def weighted_members(members: Sequence[DirectedLink], weights: Mapping[str, int]) -> tuple[DirectedLink, ...]:
    """The group's hash table: each member repeated by its weight (link id -> weight, absent: 1), in member order.

    Weighted ECMP as many ASICs program it (weighted cost multipath by replicating a member's entry in the group
    table): the hash selects an entry over the table's length, so a member of weight 2 draws about twice the flows.
    With every weight 1 the table is the member list and the selection is plain ECMP's.
    """
    return tuple(m for m in members for _ in range(max(1, weights.get(m.id, 1))))


def group_id(switch: str, neighbors: Iterable[str]) -> str:
    """``"<switch>:<neighbor>|<neighbor>..."`` with neighbors in natural order, each once.

    Member tuples from ``next_hops`` are already in natural neighbor order, so for them this is a
    de-duplication of consecutive names; other callers get the same result from the sort.
    """
    names = list(dict.fromkeys(neighbors))
    if any(natural_key(a) > natural_key(b) for a, b in itertools.pairwise(names)):
        names.sort(key=natural_key)
    return f"{switch}:" + "|".join(names)


def summarize(fabric: Fabric) -> dict[str, object]:
    """Counts a person checks a fabric by: switches per role, NICs, links, groups, paths, oversubscription.

    ``paths_between_leaves`` is the min/max number of equal-cost switch paths over all ordered
    pairs of distinct leaves that host NICs; ``oversubscription`` is the max over leaves of host
    capacity / uplink capacity (1.0 = non-blocking).
    """
    topo = fabric.topology
    roles: dict[str, int] = {}
    for s in topo.switches:
        roles[s.role.value] = roles.get(s.role.value, 0) + 1
    host_leaves = sorted({n.leaf for n in fabric.nics.values()}, key=natural_key)
    counts = [fabric.path_count(a, b) for a in host_leaves for b in host_leaves if a != b]
    over = 0.0
    for leaf in fabric.leaves:
        down = sum(o.speed_bps for o in fabric.out_links[leaf] if o.host_link)
        up = sum(o.speed_bps for o in fabric.out_links[leaf] if not o.host_link)
        if up:
            over = max(over, down / up)
    return {
        "name": topo.name,
        "switches": roles,
        "hosts": len(topo.hosts),
        "nics": len(fabric.nics),
        "rails": len({n.nic.rail for n in fabric.nics.values()}),
        "switch_links": sum(1 for _ in fabric.switch_links()) // 2,
        "ecmp_groups": len(fabric.ecmp_groups),
        "paths_between_leaves": [min(counts), max(counts)] if counts else [1, 1],
        "oversubscription": round(over, 3),
    }
