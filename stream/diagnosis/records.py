"""An incident as the ``flowtracer.incidents.v1`` record (schemas/v1/analytics.proto ``Incident``)."""

from __future__ import annotations

from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.diagnosis.incidents import Incident

MAX_SUSPECTS = 5
"""Suspects a record carries: the ranking's head is what an operator acts on."""


def incident_record(inc: Incident, window_end_ns: int) -> analytics_pb2.Incident:
    """The snapshot of ``inc`` as of the window ending at ``window_end_ns`` (ns)."""
    return analytics_pb2.Incident(
        schema_version=SCHEMA_VERSION, window_end_ns=window_end_ns, id=inc.id, kind=inc.kind,
        state=str(inc.state) if inc.state is not None else "", start_ns=inc.start_ns,
        detected_ns=inc.detected_ns, end_ns=inc.end_ns, windows=inc.windows,
        suspects=[analytics_pb2.Suspect(component=c, score=round(score, 4), evidence=list(inc.evidence.get(c, ())))
                  for c, score in inc.ranked()[:MAX_SUSPECTS]],
        flows=sorted(inc.flows), hosts=sorted(inc.hosts), jobs=sorted(inc.jobs), collectives=sorted(inc.collectives),
        paused_links=sorted(inc.paused_links), stopped_hosts=sorted(inc.stopped_hosts))
