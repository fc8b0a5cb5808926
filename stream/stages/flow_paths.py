"""Which flows' paths a flows partition publishes in a window: the change-and-heartbeat rule (pure).

The resolver places every flow in every window; publishing every placement would cost one record per flow per
window (32k flows at 1 s windows: 32k records/s) for news that rarely changes. :class:`FlowPaths` remembers, per
flow, the path and method it last published and returns a ``FlowPath`` only when

- the flow is placed for the first time (by this processor: after a restart or a partition move it is again),
- its path (its links) or its placement method changed,
- ``heartbeat_windows`` windows of the flow passed since its last record (the first heartbeat of each flow is
  staggered over that span by its id, so flows that start together do not all restate in one window), or
- it sent nothing for ``idle_windows`` windows: one ``ENDED`` record with its last path, and it is forgotten.

A steady flow so costs one record per heartbeat; the per-window work is a dictionary look-up and two
comparisons per flow (the paths of one placement are shared tuples, compared by identity first).
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from flowtracer.fabric.roce import IP_PROTO_UDP
from flowtracer.fabric.routing import Fabric
from flowtracer.schemas.bounds import saturating_round
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.resolvers.contract import FlowObs, Placement

HEARTBEAT_WINDOWS = 30
"""A flow whose path did not change is restated after this many of its windows (30 s at 1 s windows)."""
IDLE_WINDOWS = 10
"""A flow that sent nothing for this many windows has ended (its QP is gone or idle)."""
CHANGE_NAMES: dict[int, str] = {
    analytics_pb2.FLOW_PATH_CHANGE_FIRST: "first", analytics_pb2.FLOW_PATH_CHANGE_PATH: "path",
    analytics_pb2.FLOW_PATH_CHANGE_METHOD: "method", analytics_pb2.FLOW_PATH_CHANGE_HEARTBEAT: "heartbeat",
    analytics_pb2.FLOW_PATH_CHANGE_ENDED: "ended"}
"""Why a FlowPath was sent, as the store, ``flowtracer path`` and its JSON name it."""
_TEMPLATES_MAX = 1 << 16  # record templates kept per stage (distinct paths); cleared when exceeded


@dataclass(slots=True)
class _Known:
    """What was last published of one flow, and when it is due again."""

    links: tuple[str, ...]
    method: str
    first_seen_ns: int
    last_seen_ns: int
    due_ns: int
    """Window end at or after which the next heartbeat goes out (ns)."""
    last: analytics_pb2.FlowPath
    """The newest record made for it (the ENDED record restates it)."""


def heaviest_path(placement: Placement) -> tuple[tuple[str, ...], float]:
    """The path of a placement with the largest weight (the first of equals) and that weight (0..1)."""
    paths = placement.paths
    if len(paths) == 1:
        return paths[0]
    return max(paths, key=lambda pw: pw[1])


def hops_of(fabric: Fabric, links: Sequence[str]) -> list[analytics_pb2.FlowHop]:
    """The switches a path of directed link ids crosses, each with the port it enters and leaves by."""
    out = []
    for before, after in itertools.pairwise(links):
        a, b = fabric.links.get(before), fabric.links.get(after)
        if a is None or b is None:
            continue  # not the topology's link (a trace of an unknown port): no switch to name
        out.append(analytics_pb2.FlowHop(node=b.src_node, in_port=a.dst_port, out_port=b.src_port, out_link=b.id))
    return out


class FlowPaths:
    """The change-and-heartbeat rule of one flows partition (see the module docstring)."""

    def __init__(self, fabric: Fabric, hop_ns: int, heartbeat_windows: int = HEARTBEAT_WINDOWS,
                 idle_windows: int = IDLE_WINDOWS) -> None:
        if heartbeat_windows < 1 or idle_windows < 1:
            raise ValueError(f"flow paths: heartbeat_windows ({heartbeat_windows}) and idle_windows "
                             f"({idle_windows}) must be at least 1")
        self.fabric = fabric
        self.hop_ns = hop_ns
        self.heartbeat_windows = heartbeat_windows
        self.idle_windows = idle_windows
        self.known: dict[str, _Known] = {}
        self._templates: dict[tuple[tuple[str, ...], str], analytics_pb2.FlowPath] = {}
        self._next_sweep_ns = 0

    def window(self, start_ns: int, end_ns: int, flows: Sequence[FlowObs], placements: Sequence[Placement | None],
               resolver: str) -> list[analytics_pb2.FlowPath]:
        """The records of one window (``start_ns``..``end_ns``): flows first placed, changed or due for a
        heartbeat, in flow order, then the flows that ended. Unplaced flows (None) publish nothing."""
        out: list[analytics_pb2.FlowPath] = []
        known = self.known
        beat = self.heartbeat_windows * self.hop_ns
        change = analytics_pb2.FLOW_PATH_CHANGE_UNSPECIFIED
        for flow, placement in zip(flows, placements, strict=True):
            if placement is None:
                continue
            fid = flow.flow_id
            k = known.get(fid)
            links, share = heaviest_path(placement)
            method = placement.method or resolver
            if k is None:
                change = analytics_pb2.FLOW_PATH_CHANGE_FIRST
                # The first heartbeat comes 1..heartbeat_windows windows on, by the flow id: staggered.
                due = end_ns + self.hop_ns * (1 + zlib.crc32(fid.encode()) % self.heartbeat_windows)
                first = start_ns
            else:
                k.last_seen_ns = end_ns
                if k.links is not links and k.links != links:
                    change = analytics_pb2.FLOW_PATH_CHANGE_PATH
                elif k.method != method:
                    change = analytics_pb2.FLOW_PATH_CHANGE_METHOD
                elif end_ns >= k.due_ns:
                    change = analytics_pb2.FLOW_PATH_CHANGE_HEARTBEAT
                else:
                    continue
                due = end_ns + beat
                first = k.first_seen_ns
            msg = self._record(flow, links, share, placement.confidence, method, resolver, start_ns, end_ns, first,
                               change)
            out.append(msg)
            if k is None:
                known[fid] = _Known(links, method, first, end_ns, due, msg)
            else:
                k.links, k.method, k.due_ns, k.last = links, method, due, msg
        if end_ns >= self._next_sweep_ns:  # ended flows are looked for once per idle span, not every window
            self._next_sweep_ns = end_ns + self.idle_windows * self.hop_ns
            out.extend(self._ended(end_ns))
        return out

    def _ended(self, end_ns: int) -> list[analytics_pb2.FlowPath]:
        cutoff = end_ns - self.idle_windows * self.hop_ns
        gone = [fid for fid, k in self.known.items() if k.last_seen_ns <= cutoff]
        out = []
        for fid in sorted(gone):
            m = analytics_pb2.FlowPath()
            m.CopyFrom(self.known.pop(fid).last)
            m.change = analytics_pb2.FLOW_PATH_CHANGE_ENDED
            out.append(m)
        return out

    def _record(self, flow: FlowObs, links: tuple[str, ...], share: float, confidence: float, method: str,
                resolver: str, start_ns: int, end_ns: int, first_ns: int, change: int) -> analytics_pb2.FlowPath:
        # The links, hops and resolver of a path are copied from a template: building the hop messages anew for
        # every record costs about twice as much.
        key = (links, resolver)
        tmpl = self._templates.get(key)
        if tmpl is None:
            if len(self._templates) > _TEMPLATES_MAX:
                self._templates.clear()
            tmpl = self._templates[key] = analytics_pb2.FlowPath(
                schema_version=SCHEMA_VERSION, links=links, hops=hops_of(self.fabric, links), resolver=resolver)
        m = analytics_pb2.FlowPath()
        m.CopyFrom(tmpl)
        src_host, _, src_nic = flow.src_nic.partition(":")
        dst_host, _, dst_nic = flow.dst_nic.partition(":")
        m.window_start_ns = start_ns
        m.window_end_ns = end_ns
        m.flow_id = flow.flow_id
        k = m.key
        k.src_ip = flow.src_ip
        k.dst_ip = flow.dst_ip
        k.ip_proto = IP_PROTO_UDP  # RoCEv2 rides UDP
        k.udp_src_port = flow.udp_src_port
        k.udp_dst_port = flow.udp_dst_port
        k.dst_qpn = flow.rqpn
        m.src_host = src_host
        m.src_nic = src_nic
        m.dst_host = dst_host
        m.dst_nic = dst_nic
        m.job_id = flow.job_id
        m.collective = flow.collective
        m.comm_id = flow.comm_id
        m.method = method
        m.confidence = confidence
        m.path_share = share
        m.bytes = saturating_round(flow.bytes)
        m.first_seen_ns = first_ns
        m.last_seen_ns = end_ns
        m.change = change  # type: ignore[assignment]  # an int of the enum
        return m
