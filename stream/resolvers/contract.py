"""Flow -> path resolution: one small contract, and a registry whose names come from the resolvers.

A resolver places each flow of one window on the fabric: a set of equal-cost paths with weights
(1.0 on one path when it knows the path; split over several when it only knows part of it) and a
confidence. Lifecycle: built once per worker with the operator's ``Fabric``; ``resolve`` is called
once per (flows partition, window) with all that window's flows of the partition and the measured
bytes of the partition's links in that window; ``state``/``restore`` carry what it has learned
across restarts and rebalances (the processor keeps it in a Faust table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from flowtracer.fabric.routing import Fabric
from flowtracer.schemas.v1 import traces_pb2

TRACE_METHOD = "trace"
"""``Placement.method`` of a flow placed by a fresh path trace of its own 5-tuple."""
HASH_METHOD = "hash"
"""``Placement.method`` of a flow placed by the configured ECMP hash model of its own 5-tuple."""
SPRAYED_METHOD = "sprayed"
"""``Placement.method`` of a flow known to have no one path (a switch on its way sprays its packets or routes them
adaptively): placed over its equal-cost paths with shares estimated from the counters, never as a whole flow on one
member (``resolvers/spread_shares.py``)."""
TRUSTED_METHODS = frozenset({TRACE_METHOD, HASH_METHOD})
"""Methods whose placements the counters may contradict as evidence about the fabric: each places a flow by its
own 5-tuple (a trace of it, or the configured hash of it), so bytes the counters do not see where they put them
mean the fabric forwards otherwise (a hash that is not configured as modelled). Every other method (``infer``: a fit
to the counters themselves; ``sprayed``: shares taken from the counters; a fallback for a flow without a fresh
trace) is a guess: where its bytes went is no
evidence of anything, and the diagnosis draws no verdict from them (PathLoad ``untrusted_bytes``)."""


@dataclass(frozen=True, slots=True)
class FlowObs:
    """One flow's transmit direction in one window. ``bytes`` are the tx bytes in the window."""

    flow_id: str  # stable while the QP lives: "<src_nic>/<lqpn>/<qp_generation>"
    src_nic: str  # topology NIC name "<host>:<rdma_device>"
    dst_nic: str  # topology NIC name of the receiver
    src_ip: str
    dst_ip: str
    udp_src_port: int
    udp_dst_port: int
    lqpn: int
    rqpn: int  # the destination QP number: what E-ECMP switches hash on
    bytes: int
    job_id: str = ""
    collective: str = ""
    comm_id: str = ""
    src_host: str = ""
    dst_host: str = ""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a flow went: (path, weight) pairs whose weights sum to 1; confidence in 0..1; ``method`` says
    how it was placed (``hash``, ``infer``, ``trace``, ``sprayed``; empty: the resolver's name)."""

    paths: tuple[tuple[tuple[str, ...], float], ...]
    confidence: float
    method: str = ""

    @classmethod
    def single(cls, path: tuple[str, ...], confidence: float = 1.0, method: str = "") -> Placement:
        return cls(((path, 1.0),), confidence, method)


class Resolver(Protocol):
    """Places flows on equal-cost paths. See the module docstring for the lifecycle."""

    name: ClassVar[str]

    def __init__(self, fabric: Fabric) -> None: ...

    def resolve(self, window_end_ns: int, flows: Sequence[FlowObs],
                measured: Mapping[str, int]) -> list[Placement | None]:
        """One placement per flow, in order; None when the flow cannot be placed (unreachable).

        ``measured`` maps directed link ids to the bytes their counters saw in this window, for the
        links whose counters are trusted and owned by this partition's switches; it may be empty.
        """
        ...

    def state(self) -> dict[str, Any]:
        """What the resolver learned, as JSON-able data (empty for stateless resolvers)."""
        ...

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state()`` of a previous instance."""
        ...


@runtime_checkable
class TraceConsumer(Protocol):
    """A resolver that also reads the path-traces topic: the flows stage hands it its partition's traces."""

    def observe_trace(self, flow_id: str, trace: traces_pb2.PathTrace | None) -> None:
        """The newest trace of ``flow_id``; ``None`` is a tombstone (the flow ended)."""
        ...


@runtime_checkable
class RetraceRequester(Protocol):
    """A resolver that can ask the host agents to trace flows again: the flows stage publishes what it returns."""

    def take_retrace_requests(self) -> list[tuple[str, str]]:
        """(flow id, sending NIC) of each flow to re-trace since the last call (each once)."""
        ...


@runtime_checkable
class GroupConsumer(Protocol):
    """A resolver that follows the live ECMP groups of the partition's leaves: the flows stage hands it what each
    leaf's newest CounterBatch says its AFT groups are, before it resolves that window's flows."""

    def observe_groups(self, switch: str, groups: Sequence[Mapping[str, int]], at_ns: int = 0) -> None:
        """``switch``'s AFT next-hop groups, each as egress port -> weight, as its counter sample at ``at_ns`` (ns
        since the epoch) says (only called when it streams groups)."""
        ...
