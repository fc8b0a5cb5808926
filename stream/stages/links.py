"""Stage B, per counters partition: measured vs attributed load of every link its switches own (pure).

Input: CounterBatches (and, when the collectors publish them, CongestionBatches) of this partition's switches and
the AttributionBatches every flows partition sent here (with the window's NIC CNP counts). A window is complete
when every flows partition's batch arrived and the switches that usually report have reported. Per window:
LinkLoads, rolling group FimSamples, Collisions (each judged harmful or not by the same window's congestion,
stream/analytics/collision_harm.py), LinkCongestion of the switches that sent congestion counters, EcmpDrift of the
switches whose AFT differs from the topology, EcmpGroups of the switches whose live groups changed (and of each one
once after a start), and one GroupFimBatch for the fabric-wide aggregation (with the evidence of each congested link,
for the fabric-wide congestion causes).

A switch's groups follow its AFT from the window its CounterBatch says so (``aft_groups``): a withdrawn next hop or
a changed weight is in that window's group samples; a switch that streams no group state keeps the topology's.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from flowtracer.fabric.routing import Fabric
from flowtracer.schemas import topics
from flowtracer.schemas.bounds import saturating_round
from flowtracer.schemas.topics import SCHEMA_VERSION, partition_for
from flowtracer.schemas.v1 import analytics_pb2, common_pb2, counters_pb2, internal_pb2
from flowtracer.stream.analytics.aft_groups import (
    AftView,
    WeightedGroup,
    groups_record,
    groups_signature,
    read_aft,
    switch_groups,
    topology_groups,
)
from flowtracer.stream.analytics.attribution import Share
from flowtracer.stream.analytics.collision_harm import assess, cnp_shares, link_signals
from flowtracer.stream.analytics.collisions import CollisionRule, GroupHistory, fim_samples, find_collision, group_hop
from flowtracer.stream.analytics.congestion import link_congestion
from flowtracer.stream.analytics.congestion_cause import congested, congested_link
from flowtracer.stream.analytics.group_drift import Drift, drift_change, drift_records, group_drift
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.stages.emitted import Emitted, release_due
from flowtracer.stream.stages.flows import counter_identity
from flowtracer.stream.stages.window_tracker import NO_STREAMS, stage_tracker

log = logging.getLogger(__name__)
STREAMS = {"counters": topics.COUNTERS.name, "congestion": topics.SWITCH_CONGESTION.name,
           "attr": topics.ATTRIBUTIONS.name}
"""The input topic (of the stage's own partition) each source name prefix comes in."""


class LinksStage:
    """Window state, rolling history and finalization of one counters partition."""

    def __init__(self, partition: int, partitions: int, fabric: Fabric, links: LinkIndex, hop_ns: int,
                 grace_ns: int, rolling_hops: int, rule: CollisionRule | None = None, resolver: str = "hash") -> None:
        self.partition = partition
        self.partitions = partitions
        self.links = links
        self.hop_ns = hop_ns
        self.rule = rule or CollisionRule()
        self.history = GroupHistory(rolling_hops)
        # Every flows partition that owns a leaf with hosts sends a batch per window: require those (the
        # others never send). Switches are learned from what reported recently.
        senders = {partition_for(n.leaf, partitions) for n in fabric.nics.values()}
        # The switches this partition owns report every sample too: also required, or a stage created at a
        # rebalance could close a window from the attributions alone before the counters are replayed.
        mine_switches = {sw for sw in fabric.switch_names if partition_for(sw, partitions) == partition}
        required = frozenset(f"attr:{q}" for q in senders) | frozenset(f"counters:{sw}" for sw in mine_switches)
        self.tracker = stage_tracker("links", hop_ns, grace_ns, required, f"links stage of partition {partition}")
        mine = {sw for sw in fabric.switch_names if partition_for(sw, partitions) == partition}
        #: The topology's groups of each switch (the fallback, and what drift is measured against), and the
        #: groups each switch's newest CounterBatch said it has.
        self.topology_groups = topology_groups(fabric, mine)
        self.live_groups: dict[str, list[WeightedGroup]] = dict(self.topology_groups)
        #: What each switch's groups were when last sent on the ecmp-groups topic (``groups_signature``): a record
        #: only when they change, and once per switch after a start (readers compare contents).
        self.groups_sent: dict[str, tuple[Any, ...]] = {}
        #: Each switch's differences as last logged: a log line only when they change.
        self.drift_logged: dict[str, tuple[Drift, ...]] = {}
        #: Each switch's newest AFT view and its window end: a window whose batches carry no next hops (its
        #: next-hop part late, in another batch) is no news about the AFT, so the view stands for a rolling window.
        self.last_view: dict[str, tuple[AftView, int]] = {}
        self.resolver = resolver
        #: (window end ns, congested link id -> measured utilization) of the last finalized window: a degraded
        #: link's plateau spans two congested windows. Congested links only: this is saved with every window.
        self.last_utilization: tuple[int, dict[str, float]] = (0, {})
        self.nic_of_ip = {ip: ref.name for ip, ref in fabric.nic_by_ip.items()}
        #: The live group lists ``_groups_by_link`` last indexed (held, so compared by identity) and its answer.
        self._by_link_memo: tuple[list[list[WeightedGroup]], dict[str, list[WeightedGroup]], dict[str, list[str]]] \
            | None = None
        #: Per switch: its last AFT groups (items in order; None: no view) and what ``_groups`` made of them.
        self._groups_memo: dict[str, tuple[Any, tuple[list[WeightedGroup], tuple[Any, ...], tuple[Drift, ...]]]] = {}
        #: Per link, its LinkLoad's fields that do not change per window, for the live groups' index they were
        #: made with (``_load_templates``).
        self._templates: dict[str, analytics_pb2.LinkLoad] = {}
        self._templates_for: dict[str, list[str]] | None = None

    def window_of(self, timestamp_ns: int) -> int:
        return -(-timestamp_ns // self.hop_ns) * self.hop_ns

    def state(self) -> dict[str, Any]:
        """What a new owner of the partition needs (JSON-able): the last published window and the history."""
        return {"released_up_to": self.tracker.released_up_to, "history": self.history.state(),
                "last_utilization": [self.last_utilization[0], self.last_utilization[1]]}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue after the windows a previous owner published: replayed records of those are late."""
        self.tracker.released_up_to = int(state["released_up_to"])
        self.history.restore(state["history"])
        end, util = state.get("last_utilization", (0, {}))  # absent in a state saved before it existed
        self.last_utilization = (int(end), {k: float(v) for k, v in util.items()})

    def add_counters(self, batch: counters_pb2.CounterBatch, token: object, now_ns: int) -> bool:
        return self.tracker.add(self.window_of(batch.timestamp_ns), f"counters:{batch.switch}", batch, token, now_ns,
                                identity=counter_identity(batch))

    def add_congestion(self, batch: counters_pb2.CongestionBatch, token: object, now_ns: int) -> bool:
        # Opt-in at the collectors, so not required: a switch that sent them recently is waited for like any
        # recent source, and one whose clock lags is not.
        return self.tracker.add(self.window_of(batch.timestamp_ns), f"congestion:{batch.switch}", batch, token,
                                now_ns, identity=counter_identity(batch))

    def add_attributions(self, batch: internal_pb2.AttributionBatch, token: object, now_ns: int) -> bool:
        # A flows partition replayed after a failover sends its batch again: the same identity.
        source = f"attr:{batch.source_partition}"
        return self.tracker.add(batch.window_end_ns, source, batch, token, now_ns, identity=source)

    def finalize(self, now_ns: int, unread: frozenset[str] = NO_STREAMS, upstream: Mapping[str, int] | None = None
                 ) -> Emitted:
        """Every window due at ``now_ns`` (ns); ``unread``: the streams (``STREAMS``) with records not read yet;
        ``upstream``: ``attr:<q>`` -> the window end its flows stage on this worker has released (WindowTracker.due)."""
        return release_due(self.tracker, self.tracker.due(now_ns, unread, upstream), self._window)

    def _window(self, end: int, items: list[object]) -> Emitted:
        start = end - self.hop_ns
        measured: dict[str, int] = {}
        reported: set[str] = set()
        shares: dict[str, Share] = {}
        member_flows: dict[str, list[common_pb2.FlowRef]] = {}  # only the links whose shares name flows
        # Per link: sending NICs summed over the partitions, and the one receiving NIC all of them named ("" when
        # not one): two dicts instead of a LinkEnds per link, which only congested links need (_congested).
        sources: dict[str, int] = {}
        destination: dict[str, str] = {}
        congestion: list[counters_pb2.CongestionBatch] = []
        views: dict[str, AftView | None] = {}  # per switch that reported: its AFT view in this window, if any
        nh_measured: dict[str, int] = {}
        nic_cnps: dict[str, int] = {}
        oper: dict[str, bool] = {}  # link -> up in every batch of the window that reported it
        for item in items:
            if isinstance(item, counters_pb2.CounterBatch):
                reported.add(item.switch)
                measured.update(self.links.measured(item, self.hop_ns))
                for lid, up in self.links.oper_up(item).items():
                    oper[lid] = oper.get(lid, True) and up
                view = read_aft(item, self.links, self.hop_ns)
                if view is not None:
                    nh_measured.update(view.nh_bytes)
                    views[item.switch] = view
                else:
                    views.setdefault(item.switch, None)
            elif isinstance(item, counters_pb2.CongestionBatch):
                congestion.append(item)
            elif isinstance(item, internal_pb2.AttributionBatch):
                for ls in item.links:
                    lid, b = ls.link, ls.bytes
                    s = shares.get(lid)
                    if s is None:
                        shares[lid] = Share(0.0 + b, ls.flow_count, 0.0 + b * ls.confidence)
                    else:
                        s.bytes += b
                        s.flow_count += ls.flow_count
                        s.conf_bytes += b * ls.confidence
                    if ls.flows:
                        named = member_flows.get(lid)
                        if named is None:
                            member_flows[lid] = list(ls.flows)
                        else:
                            named.extend(ls.flows)
                    n = ls.src_nic_count
                    if n:
                        dst = ls.dst_nic  # "": that partition's flows on the link go to several NICs
                        if lid in sources:
                            sources[lid] += n
                            if destination[lid] != dst:
                                destination[lid] = ""
                        else:
                            sources[lid] = n
                            destination[lid] = dst
                for nc in item.nic_cnps:
                    nic_cnps[nc.nic] = nc.cnp_sent
        out = Emitted()
        for sw, view in sorted(views.items()):
            if sw not in self.topology_groups:
                continue  # another partition's switch (a stray record): its owner compares it
            if view is not None:
                self.last_view[sw] = (view, end)
            elif sw in self.last_view:
                last, at = self.last_view[sw]
                if end - at <= self.history.hops * self.hop_ns:
                    view = last
                else:
                    del self.last_view[sw]
                    log.warning("ECMP groups of %s: no AFT next hops for %d windows, back to the topology's groups",
                                sw, self.history.hops)
            live, sig, drifts = self._groups(sw, view)
            self.live_groups[sw] = live
            if self.groups_sent.get(sw) != sig:
                self.groups_sent[sw] = sig
                out.ecmp_groups.append(groups_record(sw, live, start, end))
            out.ecmp_drift.extend(drift_records(drifts, start, end))
            line = drift_change(sw, self.drift_logged.get(sw, ()), drifts) if view is not None else None
            if line is not None:
                log.warning("%s", line)
            self.drift_logged[sw] = drifts
        out.link_congestion.extend(link_congestion(congestion, self.links, self.hop_ns, start, end))
        # Collisions are judged by this same window's congestion: the group switch owns both members, so their
        # LinkCongestion is computed here, from the CongestionBatches this window waited for; no delay.
        congestion_of = {lc.link: lc for lc in out.link_congestion}
        # Before collisions copy their flows: each named flow on a congested member gets its CNP share estimate.
        cnp_shares({lid: member_flows[lid] for lid, lc in congestion_of.items()
                    if lid in member_flows and link_signals(lc).congested}, nic_cnps, self.nic_of_ip)
        seconds = self.hop_ns / 1e9
        utilization = {lid: b * 8 / (self.links.fabric.links[lid].speed_bps * seconds) for lid, b in measured.items()}
        link_ids = {lk.id for sw in reported for lk in self.links.owned[sw]} | set(shares)
        # A link's groups are those its switch has now (live: its AFT's, else the topology's): they name it, and
        # their other members are its siblings.
        groups_of, group_ids = self._groups_by_link()
        templates = self._load_templates(group_ids)
        link_loads, new_load = out.link_loads, analytics_pb2.LinkLoad
        for lid in sorted(link_ids):
            tmpl = templates.get(lid)
            if tmpl is None:
                tmpl = templates[lid] = self._load_template(lid, group_ids.get(lid, ()))
            share = shares.get(lid)
            attributed = saturating_round(share.bytes) if share else 0
            valid = lid in measured
            meas = saturating_round(measured.get(lid, 0))
            m = new_load()
            m.CopyFrom(tmpl)
            m.window_start_ns = start
            m.window_end_ns = end
            m.measured_bytes = meas
            m.measured_valid = valid
            m.attributed_bytes = attributed
            m.unexplained_bytes = meas - attributed if valid else 0
            m.utilization = utilization.get(lid, 0.0)
            m.flow_count = share.flow_count if share else 0
            m.oper_up = oper.get(lid, False)
            m.oper_valid = lid in oper
            link_loads.append(m)
        rolling_start = end - self.history.hops * self.hop_ns
        group_batch = internal_pb2.GroupFimBatch(schema_version=SCHEMA_VERSION, window_end_ns=end,
                                                 source_partition=self.partition, source_partitions=self.partitions)
        for wg in (wg for sw in sorted(self.live_groups) for wg in self.live_groups[sw]):
            g = wg.group
            if g.switch not in reported and not any(m.id in shares for m in g.members):
                continue
            hop = group_hop(g, measured, shares, nh_measured)
            samples = fim_samples(wg, self.history.add(g.id, end, hop, self.hop_ns), rolling_start, end, self.resolver)
            out.fims.extend(samples)
            group_batch.groups.extend(samples)
            collision = find_collision(g, hop, member_flows, self.hop_ns, self.rule, start, end, self.resolver)
            if collision is not None:
                assess(collision, congestion_of, nic_cnps, self.nic_of_ip)
                out.collisions.append(collision)
        congested_links = self._congested(out.link_congestion, utilization, shares, sources, destination,
                                          groups_of, start)
        group_batch.congested.extend(congested_links)
        self.last_utilization = (end, {c.congestion.link: c.utilization for c in congested_links
                                       if c.utilization >= 0})
        out.group_fims.append(group_batch)
        return out

    def _groups(self, sw: str, view: AftView | None) -> tuple[list[WeightedGroup], tuple[Any, ...], tuple[Drift, ...]]:
        """A switch's live groups, their signature and their drift from the topology, by ``view`` (None: the
        topology's). Worked out again only when the AFT groups differ from the last window's, in content or order
        (a switch's AFT rarely changes; the drift lists ports in the view's order)."""
        key = tuple(tuple(g.items()) for g in view.groups) if view is not None else None
        memo = self._groups_memo.get(sw)
        if memo is not None and memo[0] == key:
            return memo[1]
        topo = self.topology_groups[sw]
        live = switch_groups(view, topo, self.links)
        found = (live, groups_signature(live), group_drift(view, topo, self.links) if view is not None else ())
        self._groups_memo[sw] = (key, found)
        return found

    def _load_templates(self, group_ids: dict[str, list[str]]) -> dict[str, analytics_pb2.LinkLoad]:
        """Link id -> a LinkLoad holding the fields that do not change per window (copying it costs half as much
        as building one from keyword arguments; a window has one per link); emptied when ``group_ids``, the live
        groups' index, is built again."""
        if self._templates_for is not group_ids:
            self._templates, self._templates_for = {}, group_ids
        return self._templates

    def _load_template(self, lid: str, groups: list[str] | tuple[()]) -> analytics_pb2.LinkLoad:
        link = self.links.fabric.links[lid]
        return analytics_pb2.LinkLoad(schema_version=SCHEMA_VERSION, link=lid, src_node=link.src_node,
                                      src_port=link.src_port, dst_node=link.dst_node, dst_port=link.dst_port,
                                      speed_bps=link.speed_bps, resolver=self.resolver, groups=groups)

    def _groups_by_link(self) -> tuple[dict[str, list[WeightedGroup]], dict[str, list[str]]]:
        """Link id -> the live groups it is a member of, and their ids; built again only when a switch's live groups
        changed (``_groups`` hands out the same list while they do not)."""
        lists = [self.live_groups[sw] for sw in sorted(self.live_groups)]
        memo = self._by_link_memo
        if memo is None or len(memo[0]) != len(lists) or any(a is not b for a, b in zip(memo[0], lists, strict=True)):
            groups_of: dict[str, list[WeightedGroup]] = defaultdict(list)
            for groups in lists:
                for wg in groups:
                    for m in wg.group.members:
                        groups_of[m.id].append(wg)
            ids = {lid: [wg.group.id for wg in gs] for lid, gs in groups_of.items()}
            memo = self._by_link_memo = (lists, dict(groups_of), ids)
        return memo[1], memo[2]

    def _congested(self, lcs: list[analytics_pb2.LinkCongestion], utilization: dict[str, float],
                   shares: dict[str, Share], sources: Mapping[str, int], destination: Mapping[str, str],
                   groups_of: Mapping[str, list[WeightedGroup]], start: int) -> list[internal_pb2.CongestedLink]:
        """The evidence of this window's congested links (window start ``start`` ns) for the fabric stage."""
        hot = [lc for lc in lcs if congested(lc)]
        if not hot:
            return []
        previous = self.last_utilization[1] if self.last_utilization[0] == start else {}
        ids = {lc.link for lc in hot}
        fabric = self.links.fabric
        out = []
        for lc in hot:
            share = shares.get(lc.link)
            siblings = [m.id for wg in groups_of.get(lc.link, ()) for m in wg.group.members]
            out.append(congested_link(lc, utilization, previous, share.flow_count if share else 0,
                                      sources.get(lc.link, 0), destination.get(lc.link, ""), siblings, ids,
                                      to_host=lc.dst_node not in fabric.switch_names))
        return out
