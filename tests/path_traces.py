"""PathTrace records as a host agent would publish them, built from a known path (tests and e2e)."""

from __future__ import annotations

from flowtracer.fabric.routing import Fabric
from flowtracer.schemas.v1 import traces_pb2
from flowtracer.stream.resolvers.contract import FlowObs


def make_trace(fabric: Fabric, f: FlowObs, path: tuple[str, ...], finished_ns: int,
               status: int = traces_pb2.TRACE_STATUS_COMPLETE, lost: tuple[int, ...] = ()) -> traces_pb2.PathTrace:
    """The trace an agent would publish for ``f`` on ``path``: one hop per switch, its (switch, ingress port);
    the TTLs in ``lost`` unanswered; the destination answers last."""
    hops = []
    for k, lid in enumerate(path[:-1]):
        link = fabric.links[lid]
        ok = k + 1 not in lost
        hops.append(traces_pb2.TraceHop(ttl=k + 1, switch=link.dst_node if ok else "",
                                        port=link.dst_port if ok else "", icmp_type=11 if ok else 0, probes=1))
    hops.append(traces_pb2.TraceHop(ttl=len(path), address=f.dst_ip, icmp_type=3, icmp_code=3, probes=1))
    return traces_pb2.PathTrace(schema_version=1, flow_id=f.flow_id, src_nic=f.src_nic,
                                src_leaf=fabric.nics[f.src_nic].leaf, src_ip=f.src_ip, dst_ip=f.dst_ip,
                                udp_src_port=f.udp_src_port, udp_dst_port=f.udp_dst_port,
                                started_ns=finished_ns - 1_000_000, finished_ns=finished_ns, hops=hops,
                                status=status)
