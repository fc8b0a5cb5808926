"""Symptoms: what looks wrong in one window of the processor's outputs, as small typed records.

:class:`SymptomDetector` keeps the little history a symptom needs (each link's usual load, which
switches and hosts have reported) and turns each :class:`WindowView` into :class:`Symptom` records.
Pure: no clock, no I/O; windows must be given in order. Thresholds are in :class:`Thresholds`
(docs/stream.md, Incidents, says how to tune them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from flowtracer.stream.diagnosis.failure_blame import blame_failures
from flowtracer.stream.diagnosis.quiet import FailureQuiet
from flowtracer.stream.diagnosis.window import CauseObs, FabricModel, WindowView


class Kind(StrEnum):
    """What a symptom says; the subject is a directed link, an ECMP group, a switch or a host."""

    CAPACITY_LOSS = "capacity_loss"  # link: queue builds (ECN, watermark, drops) while well below nominal rate
    HOTSPOT = "hotspot"  # link: queue builds at (near) nominal rate: plain congestion
    LINK_DOWN = "link_down"  # link: its interface reports oper status down (it was up before): direct evidence
    LINK_DEAD = "link_dead"  # link: carried its usual load, now (almost) nothing, while the fabric still moves
    UNEXPLAINED = "unexplained"  # link: counters and trusted placements disagree beyond tolerance
    FIM_HIGH = "fim_high"  # group: rolling FIM above threshold
    COLLISION = "collision"  # group: heavy flows share a member while a sibling idles
    SWITCH_SILENT = "switch_silent"  # switch: none of its counters gave a trusted delta (silent, reset, rebooted)
    AGENT_MISSING = "agent_missing"  # host: its agent stopped reporting while its NICs still send
    TRAFFIC_STOPPED = "traffic_stopped"  # host: its agent reports, its NICs send nothing (a hung or finished job)
    PAUSED = "paused"  # link: PFC-paused by its receiver; ``origin``: where the pause started
    PATH_MOVED = "path_moved"  # NIC pair: still sends, but no longer over links it used (``links``: those)


def unexplained_evidence(unexplained: int, untrusted_on: int, untrusted_could: int) -> int:
    """What of a link's unexplained bytes (measured - attributed, bytes) is evidence against the trusted placements.

    Only bytes placed by a trusted method (``contract.TRUSTED_METHODS``: a trace or the configured hash of the
    flow itself) are compared with the counters: ``untrusted_on`` (bytes, placed on the link by infer or a
    fallback) leave the attribution, so the residual is measured - trusted. Trusted bytes alone above the counters
    (residual < 0) is evidence as it stands; counters above them may be untrusted bytes the resolver put on a
    sibling, so only what exceeds ``untrusted_could`` (bytes of every NIC pair with an untrusted placement and an
    equal-cost path over the link) is. Signed bytes; 0 when the untrusted bytes can account for it all.
    """
    residual = unexplained + untrusted_on
    return max(0, residual - untrusted_could) if residual > 0 else residual


@dataclass(frozen=True)
class Symptom:
    """One symptom in one window. ``value``: the measurement behind it (unit by kind: utilization 0..1 for
    link kinds, unexplained share of measured bytes, FIM, windows silent); ``detail``: one human line."""

    kind: Kind
    subject: str
    window_end_ns: int
    value: float
    detail: str
    #: capacity_loss: the link's throughput in the window, bit/s: a lower bound of its effective capacity
    #: (the queue was busy, so the link sent as fast as it could for at least part of the window).
    rate_bps: float = 0.0
    #: path_moved: the links the pair's traffic left; paused: the links from this one down to the pause's origin;
    #: traffic_stopped: the links the host's flows crossed when it last sent
    links: tuple[str, ...] = ()
    #: paused: the NIC (``host:rdma_device``) or switch port (``switch:port``) where the pause started
    origin: str = ""
    #: traffic_stopped: the job ids of the host's flows when it last sent
    jobs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Thresholds:
    """Every threshold of the symptoms. Bytes are per window."""

    #: a link is congested when its egress queue marked at least this many packets ECN CE ...
    ecn_marked_pkts: int = 50
    #: ... or its queue watermark reached this many bytes, or it dropped a packet
    queue_watermark_bytes: int = 100_000
    #: congested below this utilization of nominal speed: capacity loss; at or above: a hot spot
    capacity_loss_utilization: float = 0.8
    #: |unexplained| must exceed this share of measured bytes and ...
    unexplained_share: float = 0.1
    #: ... this many bytes (small windows are noise)
    unexplained_min_bytes: int = 100_000_000
    #: rolling measured FIM of a group at or above this is a symptom
    fim: float = 0.5
    #: a link is dead when it carries under this share of its usual load ...
    dead_share: float = 0.02
    #: ... and its usual load (EWMA of live windows) is at least this many bytes per window ...
    dead_min_usual_bytes: int = 100_000_000
    #: ... while the fabric's switch-to-switch links still carry at least this share of their usual total
    dead_fabric_share: float = 0.5
    #: EWMA weight of the newest window in a link's usual load
    usual_alpha: float = 0.3
    #: a host counts as reporting after this many windows with flows; missing while it reported one of
    #: the last ``agent_memory`` windows and none since ...
    agent_min_windows: int = 3
    agent_memory: int = 120
    #: ... and its agent sent no batch the window shows (no NIC sample) while its uplinks carried at least this
    #: share of their usual bytes: the switch saw traffic the agent did not report. Quieter uplinks: the host sent
    #: nothing (traffic_stopped), which is not a missing agent
    agent_uplink_share: float = 0.1
    #: ... and at least this many bytes (a trickle of other traffic is no flow the agent missed)
    agent_uplink_min_bytes: int = 1_000_000
    #: a link is paused when its transmitting end received at least this many PFC pause frames of the RoCE priority
    #: in the window (a 400G link held paused for the whole second receives about 23,842)
    pause_frames: int = 1000
    #: windows a link's pause_spread cause stands in for a window whose CongestionCause did not arrive (late)
    cause_memory: int = 2
    #: windows after a failure starts (a link down or dead, a switch silent) during which unexplained bytes, high
    #: FIM and collisions of the groups and links it affects are not symptoms of their own: flows rehash around
    #: the failure (the resolver's placements are stale and the rolling FIM remembers the detour for a rolling
    #: window). Once per failure, not renewed while it lasts (quiet.py)
    after_failure_windows: int = 15


@dataclass
class SymptomDetector:
    """Per-window symptoms over a fabric; feed windows in order with :meth:`detect`."""

    model: FabricModel
    thresholds: Thresholds = field(default_factory=Thresholds)
    #: directed link -> usual measured bytes per window (EWMA over windows it was live)
    usual: dict[str, float] = field(default_factory=dict)
    usual_fabric: float = 0.0
    #: switches that gave a trusted delta at least once
    reported_switches: set[str] = field(default_factory=set)
    #: host -> windows with flows, and the window end it last had flows
    host_windows: dict[str, int] = field(default_factory=dict)
    host_last_ns: dict[str, int] = field(default_factory=dict)
    #: links whose interface reported oper status up at least once (a port down from the start is not news)
    seen_up: set[str] = field(default_factory=set)
    #: directed link -> its oper status as last reported (up or not)
    oper_last: dict[str, bool] = field(default_factory=dict)
    #: end of the newest window in which some link's oper status changed (down or back up), ns
    last_oper_change_ns: int = 0
    #: end of the newest window with a silent switch, ns
    last_silent_ns: int = 0
    #: sending>receiving NIC -> links its traffic crossed in the previous window
    pair_links: dict[str, frozenset[str]] = field(default_factory=dict)
    #: sending>receiving NIC -> (links it left, window end it left them, ns), while it stays off them
    moved: dict[str, tuple[frozenset[str], int]] = field(default_factory=dict)
    #: links the pairs that moved in the newest window left or went to
    moved_now: set[str] = field(default_factory=set)
    #: host -> (links, job ids) of its flows in the newest window it sent
    host_last: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    #: directed link -> (its newest pause_spread cause, that window's end, ns)
    pause_causes: dict[str, tuple[CauseObs, int]] = field(default_factory=dict)
    #: symptoms of this window the quiet period after a failure held back: they keep open incidents alive only
    held: list[Symptom] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.quiet = FailureQuiet(self.model, self.thresholds.after_failure_windows)

    def detect(self, view: WindowView) -> list[Symptom]:
        """The symptoms of one window (and the history updated with it)."""
        out: list[Symptom] = []
        out += self._link_symptoms(view)
        out += self._group_symptoms(view)
        out += self._switch_symptoms(view)
        out += self._host_symptoms(view)
        out += self._path_symptoms(view)
        out = blame_failures(self.model, view, out)
        if any(s.kind is Kind.SWITCH_SILENT for s in out):
            self.last_silent_ns = view.end_ns
        quiet_ns = self.thresholds.after_failure_windows * view.hop_ns
        self.quiet.update(view, out, self.moved_now)
        self.held = [s for s in out if self.quiet.holds(s, view.end_ns)]
        if self.held:
            out = [s for s in out if not self.quiet.holds(s, view.end_ns)]
        if self.last_silent_ns and view.end_ns - self.last_silent_ns <= quiet_ns:
            # a switch going away and coming back reroutes the fabric twice: links losing their traffic then
            # are its doing, and a silent switch has no counters to say which of its cables died
            out = [s for s in out if s.kind is not Kind.LINK_DEAD]
        return out

    # -- links ------------------------------------------------------------------------------------

    def _congested(self, view: WindowView, link: str) -> str | None:
        c = view.congestion.get(link)
        t = self.thresholds
        if c is None:
            return None
        why = []
        if c.ecn_marked_pkts >= t.ecn_marked_pkts:
            why.append(f"{c.ecn_marked_pkts} ECN-marked packets")
        if c.queue_watermark_bytes >= t.queue_watermark_bytes:
            why.append(f"queue up to {c.queue_watermark_bytes / 1e3:.0f} kB")
        if c.dropped_pkts > 0:
            why.append(f"{c.dropped_pkts} drops")
        return ", ".join(why) or None

    def _link_symptoms(self, view: WindowView) -> list[Symptom]:
        t = self.thresholds
        out = []
        secs = view.hop_ns / 1e9
        fabric_now = sum(lo.measured_bytes or 0 for lo in view.links.values() if self.model.is_fabric_link(lo.link))
        fabric_alive = self.usual_fabric <= 0 or fabric_now >= t.dead_fabric_share * self.usual_fabric
        if self._oper_changed(view):
            self.last_oper_change_ns = view.end_ns
        untrusted_on, untrusted_could = view.untrusted_on(self.model)
        rehashing = bool(self.last_oper_change_ns) and (
            view.end_ns - self.last_oper_change_ns <= t.after_failure_windows * view.hop_ns)
        for lo in view.links.values():
            if lo.oper_up:
                self.seen_up.add(lo.link)
            elif lo.oper_up is False and lo.link in self.seen_up:
                # the switch says so: no inference from lost traffic needed (and the usual load stays)
                out.append(Symptom(Kind.LINK_DOWN, lo.link, view.end_ns, 0.0, "interface oper status down"))
                continue
            if lo.measured_bytes is None:
                continue
            speed = lo.speed_bps or self.model.speed_bps(lo.link)
            util = lo.measured_bytes * 8 / (speed * secs) if speed else 0.0
            pause = self._paused(view, lo.link)
            if pause is not None:
                # its full queue and its lost traffic are the pause's doing, not a fault of the link: no capacity
                # loss, no dead link, and its usual load stays
                frames = view.congestion[lo.link].pauses_received
                out.append(Symptom(Kind.PAUSED, lo.link, view.end_ns, util,
                                   f"{frames} PFC pauses received at {util:.0%} of nominal; the pause started at "
                                   f"{pause.origin}", links=pause.spread_links, origin=pause.origin))
                continue
            why = self._congested(view, lo.link)
            if why is not None:
                low = util < t.capacity_loss_utilization
                out.append(Symptom(Kind.CAPACITY_LOSS if low else Kind.HOTSPOT, lo.link, view.end_ns, util,
                                   f"{why} at {util:.0%} of nominal", lo.measured_bytes * 8 / secs))
            usual = self.usual.get(lo.link)
            dead = (usual is not None and usual >= t.dead_min_usual_bytes and fabric_alive
                    and lo.measured_bytes < t.dead_share * usual)
            if dead and rehashing and lo.oper_up is True:
                # explained away: a link went down (or came back) lately and flows rehashed around it; this one
                # is up and only lost its traffic. Not dead, and its usual load is the new normal at once (an EWMA
                # would take it for dead again when the rehash period ends).
                self.usual[lo.link] = lo.measured_bytes
                continue
            if dead:
                out.append(Symptom(Kind.LINK_DEAD, lo.link, view.end_ns, util,
                                   f"{lo.measured_bytes / 1e6:.0f} MB, usually {usual / 1e6:.0f} MB"))
            elif fabric_alive:  # a dead link keeps its usual load; a fabric-wide pause teaches nothing
                a = t.usual_alpha
                self.usual[lo.link] = lo.measured_bytes if usual is None else (1 - a) * usual + a * lo.measured_bytes
            if self.model.is_fabric_link(lo.link) and lo.measured_bytes + abs(lo.unexplained_bytes) > 0:
                could = max(untrusted_could.get(lo.link, 0), untrusted_on.get(lo.link, 0))
                evidence = unexplained_evidence(lo.unexplained_bytes, untrusted_on.get(lo.link, 0), could)
                share = abs(evidence) / max(lo.measured_bytes, 1)
                if share >= t.unexplained_share and abs(evidence) >= t.unexplained_min_bytes:
                    aside = f"; {could / 1e6:.0f} MB of untrusted placements set aside" if could else ""
                    out.append(Symptom(Kind.UNEXPLAINED, lo.link, view.end_ns, min(share, 10.0),
                                       f"{evidence / 1e6:+.0f} MB no trusted placement explains "
                                       f"({share:.0%} of measured{aside})"))
        if fabric_alive:
            a = t.usual_alpha
            self.usual_fabric = fabric_now if self.usual_fabric <= 0 else (1 - a) * self.usual_fabric + a * fabric_now
        return out

    def _paused(self, view: WindowView, link: str) -> CauseObs | None:
        """The pause_spread cause of a link PFC paused in ``view`` (its own, or its newest one of the last
        ``cause_memory`` windows when this window's did not arrive); None when not paused or the processor named
        no origin (then its queue is judged as any other)."""
        t = self.thresholds
        cause = view.causes.get(link)
        if cause is not None and cause.cause == "pause_spread" and cause.origin:
            self.pause_causes[link] = (cause, view.end_ns)
        c = view.congestion.get(link)
        if c is None or c.pauses_received < t.pause_frames:
            return None
        kept = self.pause_causes.get(link)
        if kept is None or view.end_ns - kept[1] > t.cause_memory * view.hop_ns:
            return None
        return kept[0]

    def _oper_changed(self, view: WindowView) -> bool:
        """Whether some link's reported oper status differs from what it last reported (and remember it)."""
        changed = False
        for lo in view.links.values():
            if lo.oper_up is None:
                continue  # not reported (silent switch): no news either way
            changed |= self.oper_last.get(lo.link, lo.oper_up) != lo.oper_up
            self.oper_last[lo.link] = lo.oper_up
        return changed

    # -- groups -----------------------------------------------------------------------------------

    def _group_symptoms(self, view: WindowView) -> list[Symptom]:
        # A group whose bytes the agents' flows account for and where no two heavy flows share a member is as
        # even as its flows allow (two flows over four members: FIM 0.67 at best): not a symptom. Without the
        # flows (no agents, or traffic they do not see) a high FIM is all there is, and it stands.
        collided = {g for g, _ in view.collisions}
        out = [Symptom(Kind.FIM_HIGH, g, view.end_ns, f, f"rolling FIM {f:.2f}")
               for g, f in sorted(view.group_fim.items())
               if f >= self.thresholds.fim and (g in collided or not view.flows_explain(g))]
        for g, link in sorted(view.collisions):
            out.append(Symptom(Kind.COLLISION, g, view.end_ns, 1.0, f"heavy flows share {link}"))
        return out

    # -- switches ---------------------------------------------------------------------------------

    def _switch_symptoms(self, view: WindowView) -> list[Symptom]:
        valid: dict[str, bool] = {}
        for lo in view.links.values():
            # the switch that measures a link: its transmitter, or the leaf a host transmits to
            meas = lo.src_node if lo.src_node in self.model.switches else lo.dst_node
            valid[meas] = valid.get(meas, False) or lo.measured_bytes is not None
        out = []
        for sw in sorted(self.model.switches):
            if valid.get(sw):
                self.reported_switches.add(sw)
            elif sw in self.reported_switches and any(valid.values()):
                out.append(Symptom(Kind.SWITCH_SILENT, sw, view.end_ns, 1.0,
                                   "no trusted counter delta on any of its links (silent, reset or rebooted)"))
        return out

    # -- paths ------------------------------------------------------------------------------------

    def _path_symptoms(self, view: WindowView) -> list[Symptom]:
        now: dict[str, set[str]] = {}
        for p in view.paths:
            if p.bytes > 0:
                now.setdefault(f"{p.src_nic}>{p.dst_nic}", set()).update(p.links)
        keep_ns = self.thresholds.after_failure_windows * view.hop_ns
        self.moved_now = set()
        for pair, links in now.items():
            left = self.pair_links.get(pair, frozenset()) - links
            if left:
                self.moved[pair] = (frozenset(left) | self.moved.get(pair, (frozenset(), 0))[0], view.end_ns)
                self.moved_now |= left | links
        out = []
        for pair, (left, since) in sorted(self.moved.items()):
            back = left & now.get(pair, set())
            if back or view.end_ns - since > keep_ns:  # it came back, or the move is old news
                del self.moved[pair]
                continue
            if pair in now:
                out.append(Symptom(Kind.PATH_MOVED, pair, view.end_ns, float(len(left)),
                                   f"no longer over {', '.join(sorted(left))}", links=tuple(sorted(left))))
        # a pair that paused keeps its last links (a compute gap is not a new path)
        self.pair_links.update({pair: frozenset(links) for pair, links in now.items()})
        return out

    # -- hosts ------------------------------------------------------------------------------------

    def _host_symptoms(self, view: WindowView) -> list[Symptom]:
        """A host that sent flows and sends none now: its agent is missing when the switch still counts its
        traffic and no batch of its agent shows in the window; otherwise its traffic stopped (a hung or finished
        job: the agent has nothing to report, which is not a fault of the agent)."""
        t = self.thresholds
        sending: dict[str, tuple[set[str], set[str]]] = {}
        for p in view.paths:
            if p.bytes > 0 and p.src_host:
                links, jobs = sending.setdefault(p.src_host, (set(), set()))
                links.update(p.links)
                jobs.update(p.jobs)
        for h, (links, jobs) in sending.items():
            self.host_windows[h] = self.host_windows.get(h, 0) + 1
            self.host_last_ns[h] = view.end_ns
            self.host_last[h] = (tuple(sorted(links)), tuple(sorted(jobs)))
        out = []
        for h, n in sorted(self.host_windows.items()):
            last = self.host_last_ns[h]
            gone = (view.end_ns - last) // max(view.hop_ns, 1)
            if h in sending or n < t.agent_min_windows or not 0 < gone <= t.agent_memory:
                continue
            links, jobs = self.host_last.get(h, ((), ()))
            uplinks = [view.links[lk].measured_bytes for lk in self.model.host_uplinks.get(h, ()) if lk in view.links]
            sent = sum(b or 0 for b in uplinks)
            usual = sum(self.usual.get(lk, 0.0) for lk in self.model.host_uplinks.get(h, ()))
            measured = bool(uplinks) and None not in uplinks
            if h not in view.agents_reporting and sending and measured \
                    and sent >= max(t.agent_uplink_share * usual, t.agent_uplink_min_bytes):
                # nobody's flows at all is a pipeline or fabric-wide gap, not one agent
                out.append(Symptom(Kind.AGENT_MISSING, h, view.end_ns, float(gone),
                                   f"no flows reported for {gone} windows while its uplinks carried "
                                   f"{sent / 1e6:.0f} MB"))
            elif h in view.agents_reporting or (measured and sent < t.agent_uplink_share * usual):
                why = "its agent reports" if h in view.agents_reporting else "its uplinks are quiet too"
                out.append(Symptom(Kind.TRAFFIC_STOPPED, h, view.end_ns, float(gone),
                                   f"sent nothing for {gone} windows ({why})", links=links, jobs=jobs))
        return out
