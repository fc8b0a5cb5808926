"""Agents' FlowBatches of a ring job iterating at a known pace, for tests of the iteration-time rules.

Each window of ``hop_ns`` every host reports its ring QPs (one per channel, to the next host) with the bytes they
sent, its port's tx bytes, and the communicator's opCount: the collectives started by the window's end (the
first at t = 0, as the simulator's job starts its first op after a compute gap). Units: bytes, ns, s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from flowtracer.fabric.roce import ROCEV2_UDP_DPORT, rocev2_udp_sport
from flowtracer.fabric.topology import Topology
from flowtracer.schemas.v1 import flows_pb2

S = 1_000_000_000


def ring_batches(topo: Topology, hosts: Sequence[str], iteration_s: float, bytes_per_iteration: float,
                 windows: int, *, comm_id: str = "0xc0ffee", channels: int = 2, start_ns: int = S,
                 hop_ns: int = S, ops_per_iteration: int = 1) -> list[flows_pb2.FlowBatch]:
    """``windows`` windows of FlowBatches (one per host) ending at start_ns + k x hop_ns, k = 1..windows."""
    nic = {h.name: h.nics[0] for h in topo.hosts}
    out = []
    for k in range(1, windows + 1):
        end = start_ns + k * hop_ns
        t_s = k * hop_ns / S
        op_count = math.floor(t_s / iteration_s) * ops_per_iteration
        sent = bytes_per_iteration * hop_ns / S / iteration_s  # the window's share of the steady rate
        for i, host in enumerate(hosts):
            a, b = nic[host], nic[hosts[(i + 1) % len(hosts)]]
            flows = []
            for ch in range(channels):
                lqpn, rqpn = 0x100 + 16 * i + ch, 0x900 + 16 * i + ch
                f = flows_pb2.Flow(rdma_device=a.rdma_device, port=a.port, netdev=a.netdev, lqpn=lqpn, rqpn=rqpn,
                                   qp_generation=1, src_ip=a.ip, dst_ip=b.ip,
                                   udp_src_port=rocev2_udp_sport(lqpn, rqpn), udp_dst_port=ROCEV2_UDP_DPORT,
                                   tx_bytes=round(sent / channels))
                f.nccl.comm_id, f.nccl.rank, f.nccl.nranks = comm_id, i, len(hosts)
                f.nccl.peer_rank, f.nccl.channel = (i + 1) % len(hosts), ch
                f.nccl.collective, f.nccl.op_count = "AllReduce", op_count
                flows.append(f)
            port = flows_pb2.PortTotals(rdma_device=a.rdma_device, port=a.port, netdev=a.netdev,
                                        tx_bytes=round(sent))
            out.append(flows_pb2.FlowBatch(schema_version=1, host=host, leaf=a.leaf, window_start_ns=end - hop_ns,
                                           window_end_ns=end, agent_id=f"agent-{host}", sequence=k, flows=flows,
                                           ports=[port]))
    return out
