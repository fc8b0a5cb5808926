"""Whether a collision caused congestion (pure): its shared member's congestion signals against its idle sibling's.

A collision is an imbalance; it hurts a lossless RoCE fabric only when the shared member cannot carry what its
flows offer: its queue builds, the switch marks ECN (receivers answer with CNPs, DCQCN slows the senders), drops on
a lossy priority, or PFC pauses the link. The rule (docs/stream.md, "Collision harm"):

- **switch** evidence, the group switch's ``LinkCongestion`` of the same window for both members: the collision is
  harmful when the member's RoCE queue marked ECN or dropped, or the member was PFC-paused, while the idle sibling
  showed none of the three. A sibling as congested as the member means the group as a whole is congested
  (something downstream), not the collision: not harmful. A clean member: not harmful, whatever the sibling.
- **nic** evidence, when the switch has no trusted congestion counters for the member: the receiving NICs of the
  collision's flows. Harmful when they sent CNPs in the window (something on their paths marked), not harmful when
  they all reported none. The sibling is not measured then, and the CNPs may come from a queue elsewhere on the
  flows' paths: weaker evidence, which ``harm_basis`` says.
- Neither: unknown (``harm_basis`` empty, ``harmful`` false).

Only the RoCE priority / queue 3 counts: other classes' marks and pauses say nothing about RDMA flows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from flowtracer.schemas.v1 import analytics_pb2, common_pb2


@dataclass(frozen=True)
class LinkSignals:
    """One link's RoCE congestion signals in a window: ECN-marked packets, dropped packets, PFC pause frames that
    stopped it. ``known``: at least one of the three groups was trusted (the others count as 0)."""

    ecn: int = 0
    drops: int = 0
    pauses: int = 0
    known: bool = False

    @property
    def congested(self) -> bool:
        return self.known and (self.ecn > 0 or self.drops > 0 or self.pauses > 0)


def link_signals(lc: analytics_pb2.LinkCongestion | None) -> LinkSignals:
    """The signals of ``lc`` (None: the switch sent no congestion counters for the link in the window)."""
    if lc is None:
        return LinkSignals()
    return LinkSignals(ecn=lc.ecn_marked_pkts_roce if lc.ecn_valid else 0,
                       drops=lc.dropped_pkts_roce if lc.drops_valid else 0,
                       pauses=lc.pfc_pauses_received_roce if lc.pfc_valid else 0,
                       known=lc.ecn_valid or lc.drops_valid or lc.pfc_valid)


def cnps_by_nic(samples: Iterable[analytics_pb2.NicCongestionSample]) -> dict[str, int]:
    """CNPs sent per NIC (``host:rdma_device``, its ports summed) in one window, from the samples whose CNP group is
    trusted; a NIC with one untrusted port is left out (unknown, not smaller)."""
    out: dict[str, int] = {}
    bad: set[str] = set()
    for s in samples:
        if s.cnp_valid:
            out[s.nic] = out.get(s.nic, 0) + s.cnp_sent
        else:
            bad.add(s.nic)
    return {n: v for n, v in out.items() if n not in bad}


def receiver_cnps(flows: Iterable[common_pb2.FlowRef], nic_cnps: Mapping[str, int],
                  nic_of_ip: Mapping[str, str]) -> int | None:
    """CNPs the receiving NICs of ``flows`` sent in the window, each NIC once (packets); None when none of them
    reported a trusted count. ``nic_of_ip`` maps a receiver's IP to its ``host:rdma_device``."""
    nics = {nic_of_ip.get(f.key.dst_ip) for f in flows}
    counts = [nic_cnps[n] for n in nics if n is not None and n in nic_cnps]
    return sum(counts) if counts else None


@dataclass(frozen=True)
class Harm:
    """The verdict on one collision: ``basis`` "switch", "nic" or "" (unknown), and the evidence it rests on."""

    harmful: bool
    basis: str
    member: LinkSignals
    idle: LinkSignals
    cnps: int | None


def judge(member: LinkSignals, idle: LinkSignals, cnps: int | None) -> Harm:
    """Apply the rule of the module docstring to one collision's evidence."""
    if member.known and (idle.known or not member.congested):
        return Harm(member.congested and not idle.congested, "switch", member, idle, cnps)
    if not member.known and cnps is not None:
        return Harm(cnps > 0, "nic", member, idle, cnps)
    return Harm(False, "", member, idle, cnps)


def mark(c: analytics_pb2.Collision, harm: Harm) -> None:
    """Write ``harm`` into the collision's harm fields."""
    c.harmful, c.harm_basis = harm.harmful, harm.basis
    c.link_ecn_marked_pkts, c.link_dropped_pkts, c.link_pfc_pauses = harm.member.ecn, harm.member.drops, \
        harm.member.pauses
    c.idle_ecn_marked_pkts, c.idle_dropped_pkts, c.idle_pfc_pauses = harm.idle.ecn, harm.idle.drops, harm.idle.pauses
    c.receiver_cnps = harm.cnps or 0


def assess(c: analytics_pb2.Collision, congestion: Mapping[str, analytics_pb2.LinkCongestion],
           nic_cnps: Mapping[str, int], nic_of_ip: Mapping[str, str]) -> Harm:
    """Judge collision ``c`` by the window's LinkCongestion (by link id) and NIC CNP counts (by ``host:device``),
    and write the verdict into it."""
    harm = judge(link_signals(congestion.get(c.link)), link_signals(congestion.get(c.idle_link)),
                 receiver_cnps(c.flows, nic_cnps, nic_of_ip))
    mark(c, harm)
    return harm


def cnp_shares(congested_flows: Mapping[str, Sequence[common_pb2.FlowRef]], nic_cnps: Mapping[str, int],
               nic_of_ip: Mapping[str, str]) -> None:
    """Estimate each flow's share of its receiver's CNPs and write it into ``FlowRef.cnp_share`` (packets).

    ``congested_flows`` maps each congested link (its RoCE queue marked, dropped or it was paused this window) to
    the flows named on it. A receiving NIC's CNPs of the window go to its flows on those links in proportion to
    their bytes there: CNPs answer marked packets, marked packets come from congested queues, and at a DCQCN
    fixed point a flow's marks grow with its packets. An estimate: flows to the NIC on congested links this
    partition does not see (other switches, unnamed light flows) would take a part, and a flow marked at two
    queues is counted at each.
    """
    by_nic: dict[str, list[common_pb2.FlowRef]] = {}
    for flows in congested_flows.values():
        for f in flows:
            nic = nic_of_ip.get(f.key.dst_ip)
            if nic is not None and nic_cnps.get(nic):
                by_nic.setdefault(nic, []).append(f)
    for nic, flows in by_nic.items():
        total = sum(f.bytes for f in flows)
        for f in flows:
            f.cnp_share = nic_cnps[nic] * f.bytes / total if total else nic_cnps[nic] / len(flows)
