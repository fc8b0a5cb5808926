"""What the diagnosis reads: one window of the processor's outputs, and the fabric's components.

Pure data. A :class:`WindowView` is built from the output topics (link loads, link congestion, congestion causes,
NIC congestion samples, FIM, collisions, path loads, collective profiles) by whoever consumes them (the demo, a
bench from the simulator); the
:class:`FabricModel` from the topology. Nothing here reads Kafka or ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from flowtracer.fabric.routing import Fabric


@dataclass(frozen=True)
class LinkObs:
    """One directed link in one window (LinkLoad). ``measured_bytes`` None: no trusted counter delta."""

    link: str
    src_node: str
    dst_node: str
    speed_bps: int
    measured_bytes: int | None
    attributed_bytes: int = 0
    unexplained_bytes: int = 0
    #: oper status of the measuring end's interface (LinkLoad ``oper_up``); None: not reported (``oper_valid`` 0)
    oper_up: bool | None = None


@dataclass(frozen=True)
class CongestionObs:
    """Congestion signals of one directed link in one window (LinkCongestion): packets and bytes."""

    ecn_marked_pkts: int = 0
    queue_watermark_bytes: int = 0
    dropped_pkts: int = 0
    #: PFC pause frames of the RoCE priority the link's transmitting end received: its receiver stopped it (frames)
    pauses_received: int = 0


@dataclass(frozen=True)
class CauseObs:
    """Why the processor says a congested link was congested (CongestionCause): ``cause`` (pause_spread, incast,
    degraded_link, collision, unknown); for pause_spread ``origin`` is the NIC (``host:rdma_device``) or switch port
    (``switch:port``) where the pause started and ``spread_links`` the links from this one down to it."""

    cause: str
    origin: str = ""
    spread_links: tuple[str, ...] = ()


@dataclass(frozen=True)
class PathObs:
    """Bytes the resolver placed on one path in one window (PathLoad); NICs as ``host:rdma_device``."""

    src_nic: str
    dst_nic: str
    src_host: str
    dst_host: str
    links: tuple[str, ...]
    bytes: int
    #: scheduler job ids of the path's flows (PathLoad.jobs)
    jobs: tuple[str, ...] = ()
    #: bytes of ``bytes`` placed by an untrusted method (PathLoad.untrusted_bytes: infer, a fallback)
    untrusted_bytes: int = 0


@dataclass
class WindowView:
    """Everything the processor said about one window. ``hop_ns``: the window's length, ns."""

    end_ns: int
    hop_ns: int
    links: dict[str, LinkObs] = field(default_factory=dict)
    congestion: dict[str, CongestionObs] = field(default_factory=dict)
    #: ECMP group id -> measured-basis FIM (rolling, 0..1)
    group_fim: dict[str, float] = field(default_factory=dict)
    #: (group id, shared member link) of each Collision
    collisions: set[tuple[str, str]] = field(default_factory=set)
    paths: list[PathObs] = field(default_factory=list)
    #: ECMP group id -> member bytes summed, measured basis and attributed basis (the rolling FimSamples' totals)
    group_measured_bytes: dict[str, int] = field(default_factory=dict)
    group_attributed_bytes: dict[str, int] = field(default_factory=dict)
    #: job id -> "<job>/<comm_id>/<operation>" of its collectives with calls in this window (CollectiveProfile)
    collectives: dict[str, set[str]] = field(default_factory=dict)
    #: directed link -> why it was congested (CongestionCause)
    causes: dict[str, CauseObs] = field(default_factory=dict)
    #: hosts whose agent reported this window whatever their traffic: a NicCongestionSample of one of their NICs came
    #: from its FlowBatch (only where the NICs expose congestion counters; empty otherwise)
    agents_reporting: set[str] = field(default_factory=set)

    def untrusted_on(self, model: FabricModel) -> tuple[dict[str, int], dict[str, int]]:
        """Per directed link: the untrusted bytes placed on it, and the untrusted bytes that could be on it (of
        every NIC pair with an equal-cost path over it: an untrusted placement may have put them on a sibling).
        Bytes; links without any are absent."""
        on: dict[str, int] = {}
        could: dict[str, int] = {}
        pairs: dict[tuple[str, str], int] = {}
        for p in self.paths:
            if p.untrusted_bytes > 0:
                for lk in p.links:
                    on[lk] = on.get(lk, 0) + p.untrusted_bytes
                pairs[(p.src_nic, p.dst_nic)] = pairs.get((p.src_nic, p.dst_nic), 0) + p.untrusted_bytes
        for (src, dst), b in pairs.items():
            for lk in model.candidate_links(src, dst):
                could[lk] = could.get(lk, 0) + b
        return on, could

    def flows_explain(self, group: str, share: float = 0.9) -> bool:
        """Whether the agents' flows account for the group's measured bytes (attributed at least ``share`` of
        measured): then the flows are known, and a group they unbalance without a collision is unbalanced by
        their number and size, which no placement could avoid."""
        measured = self.group_measured_bytes.get(group, 0)
        return measured > 0 and self.group_attributed_bytes.get(group, 0) >= share * measured


def cable_of(link: str) -> str:
    """A cable's component id from either of its directed link ids: ``cable:<end>~<end>``, ends sorted."""
    tx, _, rx = link.partition(">")
    a, b = sorted((tx, rx))
    return f"cable:{a}~{b}"


@dataclass(frozen=True)
class FabricModel:
    """The topology as the risk model needs it: which links, groups and NICs each component holds."""

    fabric: Fabric

    @cached_property
    def switches(self) -> frozenset[str]:
        return self.fabric.switch_names

    @cached_property
    def hosts(self) -> frozenset[str]:
        return frozenset(h.name for h in self.fabric.topology.hosts)

    @cached_property
    def groups(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """ECMP group id -> (its switch, member link ids)."""
        return {g.id: (g.switch, tuple(m.id for m in g.members)) for g in self.fabric.ecmp_groups.values()}

    @cached_property
    def group_of_link(self) -> dict[str, str]:
        """Member link id -> the ECMP group it belongs to (the first, when a link is in several)."""
        out: dict[str, str] = {}
        for gid, (_sw, members) in self.groups.items():
            for m in members:
                out.setdefault(m, gid)
        return out

    @cached_property
    def groups_of_link(self) -> dict[str, tuple[str, ...]]:
        """Member link id -> every ECMP group it is a member of."""
        out: dict[str, list[str]] = {}
        for gid, (_sw, members) in self.groups.items():
            for m in members:
                out.setdefault(m, []).append(gid)
        return {lk: tuple(gs) for lk, gs in out.items()}

    @cached_property
    def host_uplinks(self) -> dict[str, tuple[str, ...]]:
        """Host -> the directed links its NICs transmit on (host to leaf)."""
        out: dict[str, list[str]] = {}
        for dl in self.fabric.links.values():
            if dl.host_link and dl.src_node in self.hosts:
                out.setdefault(dl.src_node, []).append(dl.id)
        return {h: tuple(v) for h, v in out.items()}

    @cached_property
    def link_from_port(self) -> dict[str, str]:
        """``switch:port`` or ``host:rdma_device`` -> the directed link it transmits on."""
        return {f"{dl.src_node}:{dl.src_port}": dl.id for dl in self.fabric.links.values()}

    @cached_property
    def switch_links(self) -> dict[str, tuple[str, ...]]:
        """Switch -> every directed link it transmits or receives on."""
        out: dict[str, list[str]] = {s: [] for s in self.switches}
        for dl in self.fabric.links.values():
            for node in (dl.src_node, dl.dst_node):
                if node in out:
                    out[node].append(dl.id)
        return {s: tuple(v) for s, v in out.items()}

    @cached_property
    def _candidates(self) -> dict[tuple[str, str], frozenset[str]]:
        return {}

    def candidate_links(self, src_nic: str, dst_nic: str) -> frozenset[str]:
        """Every link of every equal-cost path from one NIC (``host:rdma_device``) to another; empty when the
        topology does not know them."""
        key = (src_nic, dst_nic)
        hit = self._candidates.get(key)
        if hit is None:
            try:
                paths = self.fabric.equal_cost_paths(src_nic, dst_nic)
            except KeyError:
                paths = ()
            hit = self._candidates[key] = frozenset(lk for path in paths for lk in path)
        return hit

    def speed_bps(self, link: str) -> int:
        return self.fabric.links[link].speed_bps if link in self.fabric.links else 0

    def is_fabric_link(self, link: str) -> bool:
        """A switch-to-switch link (where placements, hashing and cables between switches matter)."""
        dl = self.fabric.links.get(link)
        return dl is not None and not dl.host_link
