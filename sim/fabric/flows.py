"""Flow directions, transfers and per-tick accounting: how fluid progress becomes whole bytes.

Pure bookkeeping, used by the engine at each tick end:

- ``account_tick``: each data flow's payload moved in the tick is the whole-byte increase of its
  cumulative progress; its packets are ceil(payload / MTU); its frame bytes are payload + packets x
  ``header_bytes``. The reverse direction of the QP pair carries one 64-byte clear-to-send write
  (one packet) per ``cts_every`` payload bytes. Link bytes and packets are the sums over the flows
  whose path crosses the link, so switch counters equal host flow bytes exactly. A flow through spraying or
  adaptive switches (``spread``) has its bytes dealt over its paths by their policies (``spread.deal``) after
  the hashed flows are summed, so least-loaded sees the tick's other traffic.
- ``restate_tick``: a real data plane's bytes (the kernel's senders) in place of the model's, links summed again.
- ``nh_deltas``: the part of each link's bytes its transmitting switch forwarded by an ECMP decision.
- ``apply_to_hosts``: the same numbers onto the HostStates (QP and port counters, PSNs, new and
  destroyed QPs, NCCL log lines), each host under its lock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.roce import FRAME_OVERHEAD_BYTES
from flowtracer.sim.fabric.congestion import Extra
from flowtracer.sim.fabric.congestion_math import ActiveFlows
from flowtracer.sim.fabric.rdma import PSN_MASK, NicEnd, QpPair
from flowtracer.sim.fabric.spread import Dealt, SpreadRoute, deal
from flowtracer.sim.hosts.state import HostState, PortCounters, QpState

#: Frame bytes per RoCEv2 packet besides payload (schemas.roce: one copy for the simulator and the what-if).
HEADER_BYTES = FRAME_OVERHEAD_BYTES
#: NCCL's clear-to-send: a 64-byte RDMA write back to the sender per receive of up to 512 KiB.
CTS_BYTES = 64
CTS_EVERY = 512 * 1024


@dataclass(eq=False)
class Transfer:
    """Flows moving ``bytes_per_flow`` payload bytes each at one common rate (bit/s of payload)."""

    flows: list[Flow]
    bytes_per_flow: float
    demand: float = math.inf
    on_done: Callable[[int], None] | None = None
    done: float = 0.0
    rate: float = 0.0
    #: Links of all its flows' paths (routing version, array), or None when a flow has no path.
    links: tuple[int, np.ndarray | None] = (-1, None)
    #: Weight of each entry of ``links`` (a spread flow's share of each link), None: all 1.
    link_weights: np.ndarray | None = None


@dataclass(eq=False)
class Flow:
    """One direction of a QP pair. Payload counts are bytes; ``path`` holds link indexes."""

    id: int
    pair: QpPair
    forward: bool
    src: NicEnd
    dst: NicEnd
    headers: HeaderFields
    tx_qp: QpState
    rx_qp: QpState
    path: tuple[int, ...] | None = None
    nh_hops: tuple[int, ...] = ()  # links of the path chosen by an ECMP group (next-hop counters)
    group_hops: tuple[tuple[str, int], ...] = ()  # (ECMP group id, member position) of those hops
    #: Through a spraying/adaptive switch: its tree of paths (``path`` is then every link of the tree).
    spread: SpreadRoute | None = None
    spray_cursors: dict[str, int] = field(default_factory=dict)  # round-robin state per spraying switch
    transfer: Transfer | None = None
    base_payload: int = 0  # payload of finished transfers
    reported_payload: int = 0  # cumulative payload accounted at the last tick end
    cts_msgs: int = 0
    reverse: Flow | None = field(default=None, repr=False)


@dataclass
class TickStats:
    """What one tick moved: per flow (payload, frame bytes, packets) and per link (bytes, packets)."""

    start_ns: int
    end_ns: int
    flows: dict[int, tuple[int, int, int]]
    link_bytes: np.ndarray
    link_pkts: np.ndarray
    #: Congestion model only: (bytes, packets) per flow its sender sent / its receiver got beyond the
    #: fluid bytes (retransmitted drops, queued or drained bytes), and the tick's ground-truth record.
    tx_extra: dict[int, tuple[int, int]] = field(default_factory=dict)
    rx_extra: dict[int, tuple[int, int]] = field(default_factory=dict)
    congestion: dict[str, Any] | None = None
    #: Spread flows only: how their bytes went down their paths (``spread.Dealt``).
    spread: dict[int, Dealt] = field(default_factory=dict)


def account_tick(flows: Iterable[Flow], t0: int, t1: int, n_links: int, mtu: int, header_bytes: int,
                 cts_every: int) -> TickStats:
    """Turn the tick's progress into whole bytes and packets per flow and per link (see module doc)."""
    per_flow: dict[int, tuple[int, int, int]] = {}
    coo_links: list[int] = []
    coo_bytes: list[int] = []
    coo_pkts: list[int] = []
    spread: list[Flow] = []
    for f in flows:
        if not f.forward:
            continue
        tr = f.transfer
        total = f.base_payload + (math.floor(tr.done) if tr is not None else 0)
        payload = total - f.reported_payload
        f.reported_payload = total
        for flow, pl, pk in ((f, payload, -(-payload // mtu)), _cts(f, cts_every)):
            if pl <= 0 or flow.path is None:  # a data flow without a path is stalled and moved nothing
                continue
            wire = pl + pk * header_bytes
            per_flow[flow.id] = (pl, wire, pk)
            if flow.spread is not None:
                spread.append(flow)
                continue
            coo_links.extend(flow.path)
            coo_bytes.extend([wire] * len(flow.path))
            coo_pkts.extend([pk] * len(flow.path))
    stats = TickStats(t0, t1, per_flow, *_link_sums(coo_links, coo_bytes, coo_pkts, n_links))
    for flow in sorted(spread, key=lambda x: x.id):
        assert flow.spread is not None
        dealt = stats.spread[flow.id] = deal(flow.spread, *per_flow[flow.id], stats.link_bytes, flow.spray_cursors)
        for p, _pl, _w, pk in dealt:
            stats.link_pkts[list(p.links)] += pk
    return stats


def _link_sums(coo_links: list[int], coo_bytes: list[int], coo_pkts: list[int],
               n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """Frame bytes and packets per link from (link index, bytes, packets) triples given as three lists."""
    link_bytes = np.zeros(n_links, dtype=np.int64)
    link_pkts = np.zeros(n_links, dtype=np.int64)
    if coo_links:
        idx = np.asarray(coo_links, dtype=np.intp)
        np.add.at(link_bytes, idx, np.asarray(coo_bytes, dtype=np.int64))
        np.add.at(link_pkts, idx, np.asarray(coo_pkts, dtype=np.int64))
    return link_bytes, link_pkts


def restate_tick(stats: TickStats, per_flow: Mapping[int, tuple[int, int, int]], flows: Mapping[int, Flow]) -> None:
    """Replace the tick's per-flow (payload, frame bytes, packets) with ``per_flow`` (what a real data plane
    sent) and recompute the per-link sums over the flows' paths, so hosts, next hops and ground truth count the
    same bytes as the switches. Flows without a path (or unknown ids) are left out."""
    kept: dict[int, tuple[int, int, int]] = {}
    coo_links: list[int] = []
    coo_bytes: list[int] = []
    coo_pkts: list[int] = []
    for fid, (pl, wire, pk) in per_flow.items():
        f = flows.get(fid)
        if f is None or f.path is None or wire <= 0:
            continue
        kept[fid] = (pl, wire, pk)
        coo_links.extend(f.path)
        coo_bytes.extend([wire] * len(f.path))
        coo_pkts.extend([pk] * len(f.path))
    stats.flows = kept
    stats.link_bytes, stats.link_pkts = _link_sums(coo_links, coo_bytes, coo_pkts, len(stats.link_bytes))


def _cts(f: Flow, cts_every: int) -> tuple[Flow, int, int]:
    """Clear-to-send traffic on the reverse direction since the last tick: (flow, payload, packets)."""
    rev = f.reverse
    assert rev is not None
    if f.pair.kind == "background":  # perftest-style writes: no NCCL FIFO
        return rev, 0, 0
    msgs = f.reported_payload // cts_every
    new = msgs - rev.cts_msgs
    rev.cts_msgs = msgs
    return rev, new * CTS_BYTES, new


def active_flows(transfers: Iterable[Transfer], nic_index: Mapping[str, int], capacity: np.ndarray,
                 wire: float) -> ActiveFlows:
    """The congestion model's view of the running transfers' data flows that have a path: entries per
    (flow, hop), and what each flow offers: its NIC's capacity (``capacity`` of its first link, wire
    bit/s) shared by that NIC's active flows, or its demand (payload bit/s x ``wire``) if less."""
    flows = [(f, t.demand) for t in transfers if t.demand > 0 for f in t.flows if f.path]
    src = np.array([nic_index[f.src.name] for f, _ in flows], dtype=np.intp)
    dst = np.array([nic_index[f.dst.name] for f, _ in flows], dtype=np.intp)
    lens = np.array([len(f.path) for f, _ in flows], dtype=np.intp)  # type: ignore[arg-type]
    first = np.array([f.path[0] for f, _ in flows], dtype=np.intp)  # type: ignore[index]
    share = capacity[first] / np.bincount(src, minlength=len(nic_index))[src] if flows else np.zeros(0)
    demand = np.array([d * wire for _, d in flows], dtype=np.float64)
    entry_link = np.fromiter((li for f, _ in flows for li in f.path), dtype=np.intp)  # type: ignore[union-attr]
    entry_flow = np.repeat(np.arange(len(flows), dtype=np.intp), lens)
    starts = np.repeat(np.cumsum(lens) - lens, lens)
    return ActiveFlows([f.id for f, _ in flows], lens, entry_flow, entry_link,
                       np.arange(len(entry_link), dtype=np.intp) - starts, src, dst, np.minimum(share, demand))


def nh_deltas(stats: TickStats, flows: Mapping[int, Flow], n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and packets per link that its transmitting switch forwarded by an ECMP decision."""
    nh_bytes = np.zeros(n_links, dtype=np.int64)
    nh_pkts = np.zeros(n_links, dtype=np.int64)
    for fid, (_pl, wire, pk) in stats.flows.items():
        if fid in stats.spread:
            for p, _p_l, p_w, p_k in stats.spread[fid]:
                nh_bytes[list(p.nh_hops)] += p_w
                nh_pkts[list(p.nh_hops)] += p_k
            continue
        for li in flows[fid].nh_hops:
            nh_bytes[li] += wire
            nh_pkts[li] += pk
    return nh_bytes, nh_pkts


def apply_extras(stats: TickStats, extras: Iterable[Extra], flows: Mapping[int, Flow], nh_bytes: np.ndarray,
                 nh_pkts: np.ndarray) -> None:
    """Add the congestion model's extra bytes to the links they crossed (and the next hops among
    them), and to the sending / receiving NIC when the extra starts at the first / ends at the last hop."""
    for x in extras:
        f = flows.get(x.flow)
        if f is None or f.path is None:  # destroyed, or rerouted to nowhere: its queued bytes are lost
            continue
        last = len(f.path) if x.last < 0 else x.last
        links = f.path[x.first:last]
        idx = np.asarray(links, dtype=np.intp)
        stats.link_bytes[idx] += x.bytes
        stats.link_pkts[idx] += x.packets
        for li in set(links) & set(f.nh_hops):
            nh_bytes[li] += x.bytes
            nh_pkts[li] += x.packets
        for hit, acc in ((x.first == 0, stats.tx_extra), (last == len(f.path), stats.rx_extra)):
            if hit:
                b, p = acc.get(f.id, (0, 0))
                acc[f.id] = (b + x.bytes, p + x.packets)


def apply_to_hosts(hosts: Mapping[str, HostState], flows: Mapping[int, Flow], stats: TickStats | None,
                   closed: Iterable[QpPair], new_qps: Mapping[str, list[tuple[QpPair, QpState]]],
                   logs: Mapping[str, list[str]], t_ns: int) -> None:
    """Write one tick into every HostState: counters and PSNs of both QP ends, port totals, QPs that
    appeared or were destroyed, new NCCL log lines, and ``timestamp_ns``."""
    by_host: dict[str, list[tuple[Flow, int, int]]] = {}
    if stats is not None:
        for fid, (_pl, wire, pk) in stats.flows.items():
            f = flows[fid]
            by_host.setdefault(f.src.host, []).append((f, wire, pk))
            if f.dst.host != f.src.host:
                by_host.setdefault(f.dst.host, []).append((f, wire, pk))
    # Extra bytes move the byte and packet counters, not the PSNs (retransmissions reuse theirs).
    extra: dict[str, list[tuple[QpState, PortCounters, bool, int, int]]] = {}
    if stats is not None:
        for sending, acc in ((True, stats.tx_extra), (False, stats.rx_extra)):
            for fid, (b, pk) in acc.items():
                f = flows[fid]
                end, qp = (f.src, f.tx_qp) if sending else (f.dst, f.rx_qp)
                extra.setdefault(end.host, []).append((qp, hosts[end.host].ports[(end.rdma_device, end.port)],
                                                       sending, b, pk))
    gone: dict[str, list[QpState]] = {}
    for p in closed:
        fwd = flows[p.meta["fwd"]]  # type: ignore[index]
        gone.setdefault(p.a.host, []).append(fwd.tx_qp)
        gone.setdefault(p.b.host, []).append(fwd.rx_qp)
    for name, hs in hosts.items():
        with hs.lock:
            for f, wire, pk in by_host.get(name, []):
                if f.src.host == name:
                    f.tx_qp.tx_bytes += wire
                    f.tx_qp.tx_packets += pk
                    f.tx_qp.sq_psn = (f.tx_qp.sq_psn + pk) & PSN_MASK
                    port = hs.ports[(f.src.rdma_device, f.src.port)]
                    port.tx_bytes += wire
                    port.tx_packets += pk
                if f.dst.host == name:
                    f.rx_qp.rx_bytes += wire
                    f.rx_qp.rx_packets += pk
                    f.rx_qp.rq_psn = (f.rx_qp.rq_psn + pk) & PSN_MASK
                    port = hs.ports[(f.dst.rdma_device, f.dst.port)]
                    port.rx_bytes += wire
                    port.rx_packets += pk
            for qp, port, sending, b, pk in extra.get(name, []):
                if sending:
                    qp.tx_bytes, qp.tx_packets, port.tx_bytes, port.tx_packets = (
                        qp.tx_bytes + b, qp.tx_packets + pk, port.tx_bytes + b, port.tx_packets + pk)
                else:
                    qp.rx_bytes, qp.rx_packets, port.rx_bytes, port.rx_packets = (
                        qp.rx_bytes + b, qp.rx_packets + pk, port.rx_bytes + b, port.rx_packets + pk)
            # Destroyed QPs go first: a new QP may reuse the number within the same tick.
            for qp in gone.get(name, []):
                if hs.qps.get((qp.rdma_device, qp.lqpn)) is qp:
                    del hs.qps[(qp.rdma_device, qp.lqpn)]
            for pair, qp in new_qps.get(name, []):
                if pair.destroyed_ns is None:  # created and destroyed in one tick: never visible
                    hs.qps[(qp.rdma_device, qp.lqpn)] = qp
            hs.nccl_log.extend(logs.get(name, []))
            hs.timestamp_ns = t_ns
