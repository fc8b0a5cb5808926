"""Re-trace when the processor says a trace may no longer hold: two of its topics in, the tracer's entry points out.

Both topics are written only by the processor and only read here: data still flows one way on each.

- ``GroupWatch`` follows ``flowtracer.ecmp-groups.v1`` (compacted: from its beginning); ``GroupChanges`` says which
  switch a record changed, and every flow whose last trace crossed that switch is re-traced now
  (``Tracer.link_changed``, reason LINK_CHANGE), so a trace the change made stale is replaced within seconds, not
  at its refresh. A link going down or up shows the same way: the switch's group loses or regains the member.
- ``RequestWatch`` follows ``flowtracer.trace-requests.v1`` (events: from its end); each request names a flow whose
  trace the counters contradict, and the agent that knows the flow re-traces it now (``Tracer.mark_contradicted``,
  reason CONTRADICTION); the other agents do not know it and ignore it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flowtracer.collectors.agent.topic_reader import TopicReader
from flowtracer.collectors.agent.tracing.group_changes import GroupChanges
from flowtracer.collectors.agent.tracing.tracer import Tracer
from flowtracer.schemas.topics import ECMP_GROUPS, TRACE_REQUESTS
from flowtracer.schemas.v1 import traces_pb2

log = logging.getLogger(__name__)


class GroupWatch:
    """Calls ``tracer.link_changed([switch])`` for each switch whose groups a record of ``topic`` changed."""

    def __init__(self, bootstrap: str, tracer: Tracer, agent_id: str, topic: str = ECMP_GROUPS.name,
                 client_config: Mapping[str, Any] | None = None) -> None:
        self.tracer = tracer
        self.changes = GroupChanges()
        self.retraced = 0  # flows scheduled for a re-trace by group changes (cumulative)
        self.reader = TopicReader(bootstrap, topic, self.offer, f"flowtracer-agent-{agent_id}-groups",
                                  "the processor's ECMP groups", client_config)

    def offer(self, value: bytes) -> None:
        """One record of the topic (called on the reader's thread)."""
        switch = self.changes.offer(value)
        if switch is None:
            return
        n = self.tracer.link_changed([switch])
        self.retraced += n
        log.info("ECMP groups of %s changed: re-tracing %d flow(s) whose path crossed it", switch, n)

    def start(self) -> GroupWatch:
        self.reader.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        self.reader.close(timeout)


class RequestWatch:
    """Calls ``tracer.mark_contradicted(flow_id)`` for each request of ``topic`` (from its end)."""

    def __init__(self, bootstrap: str, tracer: Tracer, agent_id: str, topic: str = TRACE_REQUESTS.name,
                 client_config: Mapping[str, Any] | None = None) -> None:
        self.tracer = tracer
        self.retraced = 0  # requests for flows this agent traces (cumulative)
        self.reader = TopicReader(bootstrap, topic, self.offer, f"flowtracer-agent-{agent_id}-requests",
                                  "the processor's re-trace requests", client_config, from_end=True)

    def offer(self, value: bytes) -> None:
        """One record of the topic (called on the reader's thread); undecodable ones are ignored."""
        try:
            req = traces_pb2.TraceRequest.FromString(value)
        except Exception:
            return
        if req.flow_id and self.tracer.mark_contradicted(req.flow_id):
            self.retraced += 1
            log.info("the processor asks for flow %s to be re-traced: %s", req.flow_id, req.detail or "no detail")

    def start(self) -> RequestWatch:
        self.reader.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        self.reader.close(timeout)
