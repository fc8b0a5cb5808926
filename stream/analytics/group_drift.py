"""Drift between the topology file's ECMP groups and what a switch's AFT says (pure).

Each topology group of the switch is compared with the AFT group sharing most of its member ports: a member only the
topology has was withdrawn (``MEMBER_WITHDRAWN``), one only the AFT has was added (``MEMBER_ADDED``, also for a port
the topology has no switch link on), one in both with another weight changed weight (``WEIGHT_CHANGED``). A topology
group sharing no port with any AFT group is ``GROUP_MISSING``; an AFT group of two or more members that is no topology
group's best match is ``GROUP_ADDED``. Only a switch whose AFT names groups is compared (``aft_groups.switch_groups``
falls back to the topology for the others: nothing to compare).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flowtracer.fabric.routing import group_id
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.analytics.aft_groups import AftView, WeightedGroup, best_match
from flowtracer.stream.analytics.link_index import LinkIndex


@dataclass(frozen=True, order=True)
class Drift:
    """One difference. ``group``: the topology group's id (GROUP_ADDED: the AFT group's, by the same rule);
    ``kind``: an ``analytics_pb2.DriftKind``; weights 0 where the member is absent."""

    switch: str
    group: str
    kind: int
    port: str = ""
    link: str = ""
    topology_weight: int = 0
    network_weight: int = 0

    def describe(self) -> str:
        """Human words for the log line."""
        what = analytics_pb2.DriftKind.Name(self.kind).removeprefix("DRIFT_KIND_").lower().replace("_", " ")
        if not self.port:
            return f"{self.group}: {what}"
        return (f"{self.group}: {self.port} {what} (topology weight {self.topology_weight}, "
                f"network weight {self.network_weight})")


def group_drift(view: AftView, topology: Sequence[WeightedGroup], links: LinkIndex) -> tuple[Drift, ...]:
    """Every difference between ``topology`` (the switch's groups in the file) and ``view``, sorted."""
    if not view.groups:
        return ()
    sw = view.switch
    out: list[Drift] = []
    matched: set[int] = set()
    for t in topology:
        want = t.port_weights()
        i = best_match(want, view.groups)
        if i is None:
            out.append(Drift(sw, t.group.id, analytics_pb2.DRIFT_KIND_GROUP_MISSING))
            continue
        matched.add(i)
        have = view.groups[i]
        for port in sorted(want.keys() | have.keys()):
            tw, nw = want.get(port, 0), have.get(port, 0)
            if tw == nw:
                continue
            kind = (analytics_pb2.DRIFT_KIND_MEMBER_WITHDRAWN if not nw else
                    analytics_pb2.DRIFT_KIND_MEMBER_ADDED if not tw else analytics_pb2.DRIFT_KIND_WEIGHT_CHANGED)
            out.append(Drift(sw, t.group.id, kind, port, links.out_link.get((sw, port), ""), tw, nw))
    for i, ports in enumerate(view.groups):
        if i in matched or len(ports) < 2:
            continue
        neighbors = [links.fabric.links[lid].dst_node for p in ports
                     if (lid := links.out_link.get((sw, p))) is not None]
        out.append(Drift(sw, group_id(sw, neighbors) if neighbors else f"{sw}:", analytics_pb2.DRIFT_KIND_GROUP_ADDED))
    return tuple(sorted(out))


def drift_records(drifts: Sequence[Drift], window_start_ns: int, window_end_ns: int) -> list[analytics_pb2.EcmpDrift]:
    """The EcmpDrift records of one window."""
    return [analytics_pb2.EcmpDrift(
        schema_version=SCHEMA_VERSION, window_start_ns=window_start_ns, window_end_ns=window_end_ns, switch=d.switch,
        group=d.group, kind=d.kind, link=d.link, port=d.port, topology_weight=d.topology_weight,
        network_weight=d.network_weight) for d in drifts]


def drift_change(switch: str, before: Sequence[Drift], now: Sequence[Drift]) -> str | None:
    """The log line for a switch whose differences changed (None when they did not): what is new, what ended."""
    new = [d for d in now if d not in before]
    gone = [d for d in before if d not in now]
    if not new and not gone:
        return None
    parts = []
    if new:
        parts.append("differs from the topology: " + "; ".join(d.describe() for d in new))
    if gone:
        parts.append("agrees again on: " + "; ".join(d.describe() for d in gone))
    return f"ECMP drift on {switch}: the AFT " + ", and ".join(parts)
