"""What finalizing a window produces: records for Kafka and the store, and the inputs it may ack."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, counters_pb2, flows_pb2, internal_pb2, traces_pb2

if TYPE_CHECKING:
    from flowtracer.stream.stages.window_tracker import WindowTracker

log = logging.getLogger(__name__)

INPUT_TOPIC: dict[type[Message], str] = {
    counters_pb2.CounterBatch: topics.COUNTERS.name, counters_pb2.CongestionBatch: topics.SWITCH_CONGESTION.name,
    flows_pb2.FlowBatch: topics.FLOWS.name, internal_pb2.AttributionBatch: topics.ATTRIBUTIONS.name,
    internal_pb2.GroupFimBatch: topics.GROUP_FIM.name}
"""The (contract) topic each kind of record a stage buffers comes in (runtime/inputs.py decodes by it)."""


@dataclass
class Emitted:
    """Outputs of one or more finalized windows. ``tokens`` are acked once the outputs are durable.

    One list per processor output of the registry (``outputs.py``: its topic, key and measurement; a test checks
    that the lists and the rows match), then the internal topics' batches and the bookkeeping."""

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
    flow_paths: list[analytics_pb2.FlowPath] = field(default_factory=list)
    #: (destination partition, batch) of the internal attributions topic
    attributions: list[tuple[int, internal_pb2.AttributionBatch]] = field(default_factory=list)
    group_fims: list[internal_pb2.GroupFimBatch] = field(default_factory=list)
    #: Input records of windows whose computation failed (``failed_window``): to the dead-letter topic.
    dead_letters: list[analytics_pb2.DeadLetter] = field(default_factory=list)
    tokens: list[Any] = field(default_factory=list)
    windows: int = 0

    def extend(self, other: Emitted) -> None:
        for name in self.__dataclass_fields__:
            if name == "windows":
                self.windows += other.windows
            else:
                getattr(self, name).extend(getattr(other, name))


def failed_window(stage: str, end_ns: int, items: list[Any], exc: Exception) -> Emitted:
    """What a window whose computation raised produces: no outputs, and each of its input records as a DeadLetter
    naming the stage, the window and the error. Whatever slipped past the input checks costs that window, never the
    worker (an exception in ``finalize`` would be replayed into every worker of the group); logged with the
    traceback, for the bug it is."""
    log.error("%s: window ending %d failed (%s: %s); its %d input records are dead-lettered and the worker goes on",
              stage, end_ns, type(exc).__name__, exc, len(items), exc_info=exc)
    reason = f"{stage}: window ending {end_ns} failed: {type(exc).__name__}: {exc}"
    return Emitted(dead_letters=[analytics_pb2.DeadLetter(
        schema_version=topics.SCHEMA_VERSION, topic=INPUT_TOPIC.get(type(m), type(m).__name__),
        value=m.SerializeToString(), reason=reason, window_end_ns=end_ns)
        for m in items if isinstance(m, Message)])


def release_due(tracker: WindowTracker, due: Iterable[int], window: Callable[[int, list[Any]], Emitted]) -> Emitted:
    """Finalize each window end (ns) of ``due``: pop it from ``tracker``, compute its outputs with ``window`` (one
    that raises is dead-lettered whole: :func:`failed_window`) and carry its ack tokens. Every stage's ``finalize``
    releases its windows this one way."""
    out = Emitted()
    for end in due:
        items, tokens, _ = tracker.pop(end)
        try:
            out.extend(window(end, items))
        except Exception as e:  # the boundary: a window that trips a bug is dead-lettered, the worker goes on
            out.extend(failed_window(tracker.name, end, items, e))
        out.tokens.extend(tokens)
        out.windows += 1
    return out
