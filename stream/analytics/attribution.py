"""Placed flows -> bytes per link and per path for one window (pure).

Each path also says which of its bytes were placed how: by a trace (``traced``), and by a method outside
``contract.TRUSTED_METHODS`` (``untrusted``: infer, a fallback), whose disagreement with the counters is no
evidence about the fabric, and which were a ``sprayed`` flow's share (a flow without one path).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from flowtracer.schemas.bounds import saturating_round
from flowtracer.schemas.v1 import common_pb2
from flowtracer.stream.resolvers.contract import SPRAYED_METHOD, TRACE_METHOD, TRUSTED_METHODS, FlowObs, Placement

Kept = tuple[float, FlowObs, Placement]
"""A flow kept on a link: its bytes there, the flow, and the placement that put it there."""


@dataclass(slots=True)
class Share:
    """What the flows of one window put on one link. ``bytes`` in bytes, flows as (bytes, flow, placement)."""

    bytes: float = 0.0
    flow_count: int = 0
    conf_bytes: float = 0.0  # sum of bytes x confidence, for the byte-weighted confidence
    flows: list[Kept] = field(default_factory=list)

    @property
    def confidence(self) -> float:
        return self.conf_bytes / self.bytes if self.bytes else 1.0


@dataclass(slots=True)
class PathShare:
    """What the flows of one window put on one path."""

    links: tuple[str, ...]
    src_nic: str
    dst_nic: str
    bytes: float = 0.0
    flow_count: int = 0
    conf_bytes: float = 0.0
    traced_bytes: float = 0.0  # bytes placed by a path trace (method "trace")
    #: bytes placed by a method outside ``TRUSTED_METHODS`` (infer, a fallback): no evidence when counters disagree
    untrusted_bytes: float = 0.0
    jobs: frozenset[str] = frozenset()  # job ids of its flows (those that name one)
    sprayed_bytes: float = 0.0  # bytes placed as a sprayed flow's share (method "sprayed"; also untrusted)


class Attribution:
    """Bytes per link and per path of one window's flows, stored column-wise.

    Rows are numbered in first-seen order: ``link_row[link id]`` indexes ``link_bytes`` (bytes),
    ``link_flow_count`` and ``link_conf_bytes`` (bytes x confidence); ``path_row[path id]`` likewise
    the ``path_*`` lists. Columns of floats instead of one object per link and path keep a window
    from creating tens of thousands of GC-tracked objects (each full collection scans them all).
    ``link_flows`` holds each link's (bytes, flow, placement) triples, for the links that keep flows (see
    :func:`attribute`). ``links`` and ``paths`` give the same numbers as ``Share``/``PathShare`` objects.
    """

    __slots__ = (
        "link_bytes",
        "link_conf_bytes",
        "link_flow_count",
        "link_flows",
        "link_row",
        "path_bytes",
        "path_conf_bytes",
        "path_dst_nic",
        "path_flow_count",
        "path_jobs",
        "path_links",
        "path_row",
        "path_sprayed_bytes",
        "path_src_nic",
        "path_traced_bytes",
        "path_untrusted_bytes",
        "unplaced_bytes",
        "unplaced_flows",
    )

    def __init__(self) -> None:
        self.link_row: dict[str, int] = {}
        self.link_bytes: list[float] = []
        self.link_flow_count: list[int] = []
        self.link_conf_bytes: list[float] = []
        self.link_flows: dict[str, list[Kept]] = {}
        self.path_row: dict[str, int] = {}
        self.path_links: list[tuple[str, ...]] = []
        self.path_src_nic: list[str] = []
        self.path_dst_nic: list[str] = []
        self.path_bytes: list[float] = []
        self.path_flow_count: list[int] = []
        self.path_conf_bytes: list[float] = []
        self.path_traced_bytes: list[float] = []
        self.path_untrusted_bytes: list[float] = []  # bytes placed by a method outside TRUSTED_METHODS
        self.path_sprayed_bytes: list[float] = []  # bytes placed as a sprayed flow's share
        self.path_jobs: list[set[str]] = []  # job ids of each path's flows (those that name one)
        self.unplaced_flows = 0
        self.unplaced_bytes = 0

    @property
    def links(self) -> dict[str, Share]:
        """Per link id, in first-seen order."""
        return {lid: Share(self.link_bytes[i], self.link_flow_count[i], self.link_conf_bytes[i],
                           list(self.link_flows.get(lid, ())))
                for lid, i in self.link_row.items()}

    @property
    def paths(self) -> dict[str, PathShare]:
        """Per path id (link ids joined by ``|``), in first-seen order."""
        return {pid: PathShare(self.path_links[i], self.path_src_nic[i], self.path_dst_nic[i], self.path_bytes[i],
                               self.path_flow_count[i], self.path_conf_bytes[i], self.path_traced_bytes[i],
                               self.path_untrusted_bytes[i], frozenset(self.path_jobs[i]),
                               self.path_sprayed_bytes[i])
                for pid, i in self.path_row.items()}


#: Per Placement (by identity; the entry keeps it alive so the id cannot be reused): its confidence,
#: its (path id, links, weight) triples and, for one path of weight 1.0 without a repeated link, that
#: path's links (else None). Resolvers hand out the same Placement objects window after window (the hash
#: resolver caches them per 5-tuple), so joining path ids and checking links is done once per placement.
_Derived = tuple[Placement, float, tuple[tuple[str, tuple[str, ...], float], ...], "tuple[str, ...] | None"]
_derived: dict[int, _Derived] = {}
_DERIVED_MAX = 1 << 18  # bound memory for resolvers that build new placements every window


def _derive(placement: Placement) -> _Derived:
    if len(_derived) >= _DERIVED_MAX:
        _derived.clear()
    items = tuple(("|".join(path), path, weight) for path, weight in placement.paths)
    single = None
    if len(items) == 1 and items[0][2] == 1.0 and len(set(items[0][1])) == len(items[0][1]):
        single = items[0][1]
    d = _derived[id(placement)] = (placement, placement.confidence, items, single)
    return d


def _new_path(att: Attribution, pid: str, links: tuple[str, ...], flow: FlowObs) -> int:
    i = att.path_row[pid] = len(att.path_bytes)
    att.path_bytes.append(0.0)
    att.path_flow_count.append(0)
    att.path_conf_bytes.append(0.0)
    att.path_traced_bytes.append(0.0)
    att.path_untrusted_bytes.append(0.0)
    att.path_sprayed_bytes.append(0.0)
    att.path_jobs.append(set())
    att.path_links.append(links)
    att.path_src_nic.append(flow.src_nic)
    att.path_dst_nic.append(flow.dst_nic)
    return i


def _new_link(att: Attribution, lid: str) -> int:
    i = att.link_row[lid] = len(att.link_bytes)
    att.link_bytes.append(0.0)
    att.link_flow_count.append(0)
    att.link_conf_bytes.append(0.0)
    return i


def attribute(flows: Sequence[FlowObs], placements: Sequence[Placement | None],
              keep_flows: Mapping[str, float] | None = None) -> Attribution:
    """Spread each flow's bytes over its placement's paths by weight and sum per link and path.

    A flow counts once on every link and path it has any weight on. Bytes are floats in bytes;
    sums are taken in flow order (and per flow in path order), so results are bit-identical on a replay.
    ``link_flows`` keeps every link's (bytes, flow, placement) triples, or with ``keep_flows`` (link id -> minimum
    bytes) only those of the named links with at least that many bytes on the link.
    """
    out = Attribution()
    lrow, lbytes, lcount, lconf, lflows = (out.link_row, out.link_bytes, out.link_flow_count, out.link_conf_bytes,
                                           out.link_flows)
    prow, pbytes, pcount, pconf = out.path_row, out.path_bytes, out.path_flow_count, out.path_conf_bytes
    ptraced, puntrusted, pjobs = out.path_traced_bytes, out.path_untrusted_bytes, out.path_jobs
    psprayed = out.path_sprayed_bytes
    derived_get, lrow_get, prow_get = _derived.get, lrow.get, prow.get
    keep_all = keep_flows is None
    keep_get = (keep_flows or {}).get
    for flow, placement in zip(flows, placements, strict=True):
        if placement is None:
            out.unplaced_flows += 1
            out.unplaced_bytes += flow.bytes
            continue
        d = derived_get(id(placement))
        if d is None or d[0] is not placement:
            d = _derive(placement)
        _, conf, items, single = d
        traced = placement.method == TRACE_METHOD
        untrusted = placement.method not in TRUSTED_METHODS
        sprayed = placement.method == SPRAYED_METHOD
        if single is not None:
            # One path of weight 1.0, no link twice: every link gets exactly the path's bytes
            # (0.0 + b == b, so this equals the general per-link sum below).
            b = flow.bytes * 1.0
            cb = b * conf
            pid = items[0][0]
            i = prow_get(pid)
            if i is None:
                i = _new_path(out, pid, single, flow)
            pbytes[i] += b
            pcount[i] += 1
            pconf[i] += cb
            if traced:
                ptraced[i] += b
            elif untrusted:
                puntrusted[i] += b
                if sprayed:
                    psprayed[i] += b
            if flow.job_id:
                pjobs[i].add(flow.job_id)
            bf = None
            for lid in single:
                i = lrow_get(lid)
                if i is None:
                    i = _new_link(out, lid)
                lbytes[i] += b
                lcount[i] += 1
                lconf[i] += cb
                if keep_all or ((m := keep_get(lid)) is not None and b >= m):
                    if bf is None:
                        bf = (b, flow, placement)
                    lflows.setdefault(lid, []).append(bf)
            continue
        per_link: dict[str, float] = {}
        for pid, path, weight in items:
            b = flow.bytes * weight
            i = prow_get(pid)
            if i is None:
                i = _new_path(out, pid, path, flow)
            pbytes[i] += b
            pcount[i] += 1
            pconf[i] += b * conf
            if traced:
                ptraced[i] += b
            elif untrusted:
                puntrusted[i] += b
                if sprayed:
                    psprayed[i] += b
            if flow.job_id:
                pjobs[i].add(flow.job_id)
            for lid in path:
                per_link[lid] = per_link.get(lid, 0.0) + b
        for lid, b in per_link.items():
            i = lrow_get(lid)
            if i is None:
                i = _new_link(out, lid)
            lbytes[i] += b
            lcount[i] += 1
            lconf[i] += b * conf
            if keep_all or ((m := keep_get(lid)) is not None and b >= m):
                lflows.setdefault(lid, []).append((b, flow, placement))
    return out


def link_ends(att: Attribution) -> dict[str, tuple[int, str]]:
    """Link id -> (distinct sending NICs, the one receiving NIC or "" when several) of the paths placed on it.

    Per path, not per flow: a window has far fewer paths than flow-link pairs. Two numbers per link, not NIC
    lists: every window's attributions carry them for every link.
    """
    srcs: dict[str, set[str]] = {}
    dsts: dict[str, str] = {}
    for src, dst, links in zip(att.path_src_nic, att.path_dst_nic, att.path_links, strict=True):
        for lid in links:
            s = srcs.get(lid)
            if s is None:
                srcs[lid] = {src}
                dsts[lid] = dst
            else:
                s.add(src)
                if dsts[lid] != dst:
                    dsts[lid] = ""
    return {lid: (len(s), dsts[lid]) for lid, s in srcs.items()}


def flow_ref(flow: FlowObs, nbytes: float, placement: Placement | None = None) -> common_pb2.FlowRef:
    """The FlowRef naming ``flow`` with ``nbytes`` (its bytes on the link in question) and, when given, the
    confidence, method and link share (``nbytes`` / the flow's bytes) of the placement that put it there."""
    return common_pb2.FlowRef(
        key=common_pb2.FlowKey(src_ip=flow.src_ip, dst_ip=flow.dst_ip, ip_proto=17, udp_src_port=flow.udp_src_port,
                               udp_dst_port=flow.udp_dst_port, dst_qpn=flow.rqpn),
        src_host=flow.src_host, dst_host=flow.dst_host, lqpn=flow.lqpn, job_id=flow.job_id,
        collective=flow.collective, comm_id=flow.comm_id, bytes=saturating_round(nbytes),
        confidence=placement.confidence if placement is not None else 0.0,
        link_share=min(1.0, nbytes / flow.bytes) if placement is not None and flow.bytes else 0.0,
        method=placement.method if placement is not None else "")


def heaviest(flows: Iterable[Kept], limit: int, min_bytes: float = 0.0) -> list[common_pb2.FlowRef]:
    """At most ``limit`` FlowRefs of flows with at least ``min_bytes``, heaviest first (ties by flow id,
    so replays are identical)."""
    ranked = heapq.nsmallest(limit, (bf for bf in flows if bf[0] >= min_bytes), key=lambda bf: (-bf[0], bf[1].flow_id))
    return [flow_ref(f, b, p) for b, f, p in ranked]
