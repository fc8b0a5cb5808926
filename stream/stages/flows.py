"""Stage A, per flows partition: resolve the flows that enter the fabric at its leaves (pure).

Input: FlowBatches keyed by the sending NICs' leaf, and (for resolvers that learn from counters)
the CounterBatches of the same leaves, which co-partitioning puts here; their AFT groups go to resolvers that
follow the live groups (``GroupConsumer``) before the window's flows are resolved. Per finalized window:
PathLoads, and one AttributionBatch for every counters partition (bytes per link of the switches
that partition owns; empty batches too, as end-of-window markers).
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from flowtracer.fabric.routing import Fabric
from flowtracer.schemas import topics
from flowtracer.schemas.bounds import saturating_round
from flowtracer.schemas.topics import SCHEMA_VERSION, partition_for
from flowtracer.schemas.v1 import analytics_pb2, counters_pb2, flows_pb2, internal_pb2, traces_pb2
from flowtracer.stream.analytics.aft_groups import read_aft
from flowtracer.stream.analytics.attribution import attribute, heaviest, link_ends
from flowtracer.stream.analytics.collective_profiles import collective_profiles
from flowtracer.stream.analytics.collision_harm import cnps_by_nic
from flowtracer.stream.analytics.congestion import nic_congestion
from flowtracer.stream.analytics.flow_obs import FlowObserver, Unattributed
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.resolvers.contract import GroupConsumer, Resolver, RetraceRequester, TraceConsumer
from flowtracer.stream.stages.emitted import Emitted, release_due
from flowtracer.stream.stages.flow_paths import FlowPaths
from flowtracer.stream.stages.window_tracker import NO_STREAMS, stage_tracker

STREAMS = {"flows": topics.FLOWS.name, "counters": topics.COUNTERS.name}
"""The input topic (of the stage's own partition) each source name prefix comes in."""

_FLOW_ID = attrgetter("flow_id")
_TEMPLATES_MAX = 1 << 16  # PathLoad templates kept per stage (NIC pairs x paths); cleared when exceeded


SwitchBatch = counters_pb2.CounterBatch | counters_pb2.CongestionBatch
"""What a gNMI collector publishes per switch and sample instant."""


def counter_identity(batch: SwitchBatch) -> tuple[str, str, str, int, int]:
    """A switch batch's identity: one instant may come as several batches, a redelivery repeats one. Counters and
    congestion count their sequences apart, so the kind is part of it."""
    return (type(batch).__name__, batch.collector_id, batch.switch, batch.session, batch.sequence)


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
        #: This partition's leaves: the only switches whose counters the resolvers read (a leaf's uplinks carry
        #: only its own hosts' flows; a spine's counters here would only add a source to wait for).
        self.leaves = frozenset(lf for lf in fabric.leaves if partition_for(lf, partitions) == partition)
        if uses_counters:  # and the leaves' counters, for resolvers that learn from them
            mine |= frozenset(f"counters:{lf}" for lf in self.leaves)
        self.tracker = stage_tracker("flows", hop_ns, grace_ns, mine, f"flows stage of partition {partition}")
        self.unattributed = Unattributed()
        self._observe = FlowObserver(fabric)
        # (path id, src NIC, dst NIC) -> PathLoad with the fields that do not change per window: copying it
        # is about half the cost of building the message from keyword arguments.
        self._path_templates: dict[tuple[str, str, str], analytics_pb2.PathLoad] = {}
        self._dest = {sw: partition_for(sw, partitions) for sw in fabric.switch_names}
        self._trace_tokens: list[object] = []  # trace records applied to the resolver, released with the next state
        #: Each flow's published path: a FlowPath only on a change and at a heartbeat (flow_paths.py).
        self.flow_paths = FlowPaths(fabric, hop_ns)

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

    def add_trace(self, flow_id: str, trace: traces_pb2.PathTrace | None, token: object) -> bool:
        """A path trace (``None``: tombstone) for a resolver that reads them; False when it does not.

        Traces are resolver state, applied at once; the record is held (``token``) until the next
        finalized window's state, which includes it, is saved, so an ack never runs ahead of the state.
        """
        if not isinstance(self.resolver, TraceConsumer):
            return False
        self.resolver.observe_trace(flow_id, trace)
        self._trace_tokens.append(token)
        return True

    def add_counters(self, batch: counters_pb2.CounterBatch, token: object, now_ns: int) -> bool:
        """Counters of this partition's leaves, for resolvers that learn from them; other switches' are not
        buffered (False)."""
        if not self.uses_counters or batch.switch not in self.leaves:
            return False
        return self.tracker.add(self.window_of(batch.timestamp_ns), f"counters:{batch.switch}", batch, token, now_ns,
                                identity=counter_identity(batch))

    def finalize(self, now_ns: int, unread: frozenset[str] = NO_STREAMS) -> Emitted:
        """Every window due at ``now_ns`` (the worker's window clock, ns); ``unread``: the streams (``STREAMS``)
        with records not read yet (``WindowTracker.due``)."""
        out = release_due(self.tracker, self.tracker.due(now_ns, unread), self._window)
        if out.windows and self._trace_tokens:
            out.tokens.extend(self._trace_tokens)
            self._trace_tokens = []
        return out

    def _window(self, end: int, items: list[object]) -> Emitted:
        start = end - self.hop_ns
        obs = []
        measured: dict[str, int] = {}
        out = Emitted()
        # The live groups of this window's leaf counters apply to this window's flows (no delay; see docs/stream.md).
        follower = self.resolver if isinstance(self.resolver, GroupConsumer) else None
        for item in items:
            if isinstance(item, flows_pb2.FlowBatch):
                obs.extend(self._observe(item, self.unattributed))
                out.nic_congestion.extend(nic_congestion(item, self.hop_ns, start, end))
                out.collective_profiles.extend(collective_profiles(item, start, end))
            elif isinstance(item, counters_pb2.CounterBatch):
                measured.update(self.links.measured(item, self.hop_ns))
                if follower is not None and (view := read_aft(item, self.links, self.hop_ns)) is not None \
                        and view.groups:
                    follower.observe_groups(view.switch, view.groups, item.timestamp_ns)
        obs.sort(key=_FLOW_ID)  # resolvers and outputs see the same order on a replay
        placements = self.resolver.resolve(end, obs, measured)
        if isinstance(self.resolver, RetraceRequester):
            nics = self.links.fabric.nics
            out.trace_requests.extend(traces_pb2.TraceRequest(
                schema_version=SCHEMA_VERSION, flow_id=fid, src_leaf=nics[nic].leaf if nic in nics else "",
                reason=traces_pb2.TRACE_REASON_CONTRADICTION, window_end_ns=end,
                detail="a link of its traced path carried less than the traced flows sent")
                for fid, nic in self.resolver.take_retrace_requests())
        # Only the links that name flows keep them (and only the heavy ones): fewer objects per window.
        att = attribute(obs, placements, keep_flows=self._named_min_bytes)
        self.unattributed.flows += att.unplaced_flows
        self.unattributed.bytes += att.unplaced_bytes
        resolver = self.resolver.name
        templates = self._path_templates
        if len(templates) > _TEMPLATES_MAX:
            templates.clear()
        path_loads = out.path_loads
        prow, pbytes, pcount, pconf = att.path_row, att.path_bytes, att.path_flow_count, att.path_conf_bytes
        ptraced, puntrusted, pjobs = att.path_traced_bytes, att.path_untrusted_bytes, att.path_jobs
        psprayed = att.path_sprayed_bytes
        psrc, pdst, plinks = att.path_src_nic, att.path_dst_nic, att.path_links
        for pid in sorted(prow):
            i = prow[pid]
            key = (pid, psrc[i], pdst[i])
            tmpl = templates.get(key)
            if tmpl is None:
                src_host, src_nic = psrc[i].split(":", 1)
                dst_host, dst_nic = pdst[i].split(":", 1)
                tmpl = templates[key] = analytics_pb2.PathLoad(
                    schema_version=SCHEMA_VERSION, path_id=pid, links=plinks[i], src_host=src_host, src_nic=src_nic,
                    dst_host=dst_host, dst_nic=dst_nic, resolver=resolver)
            b = pbytes[i]
            m = analytics_pb2.PathLoad()
            m.CopyFrom(tmpl)
            m.window_start_ns = start
            m.window_end_ns = end
            m.bytes = saturating_round(b)  # sums of input bytes saturate, never overflow the field
            m.flow_count = pcount[i]
            m.confidence = pconf[i] / b if b else 1.0
            if ptraced[i]:
                m.traced_bytes = saturating_round(ptraced[i])
            if puntrusted[i]:
                m.untrusted_bytes = saturating_round(puntrusted[i])
                m.sprayed_bytes = saturating_round(psprayed[i])
            if pjobs[i]:
                m.jobs.extend(sorted(pjobs[i]))
            path_loads.append(m)
        # Shares are added straight into each destination's batch: building LinkShares apart and passing
        # them to the batch would copy every one.
        batches = [internal_pb2.AttributionBatch(
            schema_version=SCHEMA_VERSION, window_start_ns=start, window_end_ns=end,
            source_partition=self.partition, source_partitions=self.partitions, resolver=resolver)
            for _ in range(self.partitions)]
        shares_of = [b.links for b in batches]
        owner_of, dest_of, named_min = self.links.owner, self._dest, self._named_min_bytes
        lrow, lbytes, lcount, lconf, lflows = (att.link_row, att.link_bytes, att.link_flow_count, att.link_conf_bytes,
                                               att.link_flows)
        ends_of = link_ends(att)
        for lid in sorted(lrow):
            i = lrow[lid]
            owner = owner_of[lid]
            b = lbytes[i]
            ls = shares_of[dest_of[owner]].add()  # fields set one by one: a third cheaper than add(**fields)
            ls.link = lid
            ls.switch = owner
            ls.bytes = saturating_round(b)
            ls.flow_count = lcount[i]
            ls.confidence = lconf[i] / b if b else 1.0
            ends = ends_of.get(lid)
            if ends is not None:  # how many send to how many over the link: incast is many to one
                ls.src_nic_count, ls.dst_nic = ends
            threshold = named_min.get(lid)
            if threshold is not None:  # flows are named only on ECMP members (see __init__)
                named = heaviest(lflows.get(lid, ()), self.max_flows_per_link, threshold)
                if named:
                    ls.flows.extend(named)
        # Every counters partition gets the window's NIC CNP counts: its collisions judge their harm by the CNPs
        # their flows' receivers sent, and a receiver may sit behind any leaf.
        cnps = sorted(cnps_by_nic(out.nic_congestion).items())
        if cnps:
            for b in batches:
                for nic, n in cnps:
                    b.nic_cnps.add(nic=nic, cnp_sent=n)
        out.attributions.extend(enumerate(batches))
        # Last: what the rule remembers changes only for a window whose outputs all got built (failed_window).
        out.flow_paths.extend(self.flow_paths.window(start, end, obs, placements, self.resolver.name))
        return out
