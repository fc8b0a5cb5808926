"""The agent's side of tracing: window flows in, a ``Tracer`` built from the config, traces out to Kafka.

Each finished PathTrace goes to ``flowtracer.path-traces.v1`` with key = flow id and the partition of
the flow's source leaf (``schemas.topics.trace_partition``), whose partition count the producer
learns from the broker; a flow that ended gets a tombstone (null value) under its key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from flowtracer.collectors.agent.config import AgentConfig, ConfigError
from flowtracer.collectors.agent.tracing.budget import RateGovernor, TokenBucket
from flowtracer.collectors.agent.tracing.plan import TraceFlow, TracePlanner
from flowtracer.collectors.agent.tracing.trace import ProbeConfig, Prober, Transport
from flowtracer.collectors.agent.tracing.tracer import Tracer
from flowtracer.fabric.addressing import port_by_address
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import Topology
from flowtracer.schemas.topics import PATH_TRACES, trace_partition
from flowtracer.schemas.topics import key as topic_key
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.schemas.v1 import traces_pb2 as tpb

log = logging.getLogger(__name__)


class TraceSink(Protocol):
    """Where traces go (``KafkaSink``; ``StdoutSink``)."""

    def send(self, topic: str, key: bytes, value: bytes | None, partition: int | None = None) -> None: ...

    def partitions_for(self, topic: str) -> int | None: ...


def dst_leaves(topology: Topology | None) -> dict[str, str]:
    """NIC IPv4 -> its leaf switch (where a flow to that address ends its switch hops)."""
    if topology is None:
        return {}
    return {nic.ip: nic.leaf.split(":", 1)[0] for h in topology.hosts for nic in h.nics}


def trace_flows(batch: pb.FlowBatch, leaf_of: Mapping[str, str]) -> list[TraceFlow]:
    """The flows of one FlowBatch that can be traced (their destination is known), named as the
    processor names them: ``<host>:<rdma_device>/<lqpn>/<qp_generation>``."""
    out = []
    for f in batch.flows:
        if not f.dst_ip or not f.src_ip or not f.udp_src_port:
            continue
        nic = f"{batch.host}:{f.rdma_device}"
        out.append(TraceFlow(f"{nic}/{f.lqpn}/{f.qp_generation}", batch.host, nic, batch.leaf, f.src_ip, f.dst_ip,
                             f.udp_src_port, f.udp_dst_port or 4791, leaf_of.get(f.dst_ip, ""), f.rqpn))
    return out


class TracePublisher:
    """``publish(flow_id, src_leaf, trace)`` into the path-traces topic with the explicit partition.

    Until the broker has told the topic's partition count, the latest trace of each flow is held
    (compaction keeps only the latest anyway) and sent once it is known.
    """

    def __init__(self, sink: TraceSink, topic: str = PATH_TRACES.name) -> None:
        self.sink = sink
        self.topic = topic
        self.partitions: int | None = None
        self.held: dict[str, tuple[str, tpb.PathTrace | None]] = {}
        self.sent = 0

    def __call__(self, flow_id: str, src_leaf: str, trace: tpb.PathTrace | None) -> None:
        if self.partitions is None:
            self.partitions = self.sink.partitions_for(self.topic)
        if self.partitions is None:
            self.held[flow_id] = (src_leaf, trace)
            return
        for fid, (leaf, t) in list(self.held.items()):
            self._send(fid, leaf, t)
        self.held.clear()
        self._send(flow_id, src_leaf, trace)

    def _send(self, flow_id: str, src_leaf: str, trace: tpb.PathTrace | None) -> None:
        assert self.partitions is not None
        self.sink.send(self.topic, topic_key(flow_id), None if trace is None else trace.SerializeToString(),
                       trace_partition(src_leaf, self.partitions))
        self.sent += 1


def switch_hops(topology: Topology) -> Callable[[str, str], int]:
    """(source leaf, destination leaf) -> the switches on a shortest path between them, both leaves included
    (1 for one leaf; 0 when unreachable or unknown): the highest TTL that still expires in a switch."""
    fabric = Fabric(topology)
    memo: dict[tuple[str, str], int] = {}

    def hops(src: str, dst: str) -> int:
        if (src, dst) not in memo:
            n, at = 1, src
            while at != dst and n <= len(fabric.switch_names):
                nh = fabric.next_hops(at, dst) if at in fabric.switch_names and dst in fabric.switch_names else ()
                if not nh:
                    n = 0
                    break
                at, n = nh[0].dst_node, n + 1
            memo[(src, dst)] = n if at == dst else 0
        return memo[(src, dst)]

    return hops


def make_transport(cfg: AgentConfig) -> Transport:
    """The configured transport: kernel sockets (with per-host namespaces) or the simulator's responder."""
    t = cfg.tracing
    if t.transport == "sim":
        from flowtracer.collectors.agent.tracing.sim_probe import SimTransport, responder_address

        if cfg.sim_endpoints is None:
            raise ConfigError("tracing.transport sim needs sim_endpoints (the ready JSON of `flowtracer sim`)")
        return SimTransport(responder_address(cfg.sim_endpoints))
    from flowtracer.collectors.agent.tracing.udp_probe import KernelTransport

    return KernelTransport(t.netns)


def build_tracer(cfg: AgentConfig, topology: Topology | None, publish: Callable[[str, str, tpb.PathTrace | None], None],
                 transport: Transport | None = None) -> Tracer:
    """A Tracer from the agent's ``tracing:`` settings (not started)."""
    t = cfg.tracing
    if topology is None:
        raise ConfigError("tracing needs the topology (--topology): hops are named from its addresses")
    ns = lambda d: round(d.total_seconds() * 1e9)  # noqa: E731
    # The kernel transport sends plain UDP: Linux forms no BTH for its probes (docs/tracing.md)
    roce = t.probe_form == "roce" and t.transport == "sim"
    prober = Prober(transport or make_transport(cfg), ProbeConfig(t.max_ttl, ns(t.timeout), t.retries, roce),
                    port_by_address(topology), TokenBucket(t.probes_per_second, t.burst),
                    RateGovernor(t.probes_per_second), cfg.agent_id, switch_hops=switch_hops(topology))
    planner = TracePlanner(refresh_ns=ns(t.refresh), expire_ns=ns(t.expire))
    return Tracer(prober, planner, publish, max_concurrent=t.max_concurrent)
