"""Why a link was congested in one window: one cause per congested link, with its evidence (pure).

A link is **congested** in a window when its LinkCongestion shows, on the RoCE priority, PFC pauses received (its
receiver stopped it: *paused*), ECN marks or drops (its own egress queue built up: *queued*). Two steps:

1. Per counters partition (:func:`congested_link`): a congested link's signals plus what that partition alone
   knows: the link's measured utilization this window and the previous one (if congested then too), the flows
   placed on it, how many NICs send them and the one NIC they all go to if they do (from every flows
   partition's attributions), its ECMP sibling with the most room.
2. Fabric-wide (:func:`congestion_causes`), over every partition's congested links, first match wins:

   - ``pause_spread``: the link is paused. PFC is followed downstream, hop by hop, to where it started: from the
     link's receiving node, over the congested links it transmits on (paused ones first: a paused port holding
     its queue at Xoff is what pauses its feeders; only where none is paused, queued ones), breadth first. It
     ends at a link paused by a host NIC (origin: that NIC, which stopped draining) or at a link that is queued
     but not paused (origin: that switch port, whose own queue crossed Xoff). ``spread_links`` is the chain
     from this link to the origin's link. A paused link whose chain ends nowhere (nothing downstream reported
     congested) is ``unknown``.
   - ``degraded_link``: queued, and its measured utilization stayed below ``degraded`` of nominal in this and the
     previous window (congested too), within ``plateau`` of each other: the link carries a constant rate below
     its speed while its queue says more is offered than it carries (a link running at its nominal speed with a
     queue is oversubscribed, not degraded). A window where traffic starts or stops is not a plateau.
   - ``incast``: queued, and the flows placed on it all go to one NIC from two or more NICs (origin: that NIC);
     without the flows' ends (no attributions), a leaf's downlink to a host carrying more than one flow.
   - ``collision``: queued, an ECMP member carrying more than one flow, while a sibling member is not congested
     and below ``room`` utilization.
   - ``unknown``: none of these (e.g. oversubscribed everywhere, or the evidence is missing).

Utilizations are 0..1 of the link's nominal speed, -1 when not measured; counts are packets / frames.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import analytics_pb2, internal_pb2

UNKNOWN = -1.0
"""Utilization not measured."""

CAUSES = ("collision", "incast", "degraded_link", "pause_spread", "unknown")
"""Every value of ``CongestionCause.cause``."""


@dataclass(frozen=True)
class CauseRule:
    """Thresholds of the cause rules (fractions of a link's nominal speed)."""

    room: float = 0.9
    """A sibling below this utilization, and not congested, has room."""
    degraded: float = 0.8
    """A queued link below this utilization in two windows running may be degraded."""
    plateau: float = 0.1
    """... if its two utilizations are within this of each other."""


def paused(lc: analytics_pb2.LinkCongestion) -> bool:
    """The link's receiver sent it PFC pauses (RoCE priority) in the window."""
    return lc.pfc_valid and lc.pfc_pauses_received_roce > 0


def queued(lc: analytics_pb2.LinkCongestion) -> bool:
    """The link's egress queue marked ECN or dropped (RoCE priority) in the window."""
    return (lc.ecn_valid and lc.ecn_marked_pkts_roce > 0) or (lc.drops_valid and lc.dropped_pkts_roce > 0)


def congested(lc: analytics_pb2.LinkCongestion) -> bool:
    """Paused or queued: the link gets a CongestionCause."""
    return paused(lc) or queued(lc)


def congested_link(lc: analytics_pb2.LinkCongestion, utilization: Mapping[str, float],
                   previous: Mapping[str, float], flow_count: int, sources: int, destination: str,
                   siblings: Iterable[str], congested_ids: set[str], to_host: bool) -> internal_pb2.CongestedLink:
    """The evidence of one congested link its counters partition sends to the fabric-wide step.

    ``utilization`` / ``previous``: link id -> measured utilization this window (measured links) / the previous
    one (links congested then); ``sources``: the distinct NICs sending the flows placed on it, ``destination``: the
    one NIC they all go to ("" when several); ``siblings``: the other members of its ECMP groups;
    ``congested_ids``: the partition's congested links this window.
    """
    out = internal_pb2.CongestedLink(
        utilization=utilization.get(lc.link, UNKNOWN), previous_utilization=previous.get(lc.link, UNKNOWN),
        flow_count=flow_count, sources=sources, destination=destination, to_host=to_host,
        sibling_utilization=UNKNOWN)
    out.congestion.CopyFrom(lc)
    measured = sorted((utilization[s], s) for s in set(siblings) if s in utilization and s != lc.link)
    if measured:
        out.sibling_utilization, out.sibling = measured[0]
        out.sibling_congested = out.sibling in congested_ids
    return out


def _pct(u: float) -> str:
    return "unmeasured" if u < 0 else f"{u:.0%}"


def _origin_of(link: internal_pb2.CongestedLink) -> str | None:
    """Where a pause starts if it reaches ``link``: the NIC that paused it, the port whose queue filled, or None
    (the link is itself paused by a switch: the pause goes on downstream)."""
    lc = link.congestion
    if paused(lc):
        return f"{lc.dst_node}:{lc.dst_port}" if link.to_host else None
    return f"{lc.src_node}:{lc.src_port}"


def _follow(start: internal_pb2.CongestedLink,
            by_src: Mapping[str, list[internal_pb2.CongestedLink]]) -> tuple[str, list[str]] | None:
    """(origin, links from ``start`` to the origin's link) of the pause on ``start``, or None if it ends nowhere."""
    origin = _origin_of(start)
    if origin is not None:
        return origin, [start.congestion.link]
    seen = {start.congestion.link}
    todo: deque[tuple[internal_pb2.CongestedLink, list[str]]] = deque([(start, [start.congestion.link])])
    while todo:
        link, chain = todo.popleft()
        lc = link.congestion
        nxt = [m for m in by_src.get(lc.dst_node, ()) if m.congestion.dst_node != lc.src_node]  # flows never U-turn
        hold = [m for m in nxt if paused(m.congestion)]
        for m in hold or nxt:
            mid = m.congestion.link
            if mid in seen:
                continue
            seen.add(mid)
            origin = _origin_of(m)
            if origin is not None:
                return origin, [*chain, mid]
            todo.append((m, [*chain, mid]))
    return None


def congestion_causes(links: Sequence[internal_pb2.CongestedLink], window_start_ns: int, window_end_ns: int,
                      rule: CauseRule | None = None) -> list[analytics_pb2.CongestionCause]:
    """One CongestionCause per congested link of the window (ns), sorted by link id."""
    rule = rule or CauseRule()
    by_src: dict[str, list[internal_pb2.CongestedLink]] = {}
    for link in sorted(links, key=lambda x: x.congestion.link):
        by_src.setdefault(link.congestion.src_node, []).append(link)
    out = []
    for link in sorted(links, key=lambda x: x.congestion.link):
        lc = link.congestion
        if not congested(lc):
            continue
        c = analytics_pb2.CongestionCause(
            schema_version=SCHEMA_VERSION, window_start_ns=window_start_ns, window_end_ns=window_end_ns,
            link=lc.link, src_node=lc.src_node, src_port=lc.src_port, dst_node=lc.dst_node, dst_port=lc.dst_port,
            pfc_pauses_received=lc.pfc_pauses_received_roce if lc.pfc_valid else 0,
            ecn_marked_pkts=lc.ecn_marked_pkts_roce if lc.ecn_valid else 0,
            dropped_pkts=lc.dropped_pkts_roce if lc.drops_valid else 0,
            utilization=link.utilization, previous_utilization=link.previous_utilization,
            flow_count=link.flow_count, sources=link.sources, sibling_utilization=UNKNOWN)
        _decide(c, link, by_src, rule)
        out.append(c)
    return out


def _decide(c: analytics_pb2.CongestionCause, link: internal_pb2.CongestedLink,
            by_src: Mapping[str, list[internal_pb2.CongestedLink]], rule: CauseRule) -> None:
    lc = link.congestion
    signals = f"{c.pfc_pauses_received} pauses received, {c.ecn_marked_pkts} ECN marks, {c.dropped_pkts} drops"
    if paused(lc):
        found = _follow(link, by_src)
        if found is None:
            c.cause = "unknown"
            c.evidence = f"{signals}; paused by {lc.dst_node}, but nothing congested reported downstream of it"
            return
        c.cause, c.origin = "pause_spread", found[0]
        c.spread_links.extend(found[1])
        c.evidence = f"{signals}; PFC followed downstream over {len(found[1])} link(s) to {found[0]}"
        return
    u, prev = link.utilization, link.previous_utilization
    if 0 <= u < rule.degraded and 0 <= prev < rule.degraded and abs(u - prev) <= rule.plateau:
        c.cause = "degraded_link"
        c.evidence = f"{signals}; carries {_pct(u)} of nominal (previous window {_pct(prev)}) while queueing"
        return
    one_dst = bool(link.destination) and link.sources >= 2
    if one_dst or (link.to_host and not link.sources and link.flow_count != 1):
        c.cause = "incast"
        c.origin = link.destination if one_dst else f"{lc.dst_node}:{lc.dst_port}"
        c.evidence = (f"{signals}; {link.flow_count} flows"
                      + (f" from {link.sources} NICs" if link.sources else "") + f" converge on {c.origin}")
        return
    if (link.sibling and not link.sibling_congested and 0 <= link.sibling_utilization < rule.room
            and link.flow_count != 1):
        c.cause, c.sibling, c.sibling_utilization = "collision", link.sibling, link.sibling_utilization
        c.evidence = (f"{signals}; {link.flow_count} flows share it at {_pct(u)} while ECMP sibling "
                      f"{link.sibling} carries {_pct(link.sibling_utilization)}")
        return
    c.cause = "unknown"
    c.evidence = f"{signals}; no rule matched (utilization {_pct(u)}, {link.flow_count} flows)"
