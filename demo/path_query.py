"""``flowtracer path``'s pure parts: which flows a query selects, and each flow's hops traceroute-style or as JSON.

The data is a :class:`~flowtracer.demo.flow_path_table.FlowPathTable` (the flow-paths topic and the links'
utilization). A hop is one switch the flow crosses, the port it enters and leaves by, and the utilization of the link
it leaves by; a hop is marked where the flow is heavy on a switch-to-switch link that another heavy flow's path
crosses too (they share an ECMP member: the collision the processor's collision rule looks for).
"""

from __future__ import annotations

import ipaddress
import json
import time
from dataclasses import dataclass
from typing import Any

from flowtracer.demo.flow_path_table import FlowPathTable
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.stages.flow_paths import CHANGE_NAMES


class QueryError(ValueError):
    """A selection that cannot be understood; the message names the option and the value."""


@dataclass(frozen=True)
class Selection:
    """What a query asks for; every given criterion must match (none given: every flow)."""

    src_ip: str | None = None
    dst_ip: str | None = None
    udp_src_port: int | None = None
    host: str | None = None
    """The sending or the receiving host."""
    nic: str | None = None
    """The sending or the receiving NIC, ``<host>:<rdma_device>``."""
    job: str | None = None
    comm: str | None = None
    """NCCL communicator id."""

    def matches(self, m: analytics_pb2.FlowPath) -> bool:
        """Whether flow record ``m`` is one of the selected flows."""
        k = m.key
        return ((self.src_ip is None or k.src_ip == self.src_ip)
                and (self.dst_ip is None or k.dst_ip == self.dst_ip)
                and (self.udp_src_port is None or k.udp_src_port == self.udp_src_port)
                and (self.host is None or self.host in (m.src_host, m.dst_host))
                and (self.nic is None or self.nic in (f"{m.src_host}:{m.src_nic}", f"{m.dst_host}:{m.dst_nic}"))
                and (self.job is None or m.job_id == self.job)
                and (self.comm is None or m.comm_id == self.comm))


def parse_flow(text: str) -> tuple[str, str, int | None]:
    """``SRC_IP,DST_IP[,UDP_SRC_PORT]`` (commas: IPv6 addresses hold colons) -> its parts; a :class:`QueryError`
    naming what is wrong otherwise."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) not in (2, 3):
        raise QueryError(f"--flow {text!r}: expected SRC_IP,DST_IP[,UDP_SRC_PORT]")
    for what, ip in (("source IP", parts[0]), ("destination IP", parts[1])):
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise QueryError(f"--flow {text!r}: {what} {ip!r} is not an IP address") from None
    port = None
    if len(parts) == 3:
        if not parts[2].isdigit() or not 0 <= int(parts[2]) <= 65535:
            raise QueryError(f"--flow {text!r}: UDP source port {parts[2]!r} is not a number in 0..65535")
        port = int(parts[2])
    return parts[0], parts[1], port


def select(table: FlowPathTable, sel: Selection) -> list[analytics_pb2.FlowPath]:
    """The live flows ``sel`` selects, ordered by job, sending NIC and flow id."""
    return sorted((m for m in table.flows.values() if sel.matches(m)),
                  key=lambda m: (m.job_id, m.src_host, m.src_nic, m.flow_id))


def flow_dict(table: FlowPathTable, m: analytics_pb2.FlowPath, sharing: dict[str, list[str]]) -> dict[str, Any]:
    """One flow and its hops as JSON-able data: each hop with the utilization (0..1, None: no LinkLoad yet) of the
    link it leaves by and the other heavy flows sharing that link (``sharing``: ``FlowPathTable.sharing()``)."""
    hops = []
    for hop in m.hops:
        seen = table.links.get(hop.out_link)
        others = [f for f in sharing.get(hop.out_link, ()) if f != m.flow_id]
        hops.append({"switch": hop.node, "in_port": hop.in_port, "out_port": hop.out_port, "link": hop.out_link,
                     "utilization": round(seen.utilization, 4) if seen else None,
                     "shared_with": others if m.flow_id in sharing.get(hop.out_link, ()) else []})
    k = m.key
    return {"flow_id": m.flow_id, "src_ip": k.src_ip, "dst_ip": k.dst_ip, "ip_proto": k.ip_proto,
            "udp_src_port": k.udp_src_port, "udp_dst_port": k.udp_dst_port, "dst_qpn": k.dst_qpn,
            "src": f"{m.src_host}:{m.src_nic}", "dst": f"{m.dst_host}:{m.dst_nic}", "job": m.job_id,
            "collective": m.collective, "comm_id": m.comm_id, "method": m.method,
            "confidence": round(m.confidence, 4), "path_share": round(m.path_share, 4), "bytes": m.bytes,
            "window_end_ns": m.window_end_ns, "first_seen_ns": m.first_seen_ns, "last_seen_ns": m.last_seen_ns,
            "change": CHANGE_NAMES.get(m.change, "unknown"), "resolver": m.resolver, "links": list(m.links),
            "hops": hops}


def _clock(ns: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ns / 1e9)) if ns > 0 else "-"


def flow_text(d: dict[str, Any]) -> list[str]:
    """One flow (``flow_dict``) traceroute-style: a header line, a placement line, then one numbered line per hop;
    ``*`` marks a hop whose link the flow shares with another heavy flow."""
    who = "  ".join(x for x in (f"job {d['job']}" if d["job"] else "", f"comm {d['comm_id']}" if d["comm_id"] else "",
                                d["collective"]) if x)
    lines = [f"flow {d['flow_id']}  {d['src']} -> {d['dst']}  {d['src_ip']} > {d['dst_ip']} "
             f"udp {d['udp_src_port']} > {d['udp_dst_port']}" + (f"  {who}" if who else ""),
             f"  placed by {d['method']} (confidence {d['confidence']:.2f}"
             + (f", {d['path_share']:.0%} of its bytes" if d["path_share"] < 1 else "")
             + f"), {d['bytes'] / 1e6:.1f} MB in the window ending {_clock(d['window_end_ns'])}, "
             f"first seen {_clock(d['first_seen_ns'])}"]
    for i, h in enumerate(d["hops"], 1):
        util = f"{h['utilization']:.0%}" if h["utilization"] is not None else "?"
        nxt = h["link"].rpartition(">")[2].split(":", 1)[0]
        mark = f"  * shares with {', '.join(h['shared_with'])}" if h["shared_with"] else ""
        lines.append(f"  {i:2d}  {h['switch']:<12} in {h['in_port']:<10} out {h['out_port']:<10} -> {nxt:<12} "
                     f"util {util:>4}{mark}")
    return lines


def render(table: FlowPathTable, flows: list[analytics_pb2.FlowPath], fmt: str) -> str:
    """The selected flows as text (blocks separated by blank lines; a line saying none matched) or one JSON list."""
    sharing = table.sharing()
    ds = [flow_dict(table, m, sharing) for m in flows]
    if fmt == "json":
        return json.dumps(ds, indent=1)
    if not ds:
        return "no flow matches (the flow-paths topic has none such yet)"
    return "\n\n".join("\n".join(flow_text(d)) for d in ds)


def change_text(table: FlowPathTable, m: analytics_pb2.FlowPath, fmt: str) -> str:
    """One change event for ``--follow``: a JSON line, or the change and the flow's block."""
    d = flow_dict(table, m, table.sharing())
    if fmt == "json":
        return json.dumps(d)
    return f"{_clock(m.window_end_ns)} {d['change']}: " + "\n".join(flow_text(d))
