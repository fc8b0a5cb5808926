"""Stage A, per flows partition: resolve the flows that enter the fabric at its leaves (pure).

Input: FlowBatches keyed by the sending NICs' leaf, and (for resolvers that learn from counters)
the CounterBatches of the same leaves, which co-partitioning puts here. Per finalized window:
PathLoads, and one AttributionBatch for every counters partition (bytes per link of the switches
that partition owns; empty batches too, as end-of-window markers).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from flowtracer.schemas.fabric import Fabric
from flowtracer.schemas.topics import SCHEMA_VERSION, partition_for
from flowtracer.schemas.v1 import analytics_pb2, common_pb2, counters_pb2, flows_pb2, internal_pb2

from .attribute import Share, attribute, heaviest
from .emitted import Emitted
from .flow_obs import Unattributed, flow_observations
from .links import LinkIndex
from .resolve import Resolver
from .window_tracker import WindowTracker

#: How long a stage waits for a required upstream source that is missing (a failover in progress);
#: each downstream stage waits one more multiple, so it never gives up before its upstream did.
REQUIRED_GRACE_NS = 30_000_000_000


def counter_identity(batch: counters_pb2.CounterBatch) -> tuple[str, str, int, int]:
    """A CounterBatch's identity: one instant may come as several batches, a redelivery repeats one."""
    return (batch.collector_id, batch.switch, batch.session, batch.sequence)


class FlowsStage:
    """Window state and finalization of one flows partition."""

    def __init__(self, partition: int, partitions: int, fabric: Fabric, links: LinkIndex, resolver: Resolver,
                 hop_ns: int, grace_ns: int, uses_counters: bool, max_flows_per_link: int = 16,
                 heavy_share: float = 0.1) -> None:
        self.partition = partition
        self.partitions = partitions
        self.fabric = fabric
        self.links = links
        self.resolver = resolver
        self.hop_ns = hop_ns
        self.uses_counters = uses_counters
        self.max_flows_per_link = max_flows_per_link
        # Flows are named only where a collision can be reported: on ECMP members, and only the flows
        # heavy enough to count there (the links stage's rule), in bytes per hop.
        self._named_min_bytes = {m.id: heavy_share * m.speed_bps / 8 * hop_ns / 1e9
                                 for g in fabric.ecmp_groups.values() for m in g.members}
        # The hosts cabled to this partition's leaves send a FlowBatch per window: require them, or a
        # resolver that also reads counters (which arrive first) would learn to close windows without flows.
        mine = frozenset(f"flows:{n.host}@{n.leaf}" for n in fabric.nics.values()
                         if partition_for(n.leaf, partitions) == partition)
        if uses_counters:  # and the leaves' counters, for resolvers that learn from them
            mine |= frozenset(f"counters:{lf}" for lf in fabric.leaves if partition_for(lf, partitions) == partition)
        self.tracker = WindowTracker(hop_ns, grace_ns, required=mine, required_grace_ns=REQUIRED_GRACE_NS,
                                     name=f"flows stage of partition {partition}")
        self.unattributed = Unattributed()
        self._dest = {sw: partition_for(sw, partitions) for sw in fabric.switch_names}

    def window_of(self, timestamp_ns: int) -> int:
        """The window end a sample instant belongs to (the hop boundary at or after it)."""
        return -(-timestamp_ns // self.hop_ns) * self.hop_ns

    def state(self) -> dict[str, Any]:
        """What a new owner of the partition needs (JSON-able): the last published window, what the resolver learned."""
        return {"released_up_to": self.tracker.released_up_to,
                "resolver": self.resolver.state() if self.uses_counters else {}}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue after the windows a previous owner published: replayed records of those are late."""
        self.tracker.released_up_to = int(state["released_up_to"])
        if state.get("resolver"):
            self.resolver.restore(state["resolver"])

    def add_flows(self, batch: flows_pb2.FlowBatch, token: object, now_ns: int) -> bool:
        end = self.window_of(batch.window_end_ns)
        source = f"flows:{batch.host}@{batch.leaf}"
        return self.tracker.add(end, source, batch, token, now_ns, identity=source)

    def add_counters(self, batch: counters_pb2.CounterBatch, token: object, now_ns: int) -> bool:
        """Counters of this partition's leaves, for resolvers that learn from them."""
        if not self.uses_counters:
            return False
        return self.tracker.add(self.window_of(batch.timestamp_ns), f"counters:{batch.switch}", batch, token, now_ns,
                                identity=counter_identity(batch))

    def finalize(self, now_ns: int) -> Emitted:
        out = Emitted()
        for end in self.tracker.due(now_ns):
            items, tokens, _ = self.tracker.pop(end)
            out.extend(self._window(end, items))
            out.tokens.extend(tokens)
            out.windows += 1
        return out

    def _named(self, link: str, share: Share) -> list[common_pb2.FlowRef]:
        threshold = self._named_min_bytes.get(link)
        if threshold is None:
            return []
        return heaviest(share.flows, self.max_flows_per_link, threshold)

    def _window(self, end: int, items: list[object]) -> Emitted:
        start = end - self.hop_ns
        obs = []
        measured: dict[str, int] = {}
        for item in items:
            if isinstance(item, flows_pb2.FlowBatch):
                obs.extend(flow_observations(item, self.fabric, self.unattributed))
            elif isinstance(item, counters_pb2.CounterBatch):
                measured.update(self.links.measured(item, self.hop_ns))
        obs.sort(key=lambda f: f.flow_id)  # resolvers and outputs see the same order on a replay
        placements = self.resolver.resolve(end, obs, measured)
        att = attribute(obs, placements)
        self.unattributed.flows += att.unplaced_flows
        self.unattributed.bytes += att.unplaced_bytes
        resolver = self.resolver.name
        out = Emitted()
        for pid, ps in sorted(att.paths.items()):
            src_host, src_nic = ps.src_nic.split(":", 1)
            dst_host, dst_nic = ps.dst_nic.split(":", 1)
            out.path_loads.append(analytics_pb2.PathLoad(
                schema_version=SCHEMA_VERSION, window_start_ns=start, window_end_ns=end, path_id=pid,
                links=ps.links, src_host=src_host, src_nic=src_nic, dst_host=dst_host, dst_nic=dst_nic,
                bytes=round(ps.bytes), flow_count=ps.flow_count, resolver=resolver,
                confidence=ps.conf_bytes / ps.bytes if ps.bytes else 1.0))
        per_dest: dict[int, list[internal_pb2.LinkShare]] = defaultdict(list)
        for lid, share in sorted(att.links.items()):
            owner = self.links.owner[lid]
            per_dest[self._dest[owner]].append(internal_pb2.LinkShare(
                link=lid, switch=owner, bytes=round(share.bytes), flow_count=share.flow_count,
                flows=self._named(lid, share), confidence=share.confidence))
        for dest in range(self.partitions):
            out.attributions.append((dest, internal_pb2.AttributionBatch(
                schema_version=SCHEMA_VERSION, window_start_ns=start, window_end_ns=end,
                source_partition=self.partition, source_partitions=self.partitions, resolver=resolver,
                links=per_dest.get(dest, []))))
        return out
