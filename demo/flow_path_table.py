"""What the flow-paths topic says (pure): each live flow's newest path, the changes as they came, each flow's path
history for scoring, and the links' newest utilization.

Fed record by record (``add(topic, value, kafka_ts_ms)``, the shape ``OutputWatcher`` folds with), so
``flowtracer path`` reads it through the demo's one read-only reader and the demo's :class:`Observed` holds one for
the per-flow score. A FlowPath is sent on a change and at a heartbeat (stream/stages/flow_paths.py): the newest
record of a flow is its path until the next; an ``ENDED`` record removes it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2

HEAVY_SHARE = 0.1
"""A flow is heavy on a link when it sends at least this share of the link's speed (the processor's collision rule,
``CollisionRule``'s default)."""
CHANGES_KEPT = 10_000
"""Change events kept for ``--follow`` (the newest)."""
HISTORY_KEPT = 64
"""Path changes remembered per flow (the newest), for scoring the path in effect in each window."""
FlowTuple = tuple[str, str, int]
"""(src_ip, dst_ip, udp_src_port): the part of the 5-tuple that tells RoCEv2 flows apart (proto and dport are fixed)."""


@dataclass(frozen=True)
class LinkSeen:
    """A link's newest LinkLoad: utilization 0..1 (measured), its speed (bit/s) and window end (ns)."""

    utilization: float
    speed_bps: int
    end_ns: int


@dataclass
class FlowPathTable:
    """The newest FlowPath per live flow, change events and per-flow history (see the module docstring)."""

    flows: dict[str, analytics_pb2.FlowPath] = field(default_factory=dict)
    links: dict[str, LinkSeen] = field(default_factory=dict)
    #: (sequence number, record) of every record that is not a heartbeat, the newest :data:`CHANGES_KEPT`
    changes: deque[tuple[int, analytics_pb2.FlowPath]] = field(default_factory=lambda: deque(maxlen=CHANGES_KEPT))
    #: 5-tuple -> [(window end ns, links)] of its path changes, oldest first (the newest :data:`HISTORY_KEPT`)
    history: dict[FlowTuple, list[tuple[int, tuple[str, ...]]]] = field(default_factory=dict)
    sequence: int = 0
    undecodable: int = 0
    behind: bool = False
    """Set by the reader: whether its last poll left records unread."""

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics this table folds in."""
        return (topics.FLOW_PATHS.name, topics.LINK_LOADS.name)

    def add(self, topic: str, value: bytes | None, kafka_ts_ms: int = 0, now_ns: int | None = None) -> None:
        """Fold one record in; one that does not decode is counted, never raised (``now_ns`` is unused: the reader's
        signature)."""
        try:
            if topic == topics.FLOW_PATHS.name:
                if value is not None:  # a tombstone (compaction's delete marker) says nothing
                    self.add_path(analytics_pb2.FlowPath.FromString(value))
            elif topic == topics.LINK_LOADS.name:
                ll = analytics_pb2.LinkLoad.FromString(value or b"")
                seen = self.links.get(ll.link)
                if ll.measured_valid and (seen is None or ll.window_end_ns >= seen.end_ns):
                    self.links[ll.link] = LinkSeen(ll.utilization, ll.speed_bps, ll.window_end_ns)
        except Exception:  # a reader must not die on one odd record
            self.undecodable += 1

    def add_path(self, m: analytics_pb2.FlowPath) -> None:
        """Fold one FlowPath in (an older one than the flow's newest, e.g. a replay, only adds to the history)."""
        old = self.flows.get(m.flow_id)
        if old is not None and m.window_end_ns < old.window_end_ns:
            return
        ended = m.change == analytics_pb2.FLOW_PATH_CHANGE_ENDED
        if ended:
            self.flows.pop(m.flow_id, None)
        else:
            self.flows[m.flow_id] = m
        links = tuple(m.links)
        if m.change != analytics_pb2.FLOW_PATH_CHANGE_HEARTBEAT:
            self.sequence += 1
            self.changes.append((self.sequence, m))
        key = (m.key.src_ip, m.key.dst_ip, m.key.udp_src_port)
        past = self.history.setdefault(key, [])
        now = () if ended else links
        if not past or past[-1][1] != now:  # heartbeats and repeats add nothing
            past.append((m.window_end_ns if not ended else m.window_end_ns + 1, now))
            del past[:-HISTORY_KEPT]

    def path_at(self, key: FlowTuple, end_ns: int) -> tuple[str, ...]:
        """The links of the path published for flow ``key`` in effect in the window ending ``end_ns``: its newest
        record at or before that window (empty: none, or it had ended)."""
        found: tuple[str, ...] = ()
        for at, links in self.history.get(key, ()):
            if at > end_ns:
                break
            found = links
        return found

    def heavy(self, m: analytics_pb2.FlowPath, link: str) -> bool:
        """Whether flow ``m`` sends at least :data:`HEAVY_SHARE` of ``link``'s speed (by its newest record's bytes
        over its window); unknown speed: not heavy."""
        seen = self.links.get(link)
        seconds = (m.window_end_ns - m.window_start_ns) / 1e9
        if seen is None or not seen.speed_bps or seconds <= 0:
            return False
        return m.bytes * 8 / seconds >= HEAVY_SHARE * seen.speed_bps

    def sharing(self) -> dict[str, list[str]]:
        """Switch-to-switch link -> the flow ids of the heavy flows whose newest path crosses it (two or more: they
        share a member)."""
        on: dict[str, list[str]] = {}
        for fid, m in self.flows.items():
            for hop in m.hops[:-1]:  # the last hop leaves to the receiving host: every flow of that NIC shares it
                if self.heavy(m, hop.out_link):
                    on.setdefault(hop.out_link, []).append(fid)
        return {lid: sorted(fids) for lid, fids in on.items() if len(fids) > 1}

    def forget_ended(self, before_ns: int) -> None:
        """Drop the history of flows that ended before ``before_ns`` (ns): a run of days keeps the live flows' and
        the recent ones', not every flow it ever saw."""
        for key in [k for k, past in self.history.items() if not past[-1][1] and past[-1][0] < before_ns]:
            del self.history[key]
