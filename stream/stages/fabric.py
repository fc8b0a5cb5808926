"""Stage C, one partition: the fabric-wide FIM from every counters partition's group FIMs, and the cause of every
congested link from every partition's congested links (PFC spreads across switches of any partition) (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowtracer.schemas import topics
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import analytics_pb2, internal_pb2
from flowtracer.stream.analytics.congestion_cause import congestion_causes
from flowtracer.stream.analytics.fim import fabric_fim
from flowtracer.stream.stages.emitted import Emitted, release_due
from flowtracer.stream.stages.window_tracker import NO_STREAMS, stage_tracker

FABRIC = "fabric"
STREAMS = {"groups": topics.GROUP_FIM.name}
"""The input topic each source name prefix comes in (partition 0: the topic has one)."""


class FabricStage:
    """Waits for the GroupFimBatch of every counters partition that reports, then emits the fabric samples and
    the congestion causes."""

    def __init__(self, hop_ns: int, grace_ns: int, rolling_hops: int, senders: frozenset[int] = frozenset()) -> None:
        """``senders``: the counters partitions that own switches (each sends one batch per window)."""
        self.hop_ns = hop_ns
        self.rolling_hops = rolling_hops
        self.tracker = stage_tracker("fabric", hop_ns, grace_ns, frozenset(f"groups:{q}" for q in senders),
                                     "fabric stage")

    def state(self) -> dict[str, Any]:
        """What a new owner needs (JSON-able): the last published window."""
        return {"released_up_to": self.tracker.released_up_to}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue after the windows a previous owner published: replayed records of those are late."""
        self.tracker.released_up_to = int(state["released_up_to"])

    def add(self, batch: internal_pb2.GroupFimBatch, token: object, now_ns: int) -> bool:
        source = f"groups:{batch.source_partition}"
        return self.tracker.add(batch.window_end_ns, source, batch, token, now_ns, identity=source)

    def finalize(self, now_ns: int, unread: frozenset[str] = NO_STREAMS, upstream: Mapping[str, int] | None = None
                 ) -> Emitted:
        """Every window due at ``now_ns`` (ns); ``unread``: the streams (``STREAMS``) with records not read yet;
        ``upstream``: ``groups:<q>`` -> the window end its links stage on this worker has released."""
        return release_due(self.tracker, self.tracker.due(now_ns, unread, upstream), self._window)

    def _window(self, end: int, items: list[internal_pb2.GroupFimBatch]) -> Emitted:
        """The fabric's congestion causes and FIM of the window ending at ``end`` (ns) from its group batches."""
        out = Emitted()
        # In partition order, not arrival order: float sums must not depend on how the workers interleave.
        items = sorted(items, key=lambda b: b.source_partition)
        samples = [s for b in items for s in b.groups]
        out.congestion_causes.extend(congestion_causes([c for b in items for c in b.congested],
                                                       end - self.hop_ns, end))
        for basis in (analytics_pb2.LOAD_BASIS_MEASURED, analytics_pb2.LOAD_BASIS_ATTRIBUTED):
            # A group of one member (what a withdrawal left of a group) cannot be imbalanced: docs/fim.md
            # leaves it out of the fabric figure rather than let its FIM 0 dilute it.
            mine = [s for s in samples if s.basis == basis and s.total_bytes > 0 and s.members >= 2]
            if not mine:
                continue
            total = sum(s.total_bytes for s in mine)
            out.fims.append(analytics_pb2.FimSample(
                schema_version=SCHEMA_VERSION, window_start_ns=end - self.rolling_hops * self.hop_ns,
                window_end_ns=end, group=FABRIC, basis=basis, members=len(mine),
                fim=fabric_fim([s.fim for s in mine], [s.total_bytes for s in mine]),
                fim_flows=fabric_fim([s.fim_flows for s in mine], [s.total_bytes for s in mine]),
                max_mean_ratio=max(s.max_mean_ratio for s in mine),
                cv=fabric_fim([s.cv for s in mine], [s.total_bytes for s in mine]), total_bytes=total,
                resolver=mine[0].resolver))
        return out
