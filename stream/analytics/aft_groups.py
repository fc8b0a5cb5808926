"""A switch's ECMP groups as its streamed AFT says, else as the topology says (pure).

The collectors put every AFT next hop that has counters into the CounterBatch (``next_hops``): its egress
interface, the next-hop groups it is a member of (``group``, ids joined by ",") and its weight in each
(``group_weights``). From one batch this module reads:

- the switch's groups: the next hops sharing an AFT group id are one group, its members the directed links their
  egress ports transmit on (the topology names them), its weights the AFT's. AFT groups with the same members and
  weights are one group (switches keep a group per prefix). A group is named by the topology's rule
  (``group_id``: switch and neighbor switches), so a group the AFT and the topology agree on keeps its id; a group
  of one member is kept only when it is what is left of a topology group (its shrinking is news);
- the member loads: each member link's octets-forwarded delta over the hop, where trusted.

A switch that streams no next hops, or next hops in no group at all (it does not stream group membership), keeps the
topology's groups; weights then come from the topology's ``ecmp_groups`` (1 where it has none). Interface out-octets
remain the load source wherever a member has no trusted next-hop delta.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from flowtracer.fabric.routing import DirectedLink, EcmpGroup, Fabric, group_id, natural_key
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import analytics_pb2, counters_pb2
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.analytics.window_delta import window_delta

GROUP_SOURCE_AFT = "aft"
GROUP_SOURCE_TOPOLOGY = "topology"
LOAD_SOURCE_NEXT_HOPS = "next_hop_counters"
LOAD_SOURCE_INTERFACES = "interface_counters"
LOAD_SOURCE_MIXED = "mixed"


@dataclass(frozen=True)
class WeightedGroup:
    """An ECMP group with its members' weights (member order) and where both came from (``GROUP_SOURCE_*``)."""

    group: EcmpGroup
    weights: tuple[int, ...]
    source: str

    def port_weights(self) -> dict[str, int]:
        """Egress port -> weight."""
        return {m.src_port: w for m, w in zip(self.group.members, self.weights, strict=True)}


@dataclass(frozen=True)
class AftView:
    """What one CounterBatch's next hops say about its switch.

    ``groups``: per distinct AFT group, egress port -> weight (in first-seen order); ``nh_bytes``: directed link id
    -> bytes forwarded over the hop (trusted octets-forwarded deltas, summed over the link's next hops).
    """

    switch: str
    groups: tuple[Mapping[str, int], ...]
    nh_bytes: Mapping[str, int]


def read_aft(batch: counters_pb2.CounterBatch, links: LinkIndex, hop_ns: int) -> AftView | None:
    """The batch's AFT view, or None when it carries no next hops (the switch streams no AFT)."""
    if not batch.next_hops:
        return None
    sw = batch.switch
    by_id: dict[str, dict[str, int]] = {}
    nh_bytes: dict[str, int] = {}
    for nh in batch.next_hops:
        ids = [g for g in nh.group.split(",") if g]
        # A collector older than group_weights sent the first group's weight only.
        weights = list(nh.group_weights) if len(nh.group_weights) == len(ids) else [nh.weight] * len(ids)
        for gid, w in zip(ids, weights, strict=True):
            ports = by_id.setdefault(gid, {})
            # Two next hops out of one port (two addresses behind it) give that port both shares.
            ports[nh.egress_interface] = ports.get(nh.egress_interface, 0) + max(1, int(w))
        link = links.out_link.get((sw, nh.egress_interface))
        delta = window_delta(nh.octets_forwarded, nh.interval_ns, hop_ns)
        if link is not None and delta is not None:
            nh_bytes[link] = nh_bytes.get(link, 0) + delta
    distinct: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
    for ports in by_id.values():
        distinct.setdefault(tuple(sorted(ports.items())), ports)
    return AftView(sw, tuple(distinct.values()), nh_bytes)


def topology_groups(fabric: Fabric, switches: Iterable[str]) -> dict[str, list[WeightedGroup]]:
    """The topology's groups of ``switches`` with weights from its ``ecmp_groups`` (a spec with exactly the group's
    ports first, else any spec of the switch naming the port, else 1)."""
    specs = fabric.topology.ecmp_groups
    exact = {(s.switch, frozenset(s.members)): s.members for s in specs}
    any_port = {(s.switch, p): w for s in specs for p, w in s.members.items()}
    wanted = set(switches)
    out: dict[str, list[WeightedGroup]] = {sw: [] for sw in sorted(wanted)}
    for g in fabric.ecmp_groups.values():
        if g.switch not in wanted:
            continue
        ports = [m.src_port for m in g.members]
        spec = exact.get((g.switch, frozenset(ports)))
        weights = tuple(spec[p] if spec else any_port.get((g.switch, p), 1) for p in ports)
        out[g.switch].append(WeightedGroup(g, weights, GROUP_SOURCE_TOPOLOGY))
    return out


def best_match(ports: Iterable[str], candidates: Sequence[Mapping[str, int]]) -> int | None:
    """Index of the candidate (port -> weight) sharing most ports with ``ports`` (the first on a tie); None if none
    shares any."""
    want = set(ports)
    best, best_n = None, 0
    for i, c in enumerate(candidates):
        n = len(want.intersection(c))
        if n > best_n:
            best, best_n = i, n
    return best


def switch_groups(view: AftView | None, topology: Sequence[WeightedGroup], links: LinkIndex) -> list[WeightedGroup]:
    """The switch's groups for one window: the AFT's when ``view`` names any group, else ``topology``."""
    if view is None or not view.groups:
        return list(topology)
    fabric = links.fabric
    out: dict[str, WeightedGroup] = {}
    shrunk = {i for t in topology if (i := best_match(t.port_weights(), view.groups)) is not None}
    for i, ports in enumerate(view.groups):
        members: list[tuple[DirectedLink, int]] = []
        for port, w in ports.items():
            lid = links.out_link.get((view.switch, port))
            if lid is not None:
                members.append((fabric.links[lid], w))
        if not members or (len(members) < 2 and i not in shrunk):
            continue
        members.sort(key=lambda m: (natural_key(m[0].dst_node), natural_key(m[0].dst_port)))
        gid = group_id(view.switch, (m.dst_node for m, _ in members))
        if gid in out:
            continue
        t = best_match(ports, [t.port_weights() for t in topology])
        dsts = topology[t].group.destinations if t is not None else ()
        out[gid] = WeightedGroup(EcmpGroup(gid, view.switch, tuple(m for m, _ in members), dsts),
                                 tuple(w for _, w in members), GROUP_SOURCE_AFT)
    return [out[g] for g in sorted(out)]


@dataclass(frozen=True)
class Forwarding:
    """How a switch hashes, as far as its AFT says: the member links its topology groups lost (withdrawn next hops,
    directed link ids) and the weight of every member whose weight is not 1 (link id -> weight)."""

    withdrawn: frozenset[str]
    weights: Mapping[str, int]


def aft_forwarding(switch: str, groups: Sequence[Mapping[str, int]], fabric: Fabric) -> Forwarding:
    """The forwarding ``groups`` (egress port -> weight, per AFT group) give ``switch``: a member of the topology's
    groups that no AFT group names is withdrawn; a next hop in several groups takes its first group's weight (the
    model hashes a link with one weight in every group)."""
    out_link = {dl.src_port: dl.id for dl in fabric.out_links[switch]}
    weights: dict[str, int] = {}
    for ports in groups:
        for port, w in ports.items():
            lid = out_link.get(port)
            if lid is not None:
                weights.setdefault(lid, max(1, int(w)))
    members = {m.id for g in fabric.ecmp_groups.values() if g.switch == switch for m in g.members}
    return Forwarding(frozenset(members - weights.keys()), {lid: w for lid, w in weights.items() if w != 1})


def groups_record(switch: str, groups: Sequence[WeightedGroup], window_start_ns: int,
                  window_end_ns: int) -> analytics_pb2.EcmpGroups:
    """The EcmpGroups record of ``switch``'s live ``groups`` (window bounds in ns since the epoch): members sorted
    by link id with their weights, groups by id; ``group_source`` ``aft`` when any group came from the AFT."""
    rec = analytics_pb2.EcmpGroups(schema_version=SCHEMA_VERSION, window_start_ns=window_start_ns,
                                   window_end_ns=window_end_ns, switch=switch,
                                   group_source=GROUP_SOURCE_AFT if any(g.source == GROUP_SOURCE_AFT for g in groups)
                                   else GROUP_SOURCE_TOPOLOGY)
    for g in sorted(groups, key=lambda g: g.group.id):
        members = sorted(zip((m.id for m in g.group.members), g.weights, strict=True))
        rec.groups.add(group=g.group.id, links=[lid for lid, _ in members], weights=[w for _, w in members])
    return rec


def groups_signature(groups: Sequence[WeightedGroup]) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """What can move a flow in ``groups``: each group's id with its (member link id, weight) pairs, sorted; where
    the groups came from (AFT or topology) is not part of it."""
    return tuple(sorted((g.group.id, tuple(sorted(zip((m.id for m in g.group.members), g.weights, strict=True))))
                        for g in groups))
