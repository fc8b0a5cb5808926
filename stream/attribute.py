"""Placed flows -> bytes per link and per path for one window (pure)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from flowtracer.schemas.v1 import common_pb2

from .resolve import FlowObs, Placement


@dataclass
class Share:
    """What the flows of one window put on one link. ``bytes`` in bytes, flows as (bytes, flow)."""

    bytes: float = 0.0
    flow_count: int = 0
    conf_bytes: float = 0.0  # sum of bytes x confidence, for the byte-weighted confidence
    flows: list[tuple[float, FlowObs]] = field(default_factory=list)

    @property
    def confidence(self) -> float:
        return self.conf_bytes / self.bytes if self.bytes else 1.0


@dataclass
class PathShare:
    """What the flows of one window put on one path."""

    links: tuple[str, ...]
    src_nic: str
    dst_nic: str
    bytes: float = 0.0
    flow_count: int = 0
    conf_bytes: float = 0.0


@dataclass
class Attribution:
    links: dict[str, Share]
    paths: dict[str, PathShare]
    unplaced_flows: int = 0
    unplaced_bytes: int = 0


def attribute(flows: Sequence[FlowObs], placements: Sequence[Placement | None]) -> Attribution:
    """Spread each flow's bytes over its placement's paths by weight and sum per link and path.

    A flow counts once on every link and path it has any weight on.
    """
    links: dict[str, Share] = {}
    paths: dict[str, PathShare] = {}
    out = Attribution(links, paths)
    for flow, placement in zip(flows, placements, strict=True):
        if placement is None:
            out.unplaced_flows += 1
            out.unplaced_bytes += flow.bytes
            continue
        per_link: dict[str, float] = {}
        for path, weight in placement.paths:
            b = flow.bytes * weight
            pid = "|".join(path)
            ps = paths.get(pid)
            if ps is None:
                ps = paths[pid] = PathShare(path, flow.src_nic, flow.dst_nic)
            ps.bytes += b
            ps.flow_count += 1
            ps.conf_bytes += b * placement.confidence
            for lid in path:
                per_link[lid] = per_link.get(lid, 0.0) + b
        for lid, b in per_link.items():
            s = links.get(lid)
            if s is None:
                s = links[lid] = Share()
            s.bytes += b
            s.flow_count += 1
            s.conf_bytes += b * placement.confidence
            s.flows.append((b, flow))
    return out


def flow_ref(flow: FlowObs, nbytes: float) -> common_pb2.FlowRef:
    """The FlowRef naming ``flow`` with ``nbytes`` (its bytes on the link in question)."""
    return common_pb2.FlowRef(
        key=common_pb2.FlowKey(src_ip=flow.src_ip, dst_ip=flow.dst_ip, ip_proto=17, udp_src_port=flow.udp_src_port,
                               udp_dst_port=flow.udp_dst_port, dst_qpn=flow.rqpn),
        src_host=flow.src_host, dst_host=flow.dst_host, lqpn=flow.lqpn, job_id=flow.job_id,
        collective=flow.collective, comm_id=flow.comm_id, bytes=round(nbytes))


def heaviest(flows: Iterable[tuple[float, FlowObs]], limit: int, min_bytes: float = 0.0) -> list[common_pb2.FlowRef]:
    """At most ``limit`` FlowRefs of flows with at least ``min_bytes``, heaviest first (ties by flow id,
    so replays are identical)."""
    ranked = heapq.nsmallest(limit, (bf for bf in flows if bf[0] >= min_bytes), key=lambda bf: (-bf[0], bf[1].flow_id))
    return [flow_ref(f, b) for b, f in ranked]
