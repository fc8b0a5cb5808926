"""The processor's check that a host's record comes from that host: the agents' record signatures.

Where the deployment gives each host agent its own key (``flowtracer.schemas.record_identity``), every
FlowBatch and PathTrace (tombstones too) must carry a valid signature of the host it names; anything else
is a BadRecord (dead-lettered with the reason) and counted in
``flowtracer_processor_identity_refused_total{topic}``. Switch records are not signed: only the
collectors' principal may write them (the shipped Kafka ACLs, deploy/kafka_acls.py).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from flowtracer.schemas import topics
from flowtracer.schemas.record_identity import Headers, IdentityError, check_named, signer
from flowtracer.schemas.v1 import flows_pb2, traces_pb2
from flowtracer.stream.runtime.inputs import BadRecord

SIGNED_TOPICS = frozenset({topics.FLOWS.name, topics.PATH_TRACES.name})
"""Topics whose records a host agent signs and the processor checks."""


def trace_host(flow_id: str, trace: traces_pb2.PathTrace | None) -> str:
    """The host a path-traces record speaks for: the trace's ``host``, else its flow's sending NIC's host
    (flow id ``"<host>:<device>/<lqpn>/<generation>"``; a tombstone has only the key)."""
    if trace is not None and trace.host:
        return trace.host
    nic = trace.src_nic if trace is not None and trace.src_nic else flow_id.split("/", 1)[0]
    return nic.split(":", 1)[0]


def named_host(topic: str, key: bytes | None, msg: object | None) -> str:
    """The host a decoded agent record names (*msg* None: a path-trace tombstone)."""
    if isinstance(msg, flows_pb2.FlowBatch):
        return msg.host
    if topic == topics.PATH_TRACES.name and (msg is None or isinstance(msg, traces_pb2.PathTrace)):
        return trace_host((key or b"").decode("utf-8", "replace"), msg)
    raise BadRecord(f"no host identity rule for a {type(msg).__name__} on {topic}")


class OriginCheck:
    """Refuses agent records not signed by the host they name; keys derived from one master key (bytes)."""

    def __init__(self, master: bytes, registry: CollectorRegistry) -> None:
        self._master = master
        self.refused = Counter("flowtracer_processor_identity_refused",
                               "Agent records refused (dead-lettered) for a missing or wrong host signature, "
                               "by topic", ["topic"], registry=registry)

    def check(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, msg: object | None) -> None:
        """BadRecord (counted) unless the record on *topic* is signed by the host *msg* names."""
        if topic not in SIGNED_TOPICS:
            return
        what = "PathTrace" if topic == topics.PATH_TRACES.name else "FlowBatch"
        try:
            check_named(signer(self._master, topic, key, value, headers), named_host(topic, key, msg), what)
        except IdentityError as e:
            self.refused.labels(topic).inc()
            raise BadRecord(f"{what}: {e}") from None
