"""What finalizing a window produces: records for Kafka and the store, and the inputs it may ack."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flowtracer.schemas.v1 import analytics_pb2, flows_pb2, internal_pb2, traces_pb2


@dataclass
class Emitted:
    """Outputs of one or more finalized windows. ``tokens`` are acked once the outputs are durable."""

    link_loads: list[analytics_pb2.LinkLoad] = field(default_factory=list)
    path_loads: list[analytics_pb2.PathLoad] = field(default_factory=list)
    fims: list[analytics_pb2.FimSample] = field(default_factory=list)
    collisions: list[analytics_pb2.Collision] = field(default_factory=list)
    link_congestion: list[analytics_pb2.LinkCongestion] = field(default_factory=list)
    nic_congestion: list[analytics_pb2.NicCongestionSample] = field(default_factory=list)
    ecmp_drift: list[analytics_pb2.EcmpDrift] = field(default_factory=list)
    ecmp_groups: list[analytics_pb2.EcmpGroups] = field(default_factory=list)
    trace_requests: list[traces_pb2.TraceRequest] = field(default_factory=list)
    congestion_causes: list[analytics_pb2.CongestionCause] = field(default_factory=list)
    collective_profiles: list[flows_pb2.CollectiveProfile] = field(default_factory=list)
    #: (destination partition, batch) of the internal attributions topic
    attributions: list[tuple[int, internal_pb2.AttributionBatch]] = field(default_factory=list)
    group_fims: list[internal_pb2.GroupFimBatch] = field(default_factory=list)
    tokens: list[Any] = field(default_factory=list)
    windows: int = 0

    def extend(self, other: Emitted) -> None:
        for name in self.__dataclass_fields__:
            if name == "windows":
                self.windows += other.windows
            else:
                getattr(self, name).extend(getattr(other, name))
