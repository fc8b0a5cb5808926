"""FlowBatch -> FlowObs: the processor's view of each flow, named with the topology's NICs."""

from __future__ import annotations

from dataclasses import dataclass

from flowtracer.schemas.fabric import Fabric, NicRef
from flowtracer.schemas.v1 import flows_pb2

from .resolve import FlowObs


@dataclass
class Unattributed:
    """Flows that cannot be placed because an end is not in the topology (counted, never dropped silently)."""

    flows: int = 0
    bytes: int = 0


def placed_ends(host: str, flow: flows_pb2.Flow, fabric: Fabric,
                unattributed: Unattributed) -> tuple[NicRef, NicRef] | None:
    """The topology NICs a flow goes from and to, or None (and counted in ``unattributed``).

    The sending NIC is found by host and RDMA device, else by source IP; the receiver by
    destination IP (the agents fill it from the host inventory).
    """
    src = fabric.nics.get(f"{host}:{flow.rdma_device}") or fabric.nic_by_ip.get(flow.src_ip)
    dst = fabric.nic_by_ip.get(flow.dst_ip)
    if src is None or dst is None:
        unattributed.flows += 1
        unattributed.bytes += flow.tx_bytes
        return None
    return src, dst


def flow_observations(batch: flows_pb2.FlowBatch, fabric: Fabric, unattributed: Unattributed) -> list[FlowObs]:
    """The batch's flows that moved bytes, with topology NIC names; the rest counted in ``unattributed``."""
    out = []
    for f in batch.flows:
        if not f.tx_bytes:
            continue
        ends = placed_ends(batch.host, f, fabric, unattributed)
        if ends is None:
            continue
        src, dst = ends
        out.append(FlowObs(
            flow_id=f"{src.name}/{f.lqpn}/{f.qp_generation}", src_nic=src.name, dst_nic=dst.name,
            src_ip=f.src_ip, dst_ip=f.dst_ip, udp_src_port=f.udp_src_port, udp_dst_port=f.udp_dst_port,
            lqpn=f.lqpn, rqpn=f.rqpn, bytes=f.tx_bytes, job_id=f.job_id,
            collective=f.nccl.collective if f.HasField("nccl") else "",
            comm_id=f.nccl.comm_id if f.HasField("nccl") else "",
            src_host=src.host, dst_host=dst.host,
        ))
    return out
