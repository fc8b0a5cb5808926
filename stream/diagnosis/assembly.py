"""Complete windows from the processor's output topics: the one rule for when a window may be diagnosed.

The processor's outputs of one window come from three stages (docs/stream.md): PathLoads from the flows
stage, then LinkLoads, LinkCongestion, group FimSamples and Collisions from the links stage, and last the
fabric FimSample from the fabric stage, which waits for every links partition's batch of that window. So:

* a window is **complete** when the fabric FimSample of it, or of any later window, arrived (the fabric
  stage publishes in window order on one partition: a later window's sample means this one has none,
  e.g. no ECMP group carried bytes);
* or, when no fabric sample comes (an idle fabric, the fabric stage down), ``grace_ns`` after its first
  record reached us;
* windows are handed out oldest first, each once; a record for a window already handed out is late
  (counted, dropped);
* but neither rule hands out anything while the reader is behind on a topic (records it has not read yet
  are waiting on a partition): a reader fetches each topic-partition on its own, so after a backlog (a
  restart, a busy machine) it can hold a later fabric sample before the same window's link loads. A fabric
  sample then says nothing about what else of the window is still unread.

Pure: the caller stamps each record with its own clock (``now_ns``, monotonic ns) and asks :meth:`complete`.
Used by ``flowtracer diagnose`` (stream/diagnosis/service.py) and by the demo.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, flows_pb2
from flowtracer.stream.diagnosis.window import CauseObs, CongestionObs, LinkObs, PathObs, WindowView

FABRIC_GROUP = "fabric"
FOLDS: dict[str, tuple[type, str]] = {
    topics.LINK_LOADS.name: (analytics_pb2.LinkLoad, "link_load"),
    topics.LINK_CONGESTION.name: (analytics_pb2.LinkCongestion, "link_congestion"),
    topics.FIM.name: (analytics_pb2.FimSample, "fim"),
    topics.COLLISIONS.name: (analytics_pb2.Collision, "collision"),
    topics.PATH_LOADS.name: (analytics_pb2.PathLoad, "path_load"),
    topics.COLLECTIVE_PROFILE.name: (flows_pb2.CollectiveProfile, "collective"),
    topics.CONGESTION_CAUSE.name: (analytics_pb2.CongestionCause, "congestion_cause"),
    topics.NIC_CONGESTION.name: (analytics_pb2.NicCongestionSample, "nic_congestion"),
}
"""Each output topic a window is assembled from: its message and the :class:`WindowAssembler` method folding it."""
TOPICS = tuple(FOLDS)
"""The output topics a window is assembled from."""
BEHIND_GRACES = 4
"""While the reader is behind, a window still completes once this many graces passed since its first record, so a
partition that never catches up (a broker that keeps failing one fetch) delays the diagnosis, never stops it."""


@dataclass
class WindowAssembler:
    """Folds output records into :class:`WindowView` s and hands out complete ones, in order.

    ``hop_ns``: the processor's window length, ns; ``grace_ns``: how long after its first record a window
    without a fabric FimSample is taken as complete, ns."""

    hop_ns: int
    grace_ns: int
    pending: dict[int, WindowView] = field(default_factory=dict)
    #: window end ns -> our clock when its first record arrived, ns
    first_seen_ns: dict[int, int] = field(default_factory=dict)
    #: newest window end with a fabric FimSample, ns
    fabric_until_ns: int = 0
    #: newest window end handed out, ns
    done_until_ns: int = 0
    late_records: int = 0
    undecodable: int = 0

    def add(self, topic: str, value: bytes | None, now_ns: int) -> None:
        """Decode and fold one record of ``topic`` (other topics are ignored); a record that does not decode is
        counted, never raised."""
        fold = FOLDS.get(topic)
        if fold is None:
            return
        message, method = fold
        try:
            getattr(self, method)(message.FromString(value or b""), now_ns)
        except Exception:  # DecodeError, or fields of the wrong type: one odd record must not stop the diagnosis
            self.undecodable += 1

    def view(self, end_ns: int, now_ns: int) -> WindowView | None:
        """The pending view of the window ending at ``end_ns`` (created at its first record), None when late."""
        if end_ns <= self.done_until_ns:
            self.late_records += 1
            return None
        v = self.pending.get(end_ns)
        if v is None:
            v = self.pending[end_ns] = WindowView(end_ns, self.hop_ns)
            self.first_seen_ns[end_ns] = now_ns
        return v

    def link_load(self, ll: analytics_pb2.LinkLoad, now_ns: int) -> None:
        if (v := self.view(ll.window_end_ns, now_ns)) is not None:
            v.links[ll.link] = LinkObs(ll.link, ll.src_node, ll.dst_node, ll.speed_bps,
                                       ll.measured_bytes if ll.measured_valid else None, ll.attributed_bytes,
                                       ll.unexplained_bytes, ll.oper_up if ll.oper_valid else None)

    def link_congestion(self, lc: analytics_pb2.LinkCongestion, now_ns: int) -> None:
        if (v := self.view(lc.window_end_ns, now_ns)) is not None:
            v.congestion[lc.link] = CongestionObs(
                lc.ecn_marked_pkts if lc.ecn_valid else 0, lc.queue_watermark_bytes if lc.watermark_valid else 0,
                lc.dropped_pkts if lc.drops_valid else 0, lc.pfc_pauses_received_roce if lc.pfc_valid else 0)

    def congestion_cause(self, cc: analytics_pb2.CongestionCause, now_ns: int) -> None:
        if (v := self.view(cc.window_end_ns, now_ns)) is not None:
            v.causes[cc.link] = CauseObs(cc.cause, cc.origin, tuple(cc.spread_links))

    def nic_congestion(self, ns: analytics_pb2.NicCongestionSample, now_ns: int) -> None:
        """A NIC sample comes from its host's FlowBatch: that agent reported the window, whatever it sent."""
        if ns.host and (v := self.view(ns.window_end_ns, now_ns)) is not None:
            v.agents_reporting.add(ns.host)

    def fim(self, f: analytics_pb2.FimSample, now_ns: int) -> None:
        """A group's measured FIM joins its window; the fabric sample (either basis) completes it."""
        if f.group == FABRIC_GROUP:
            self.fabric_until_ns = max(self.fabric_until_ns, f.window_end_ns)
            return
        if (v := self.view(f.window_end_ns, now_ns)) is None:
            return
        if f.basis == analytics_pb2.LOAD_BASIS_MEASURED:
            v.group_fim[f.group] = f.fim
            v.group_measured_bytes[f.group] = f.total_bytes
        elif f.basis == analytics_pb2.LOAD_BASIS_ATTRIBUTED:
            v.group_attributed_bytes[f.group] = f.total_bytes

    def collision(self, c: analytics_pb2.Collision, now_ns: int) -> None:
        if (v := self.view(c.window_end_ns, now_ns)) is not None:
            v.collisions.add((c.group, c.link))

    def path_load(self, pl: analytics_pb2.PathLoad, now_ns: int) -> None:
        if (v := self.view(pl.window_end_ns, now_ns)) is not None:  # PathLoad names the device; we host:device
            v.paths.append(PathObs(f"{pl.src_host}:{pl.src_nic}", f"{pl.dst_host}:{pl.dst_nic}", pl.src_host,
                                   pl.dst_host, tuple(pl.links), pl.bytes, tuple(pl.jobs), pl.untrusted_bytes))

    def collective(self, cp: flows_pb2.CollectiveProfile, now_ns: int) -> None:
        """A collective with calls in the window joins it under its job (one without calls ran on from before)."""
        if cp.calls and cp.job_id and (v := self.view(cp.window_end_ns, now_ns)) is not None:
            v.collectives.setdefault(cp.job_id, set()).add(f"{cp.job_id}/{cp.comm_id}/{cp.operation}")

    def complete(self, now_ns: int, final: bool = False, behind: bool = False) -> list[tuple[WindowView, str]]:
        """Complete windows not yet handed out, oldest first, each with why it is complete: ``fim`` (its or a
        later fabric sample arrived), ``grace`` or ``final`` (everything pending, when the input ended). A
        window without link loads (nothing measured) is dropped, not handed out. ``behind``: the reader has
        records on some partition it has not read yet; until it has, only ``final`` completes a window, or
        ``BEHIND_GRACES`` graces since its first record."""
        out: list[tuple[WindowView, str]] = []
        for end in sorted(self.pending):
            if behind and not final:  # held while records wait unread, yet not for ever: a partition stuck behind
                if now_ns - self.first_seen_ns[end] < BEHIND_GRACES * self.grace_ns:
                    break
                how = "grace"
            elif end <= self.fabric_until_ns:
                how = "fim"
            elif now_ns - self.first_seen_ns[end] >= self.grace_ns:
                how = "grace"
            elif final:
                how = "final"
            else:
                break  # in order: a younger window waits for this one
            view = self.pending.pop(end)
            del self.first_seen_ns[end]
            self.done_until_ns = end
            if view.links:
                out.append((view, how))
        return out
