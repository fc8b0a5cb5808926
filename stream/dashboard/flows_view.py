"""The dashboard's flow view: each flow's newest published path, by job (pure, no I/O).

Fed the FlowPath records of each finalization (``Emitted.flow_paths``: a flow's record comes when it is first
placed, when its path or method changes and at a heartbeat; an ``ENDED`` record removes it). The page lists the jobs
(``jobs``, in every state poll: small) and asks for one job's or one flow's paths (``json``, its own request) to list
the flows with their hops and highlight their links on the fabric drawing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flowtracer.schemas.v1 import analytics_pb2

MAX_FLOWS = 1 << 16
"""Flows remembered; the ones updated longest ago are forgotten first (a flow is restated at each heartbeat)."""
MAX_LISTED = 512
"""Flows one answer lists (its links cover all the selected flows)."""


class FlowsView:
    """Newest path of each live flow this worker placed."""

    def __init__(self) -> None:
        self.flows: dict[str, analytics_pb2.FlowPath] = {}

    def observe(self, records: Iterable[analytics_pb2.FlowPath]) -> None:
        for m in records:
            old = self.flows.pop(m.flow_id, None)
            if old is not None and m.window_end_ns < old.window_end_ns:  # a replay: keep the newer
                self.flows[m.flow_id] = old
                continue
            if m.change == analytics_pb2.FLOW_PATH_CHANGE_ENDED:
                continue
            if len(self.flows) >= MAX_FLOWS:
                del self.flows[next(iter(self.flows))]
            self.flows[m.flow_id] = m  # re-inserted last: the stalest is forgotten first

    def jobs(self) -> list[dict[str, Any]]:
        """Every job with live flows ("" for flows without one) and how many."""
        count: dict[str, int] = {}
        for m in self.flows.values():
            count[m.job_id] = count.get(m.job_id, 0) + 1
        return [{"job": j, "flows": n} for j, n in sorted(count.items())]

    def json(self, job: str | None = None, flow: str | None = None) -> dict[str, Any]:
        """The flows of ``job`` (or the one flow ``flow``), each with its hops, and the union of their links."""
        chosen = sorted((m for m in self.flows.values()
                         if (job is None or m.job_id == job) and (flow is None or m.flow_id == flow)),
                        key=lambda m: (m.src_host, m.src_nic, m.flow_id))
        links = sorted({lid for m in chosen for lid in m.links})
        return {"job": job, "flow": flow, "count": len(chosen), "links": links,
                "flows": [flow_path_json(m) for m in chosen[:MAX_LISTED]]}


def flow_path_json(m: analytics_pb2.FlowPath) -> dict[str, Any]:
    """One flow for the page: 5-tuple parts, NICs, job, communicator, method, bytes, links and hops."""
    return {"flow_id": m.flow_id, "src_ip": m.key.src_ip, "dst_ip": m.key.dst_ip, "udp_src_port": m.key.udp_src_port,
            "src": f"{m.src_host}:{m.src_nic}", "dst": f"{m.dst_host}:{m.dst_nic}", "job": m.job_id,
            "comm": m.comm_id, "collective": m.collective, "method": m.method, "confidence": m.confidence,
            "bytes": m.bytes, "window_end_ms": m.window_end_ns // 1_000_000, "links": list(m.links),
            "hops": [{"switch": h.node, "in_port": h.in_port, "out_port": h.out_port, "link": h.out_link}
                     for h in m.hops]}
