"""FlowBatch -> FlowObs: the processor's view of each flow, named with the topology's NICs."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from flowtracer.fabric.routing import Fabric, NicRef
from flowtracer.schemas.v1 import flows_pb2
from flowtracer.stream.resolvers.contract import FlowObs


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


_CACHE_MAX = 1 << 16  # lookups cached per FlowObserver and kind
_FLOW_FIELDS = attrgetter("tx_bytes", "rdma_device", "src_ip", "dst_ip", "udp_src_port", "udp_dst_port", "lqpn", "rqpn",
                          "job_id", "qp_generation")
"""The Flow fields an observation reads, in one C call per flow (a window brings tens of thousands of flows)."""


class FlowObserver:
    """A FlowBatch's flows that moved bytes, with topology NIC names (the rest counted in ``unattributed``),
    for one fabric, with the NIC lookups cached across batches.

    A window brings one small FlowBatch per (host, leaf), so per-flow NIC lookups and name
    formatting dominate; the NIC set is fixed by the fabric, so they are memoized here.
    """

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        # (host, rdma_device) -> (name, host) of the NIC found by host and device, or None
        self._by_device: dict[tuple[str, str], tuple[str, str] | None] = {}
        # ip -> (name, host) of the NIC with that IP, or None
        self._by_ip: dict[str, tuple[str, str] | None] = {}

    def _device(self, host: str, device: str) -> tuple[str, str] | None:
        if len(self._by_device) >= _CACHE_MAX:  # names not in the topology must not grow it without bound
            self._by_device.clear()
        ref = self.fabric.nics.get(f"{host}:{device}")
        v = self._by_device[(host, device)] = (ref.name, ref.host) if ref is not None else None
        return v

    def _ip(self, ip: str) -> tuple[str, str] | None:
        if len(self._by_ip) >= _CACHE_MAX:
            self._by_ip.clear()
        ref = self.fabric.nic_by_ip.get(ip)
        v = self._by_ip[ip] = (ref.name, ref.host) if ref is not None else None
        return v

    def __call__(self, batch: flows_pb2.FlowBatch, unattributed: Unattributed) -> list[FlowObs]:
        """The batch's flows that moved bytes, with topology NIC names; the rest counted in ``unattributed``.

        Same rules as :func:`placed_ends`: sender by host and RDMA device, else by source IP; receiver by
        destination IP.
        """
        out = []
        host = batch.host
        by_device, by_ip = self._by_device, self._by_ip
        read = _FLOW_FIELDS
        for f in batch.flows:
            tx, device, src_ip, dst_ip, sport, dport, lqpn, rqpn, job_id, generation = read(f)  # one C call
            if not tx:
                continue
            key = (host, device)
            src = by_device[key] if key in by_device else self._device(host, device)
            if src is None:
                src = by_ip[src_ip] if src_ip in by_ip else self._ip(src_ip)
            dst = by_ip[dst_ip] if dst_ip in by_ip else self._ip(dst_ip)
            if src is None or dst is None:
                unattributed.flows += 1
                unattributed.bytes += tx
                continue
            src_name, src_host = src
            if f.HasField("nccl"):
                nccl = f.nccl
                collective, comm_id = nccl.collective, nccl.comm_id
            else:
                collective = comm_id = ""
            # Positional, in FlowObs's field order: flow_id, src_nic, dst_nic, src_ip, dst_ip, udp_src_port,
            # udp_dst_port, lqpn, rqpn, bytes, job_id, collective, comm_id, src_host, dst_host.
            out.append(FlowObs(f"{src_name}/{lqpn}/{generation}", src_name, dst[0], src_ip, dst_ip, sport, dport,
                               lqpn, rqpn, tx, job_id, collective, comm_id, src_host, dst[1]))
        return out
