"""The registry of outputs: every kind of record the processor (and the diagnosis) publishes, listed once.

One row per kind: the :class:`~flowtracer.stream.stages.emitted.Emitted` list that holds it, its protobuf message, its
Kafka topic (the contract's, ``schemas/topics.py``) and the message field that is its key, and its InfluxDB
measurement and line encoder (``stream/sinks/``) when it is written to the store. Everything else that goes through
the outputs derives from :data:`OUTPUTS`: what ``publish`` sends (:data:`KEYED`), what the sink writes
(:data:`WRITTEN`, :func:`to_lines`), what an unwritable output is dead-lettered as, and :data:`MEASUREMENTS`, which the
docs' measurement table and the dashboards' checks use.

Adding an output: a row here, its contract (message and topic), the typed ``Emitted`` list its stage fills and, if it
goes to the store, its measurement and encoder. Tests check the rows against the topic plan's ``OUTPUT_TOPICS``, the
processor's write ACLs and ``Emitted``'s lists; each row is checked against its contract when it is made.

The internal topics (attributions, group FIMs) are not here: they are the processor's own plumbing, sent to an
explicit partition, and not part of the output contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from google.protobuf.message import Message

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, flows_pb2, traces_pb2
from flowtracer.stream.sinks import measurements
from flowtracer.stream.sinks.line_protocol import (
    PointError,
    collective_profile_line,
    collision_line,
    congestion_cause_line,
    ecmp_drift_line,
    fim_line,
    flow_path_line,
    incident_line,
    link_congestion_line,
    link_load_line,
    nic_congestion_line,
    path_load_line,
)
from flowtracer.stream.sinks.measurements import Measurement


@dataclass(frozen=True)
class Output:
    """One kind of output: where its records come from and where they go."""

    kind: str
    """Its name; for the processor's outputs, the ``Emitted`` list that holds its records."""
    message: type[Message]
    topic: topics.Topic
    key: str | None
    """The message field whose value is each record's Kafka key; None: the runtime keys and stamps each record itself
    (a dead letter carries the key of the record it stands for, if any: ``stream/runtime/batch_worker.py``)."""
    measurement: Measurement | None = None
    """Its InfluxDB measurement; None: Kafka only."""
    encode: Callable[[Any], str] | None = None
    """Its line encoder (``line_protocol.py``), set exactly when ``measurement`` is."""
    by: Literal["processor", "diagnose"] = "processor"
    """Who publishes it: the processor's windows (an ``Emitted`` list), or ``flowtracer diagnose``."""

    def __post_init__(self) -> None:
        name = self.message.DESCRIPTOR.name
        if self.topic.message != name:
            raise ValueError(f"output {self.kind}: topic {self.topic.name} carries {self.topic.message}, not {name}")
        if self.key is not None and self.key not in self.message.DESCRIPTOR.fields_by_name:
            raise ValueError(f"output {self.kind}: {name} has no key field {self.key!r}")
        if (self.measurement is None) != (self.encode is None):
            raise ValueError(f"output {self.kind}: a measurement needs its encoder and an encoder its measurement")
        if self.measurement is not None and self.measurement.message != name:
            raise ValueError(f"output {self.kind}: measurement {self.measurement.name} is made from "
                             f"{self.measurement.message}, not {name}")


OUTPUTS: tuple[Output, ...] = (
    Output("link_loads", analytics_pb2.LinkLoad, topics.LINK_LOADS, "link",
           measurements.LINK_LOAD, link_load_line),
    Output("path_loads", analytics_pb2.PathLoad, topics.PATH_LOADS, "path_id",
           measurements.PATH_LOAD, path_load_line),
    Output("fims", analytics_pb2.FimSample, topics.FIM, "group",
           measurements.FIM, fim_line),
    Output("collisions", analytics_pb2.Collision, topics.COLLISIONS, "group",
           measurements.COLLISION, collision_line),
    Output("link_congestion", analytics_pb2.LinkCongestion, topics.LINK_CONGESTION, "link",
           measurements.LINK_CONGESTION, link_congestion_line),
    Output("nic_congestion", analytics_pb2.NicCongestionSample, topics.NIC_CONGESTION, "nic",
           measurements.NIC_CONGESTION, nic_congestion_line),
    Output("ecmp_drift", analytics_pb2.EcmpDrift, topics.ECMP_DRIFT, "switch",
           measurements.ECMP_DRIFT, ecmp_drift_line),
    Output("ecmp_groups", analytics_pb2.EcmpGroups, topics.ECMP_GROUPS, "switch"),
    Output("trace_requests", traces_pb2.TraceRequest, topics.TRACE_REQUESTS, "flow_id"),
    Output("congestion_causes", analytics_pb2.CongestionCause, topics.CONGESTION_CAUSE, "link",
           measurements.CONGESTION_CAUSE, congestion_cause_line),
    Output("collective_profiles", flows_pb2.CollectiveProfile, topics.COLLECTIVE_PROFILE, "job_id",
           measurements.COLLECTIVE_PROFILE, collective_profile_line),
    Output("flow_paths", analytics_pb2.FlowPath, topics.FLOW_PATHS, "flow_id",
           measurements.FLOW_PATH, flow_path_line),
    Output("incidents", analytics_pb2.Incident, topics.INCIDENTS, "id",
           measurements.INCIDENT, incident_line, by="diagnose"),
    Output("dead_letters", analytics_pb2.DeadLetter, topics.DEAD_LETTER, None),
)
"""Every output, in the order ``publish`` sends a window's records and the sink writes its lines."""

KEYED: tuple[Output, ...] = tuple(o for o in OUTPUTS if o.by == "processor" and o.key is not None)
"""The processor's outputs ``publish`` sends keyed by a field of the record."""
WRITTEN: tuple[Output, ...] = tuple(o for o in OUTPUTS if o.by == "processor" and o.measurement is not None)
"""The processor's outputs the sink writes (the rest go to Kafka only)."""
MEASUREMENTS: dict[str, Measurement] = {o.measurement.name: o.measurement for o in OUTPUTS if o.measurement}
"""Every measurement written to the store, by name: the one definition the docs' table and the dashboards' checks
use."""
ENCODERS: dict[type[Message], Callable[[Any], str]] = {o.message: o.encode for o in OUTPUTS if o.encode}
"""Message class -> its line encoder."""


def to_lines(messages: Iterable[Any]) -> list[str]:
    """Lines of any mix of the output messages :data:`ENCODERS` knows, in order."""
    out = []
    for msg in messages:
        encode = ENCODERS.get(type(msg))
        if encode is None:
            raise PointError(f"no line encoder for {type(msg).__name__}")
        out.append(encode(msg))
    return out
