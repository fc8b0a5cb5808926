"""Re-trace when the fabric's ECMP groups change: the processor's ecmp-groups topic in, ``Tracer.link_changed`` out.

A ``TopicReader`` follows ``flowtracer.ecmp-groups.v1`` (compacted, written only by the processor: data still flows
one way on it); ``GroupChanges`` says which switch a record changed, and every flow whose last trace crossed that
switch is re-traced now (reason LINK_CHANGE), so a trace the change made stale is replaced within seconds, not at
its refresh. A link going down or up shows the same way: the switch's group loses or regains the member.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flowtracer.collectors.agent.topic_reader import TopicReader
from flowtracer.collectors.agent.tracing.group_changes import GroupChanges
from flowtracer.collectors.agent.tracing.tracer import Tracer
from flowtracer.schemas.topics import ECMP_GROUPS

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
