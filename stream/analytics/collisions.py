"""Per ECMP group: member loads per hop, the rolling FIM samples, and collisions (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowtracer.fabric.routing import EcmpGroup
from flowtracer.schemas.bounds import saturating_round
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import analytics_pb2, common_pb2
from flowtracer.stream.analytics.aft_groups import (
    LOAD_SOURCE_INTERFACES,
    LOAD_SOURCE_MIXED,
    LOAD_SOURCE_NEXT_HOPS,
    WeightedGroup,
)
from flowtracer.stream.analytics.attribution import Share
from flowtracer.stream.analytics.fim import fim, imbalance
from flowtracer.stream.resolvers.contract import SPRAYED_METHOD


@dataclass(frozen=True)
class GroupHop:
    """One group's member loads in one hop, in member order. Bytes; ``measured`` None when untrusted;
    ``load_source`` which counters measured it (``aft_groups.LOAD_SOURCE_*``, empty when untrusted)."""

    measured: tuple[int, ...] | None
    attributed: tuple[float, ...]
    flows: tuple[int, ...]
    load_source: str = ""


def group_hop(group: EcmpGroup, measured: Mapping[str, int], shares: Mapping[str, Share],
              nh_measured: Mapping[str, int] | None = None) -> GroupHop:
    """Member loads of ``group``: measured from the next-hop counters (``nh_measured``, bytes per member link)
    when every member has a trusted one (they count what the group's ECMP decision forwarded), else from the
    interface counters (``measured``) when every member has a trusted delta, else untrusted."""
    ids = [m.id for m in group.members]
    meas, source = None, ""
    if nh_measured is not None and all(i in nh_measured for i in ids):
        meas, source = tuple(nh_measured[i] for i in ids), LOAD_SOURCE_NEXT_HOPS
    elif all(i in measured for i in ids):
        meas, source = tuple(measured[i] for i in ids), LOAD_SOURCE_INTERFACES
    attr = tuple(shares[i].bytes if i in shares else 0.0 for i in ids)
    flows = tuple(shares[i].flow_count if i in shares else 0 for i in ids)
    return GroupHop(meas, attr, flows, source)


class GroupHistory:
    """The last ``hops`` GroupHops of each group, keyed by window end: the rolling FIM's state."""

    def __init__(self, hops: int) -> None:
        self.hops = hops
        self._h: dict[str, dict[int, GroupHop]] = {}

    def add(self, group: str, window_end_ns: int, hop: GroupHop, hop_ns: int) -> list[GroupHop]:
        """Record a hop (a replay overwrites) and return the hops of the rolling window ending here.

        Hops of another member count are dropped: the group changed (a member of a parallel pair withdrawn keeps
        the group's id), and loads of other members cannot be summed with these."""
        h = self._h.setdefault(group, {})
        h[window_end_ns] = hop
        oldest = window_end_ns - self.hops * hop_ns
        width = len(hop.attributed)
        for end in [e for e in h if e <= oldest or len(h[e].attributed) != width]:
            del h[end]
        return [h[e] for e in sorted(h) if e <= window_end_ns]

    def state(self) -> dict[str, Any]:
        return {g: {str(e): [list(h.measured) if h.measured is not None else None, list(h.attributed),
                             list(h.flows), h.load_source] for e, h in hops.items()} for g, hops in self._h.items()}

    def restore(self, state: Mapping[str, Any]) -> None:
        # A state written before load sources were kept has three items per hop.
        self._h = {g: {int(e): GroupHop(tuple(v[0]) if v[0] is not None else None, tuple(v[1]), tuple(v[2]),
                                        v[3] if len(v) > 3 else LOAD_SOURCE_INTERFACES)
                       for e, v in hops.items()} for g, hops in state.items()}


def fim_samples(group: EcmpGroup | WeightedGroup, hops: Sequence[GroupHop], window_start_ns: int,
                window_end_ns: int, resolver: str = "") -> list[analytics_pb2.FimSample]:
    """Rolling FimSamples (measured and attributed basis) of a group over ``hops``, against its weights (a plain
    EcmpGroup: equal weights, source unsaid)."""
    wg = group if isinstance(group, WeightedGroup) else WeightedGroup(group, (1,) * len(group.members), "")
    out = []
    valid = [h for h in hops if h.measured is not None]
    if valid:
        # Hops without trusted counters (a baseline after a reconnect, a gap) are left out, and the rest
        # scaled to the whole window, so the group keeps its byte weight in the fabric FIM.
        x = np.sum(np.asarray([h.measured for h in valid], dtype=np.float64), axis=0) * (len(hops) / len(valid))
        s = _sample(wg, analytics_pb2.LOAD_BASIS_MEASURED, x, None, window_start_ns, window_end_ns)
        sources = {h.load_source for h in valid}
        s.load_source = sources.pop() if len(sources) == 1 else LOAD_SOURCE_MIXED
        out.append(s)
    if hops:
        x = np.sum(np.asarray([h.attributed for h in hops], dtype=np.float64), axis=0)
        flows = np.mean(np.asarray([h.flows for h in hops], dtype=np.float64), axis=0)
        s = _sample(wg, analytics_pb2.LOAD_BASIS_ATTRIBUTED, x, flows, window_start_ns, window_end_ns)
        s.resolver = resolver
        out.append(s)
    return out


def _sample(wg: WeightedGroup, basis: int, x: np.ndarray, flows: np.ndarray | None,
            start: int, end: int) -> analytics_pb2.FimSample:
    group = wg.group
    links = [m.id for m in group.members]
    im = imbalance(x, wg.weights)
    return analytics_pb2.FimSample(
        schema_version=SCHEMA_VERSION, window_start_ns=start, window_end_ns=end, group=group.id,
        switch=group.switch, basis=basis, members=len(links), fim=im.fim,
        fim_flows=fim(flows, wg.weights) if flows is not None else 0.0, max_mean_ratio=im.max_mean_ratio, cv=im.cv,
        total_bytes=saturating_round(im.total), member_links=links,
        member_bytes=[saturating_round(v) for v in x],
        member_weights=list(wg.weights), group_source=wg.source)


@dataclass(frozen=True)
class CollisionRule:
    """When flows collide on a member (docs/stream.md, "Collisions").

    A flow counts on a member only when it is *certainly* there: its placement's confidence is at
    least ``min_confidence`` and the placement puts the flow's bytes on that one member (its
    ``link_share`` there is at least ``whole_share``; a flow split over members is an uncertain
    placement, never a heavy flow). Such a flow is heavy when its bytes on the member fill
    ``heavy_share`` of the member's capacity in the hop. A collision is a member with ``min_flows`` or
    more heavy flows while a sibling has at least two fewer (moving one flow over would lower the
    busiest member's load).
    """

    heavy_share: float = 0.1
    min_flows: int = 2
    max_flows_reported: int = 16
    min_confidence: float = 0.9
    whole_share: float = 0.999  # a link share this close to 1 is the whole flow (rounding of path weights)


def certain(ref: common_pb2.FlowRef, rule: CollisionRule) -> bool:
    """Whether ``ref``'s placement is certain enough to claim the flow is on this member: confident and whole, and
    not a sprayed flow (its packets take every member: it is on none of them as a whole flow)."""
    return (ref.confidence >= rule.min_confidence and ref.link_share >= rule.whole_share
            and ref.method != SPRAYED_METHOD)


def find_collision(group: EcmpGroup, hop: GroupHop, member_flows: Mapping[str, Sequence[common_pb2.FlowRef]],
                   hop_ns: int, rule: CollisionRule, window_start_ns: int, window_end_ns: int,
                   resolver: str) -> analytics_pb2.Collision | None:
    """The group's collision in this hop, if any: its busiest member and least used sibling.

    ``member_flows`` maps a member link to the flows placed on it, each FlowRef's ``bytes`` being
    its bytes on that link in the hop, with the ``confidence`` and ``link_share`` of its placement.
    Only certain placements (:func:`certain`) count; the collision's ``confidence`` is the lowest of
    its flows'.
    """
    seconds = hop_ns / 1e9
    heavy: list[list[common_pb2.FlowRef]] = []
    util: list[float] = []
    for i, m in enumerate(group.members):
        cap_bytes = m.speed_bps / 8 * seconds
        flows = member_flows.get(m.id, ())
        heavy.append([f for f in flows if f.bytes >= rule.heavy_share * cap_bytes and certain(f, rule)])
        used = hop.measured[i] if hop.measured is not None else hop.attributed[i]
        util.append(used / cap_bytes if cap_bytes else 0.0)
    counts = [len(h) for h in heavy]
    busiest = max(range(len(counts)), key=lambda i: (counts[i], util[i]))
    idle = min(range(len(counts)), key=lambda i: (counts[i], util[i]))
    if counts[busiest] < rule.min_flows or counts[idle] > counts[busiest] - 2:
        return None
    return analytics_pb2.Collision(
        schema_version=SCHEMA_VERSION, window_start_ns=window_start_ns, window_end_ns=window_end_ns,
        switch=group.switch, group=group.id, link=group.members[busiest].id, link_utilization=util[busiest],
        idle_link=group.members[idle].id, idle_utilization=util[idle],
        flows=sorted(heavy[busiest], key=ref_order)[:rule.max_flows_reported], resolver=resolver,
        confidence=min(f.confidence for f in heavy[busiest]))


def ref_order(ref: common_pb2.FlowRef) -> tuple[int, str, str, int, int]:
    """Heaviest first; ties broken by flow identity so that a replay reports the same list."""
    return (-ref.bytes, ref.key.src_ip, ref.key.dst_ip, ref.key.udp_src_port, ref.lqpn)
