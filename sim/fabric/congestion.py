"""The RoCE congestion model: egress queues, RED/ECN, DCQCN-like CNPs, PFC pauses, drops (docs/congestion.md).

Pure computation over the engine's fluid traffic, no clocks or threads. The engine calls, in order:

- ``plan(flows, stalled)`` whenever it recomputes rates: which links PFC holds paused for good
  (the tree upstream of a NIC that stopped draining, hop by hop, head-of-line victims included).
  The engine gives those links capacity 0, so the paused flows' rates fall to 0: that is how the
  model feeds back into the traffic. Ports that leave the tree drain the bytes they held.
- ``interval(dt, flows)`` for every stretch of the tick with constant rates: standing queues,
  ECN marks and CNPs where a port is oversubscribed and saturated (the DCQCN fixed point), the
  transient of every onset of oversubscription (queue peak, marks, CNP rate cuts, PFC pauses one
  or more hops upstream, or tail drops without PFC), pause time and ACK timeouts in the stall tree.
- ``end_tick()``: the tick's extra bytes (dropped and retransmitted, queued, drained) for the
  engine's byte counters, and the per-port / per-NIC record for ground truth.

The engine's max-min rates are DCQCN's converged rates (its fixed point is the per-bottleneck fair
share); the model adds what the fluid rates cannot show. Rates are wire bit/s, queues bytes, time s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from flowtracer.fabric.routing import Fabric
from flowtracer.sim.fabric.congestion_counters import GT_NIC_FIELDS
from flowtracer.sim.fabric.congestion_math import (
    ActiveFlows,
    CongestionParams,
    entry_offered,
    largest_remainder,
    onset_transient,
    red_probability,
    steady_marking,
)

#: Indexes into the per-NIC accumulator (``GT_NIC_FIELDS`` order).
(NP_ECN, NP_CNP, RP_CNP, RP_IGN, OOS, SEQ_ERR, ACK_TIMEOUT, IMPLIED_NAK,
 NIC_RX_PAUSE, NIC_TX_PAUSE, NIC_RX_PAUSE_US, NIC_TX_PAUSE_US) = range(len(GT_NIC_FIELDS))
#: PFC pause quanta (bit times) a PAUSE frame asks for; the sender refreshes it at half that time.
PAUSE_QUANTA = 65535 * 512


@dataclass
class Extra:
    """Bytes a flow put on links ``path[first:last]`` beyond its fluid bytes (dropped, queued, drained);
    ``last`` -1: to the end of the path (the receiver got them)."""

    flow: int
    first: int
    last: int
    bytes: int
    packets: int


class CongestionModel:
    """Per-link and per-NIC congestion state of one fabric; counters are cumulative floats since boot."""

    def __init__(self, fabric: Fabric, link_ids: list[str], nic_names: list[str], params: CongestionParams,
                 packet_bytes: int) -> None:
        self.p = params
        self.pkt = packet_bytes
        self.link_ids = link_ids
        self.nic_names = nic_names
        nic_index = {n: i for i, n in enumerate(nic_names)}
        links = [fabric.links[lid] for lid in link_ids]
        switches = fabric.switch_names
        n = len(links)
        self.n_links = n
        self.speed = np.array([dl.speed_bps for dl in links], dtype=np.float64)
        #: The link's transmitter is a switch egress port (it has a queue) / the receiver is a switch.
        self.switch_tx = np.array([dl.src_node in switches for dl in links])
        self.switch_rx = np.array([dl.dst_node in switches for dl in links])
        #: NIC at the link's transmitting / receiving end, -1 for a switch.
        self.tx_nic = np.array([nic_index.get(f"{dl.src_node}:{dl.src_port}", -1) for dl in links], dtype=np.intp)
        self.rx_nic = np.array([nic_index.get(f"{dl.dst_node}:{dl.dst_port}", -1) for dl in links], dtype=np.intp)
        self.port_name = [f"{dl.src_node}:{dl.src_port}" for dl in links]
        self.src_switch = [dl.src_node for dl in links]
        self.dst_switch = [dl.dst_node for dl in links]
        link_index = {lid: i for i, lid in enumerate(link_ids)}
        #: Sibling members of every ECMP group a link belongs to.
        self.siblings: list[set[int]] = [set() for _ in range(n)]
        for g in fabric.ecmp_groups.values():
            idx = [link_index[m.id] for m in g.members]
            for i in idx:
                self.siblings[i].update(j for j in idx if j != i)
        # Cumulative totals since boot. Transmitter end (egress queue / paused transmitter):
        self.ecn = np.zeros(n)
        self.drop_pkts = np.zeros(n, dtype=np.int64)
        self.drop_bytes = np.zeros(n, dtype=np.int64)
        self.rx_pause_frames = np.zeros(n)  # the transmitter received PAUSE
        self.rx_pause_us = np.zeros(n)
        # Receiver end (the port that sent PAUSE toward the transmitter):
        self.tx_pause_frames = np.zeros(n)
        self.tx_pause_us = np.zeros(n)
        self.nic = np.zeros((len(nic_names), len(GT_NIC_FIELDS)))
        # Per tick:
        self.watermark = np.zeros(n)
        self.last_watermark = np.zeros(n)  # the watermark of the last whole tick (what is published)
        self.causes: dict[int, tuple[int, str, str]] = {}  # link -> (priority, cause, from)
        self.extras: list[Extra] = []
        self._tick_start = self._snapshot()
        # Across intervals:
        self.paused = np.zeros(n, dtype=bool)
        self.paused_from: dict[int, str] = {}
        self.held: dict[int, list[tuple[int, int, int, int]]] = {}  # link -> [(flow, hop, bytes, packets)]
        self.prev_offered = np.zeros(n)
        self.over_until = np.full(n, -np.inf)
        self.now = 0.0

    # -- the pause tree ---------------------------------------------------------------------------

    def plan(self, fs: ActiveFlows, stalled_links: set[int]) -> npt.NDArray[np.bool_]:
        """Links PFC holds paused now: every link feeding a paused switch port, transitively, starting
        at the ports toward stalled NICs (``stalled_links``); drains ports that left the tree."""
        paused = np.zeros(self.n_links, dtype=bool)
        origin = {li: f"{self.link_ids[li].split('>')[1]}" for li in stalled_links}
        from_: dict[int, str] = dict(origin)
        for li in stalled_links:
            paused[li] = True
        wants = fs.offered[fs.entry_flow] > 0
        has_up = fs.entry_hop > 0
        frontier = set(stalled_links) if self.p.pfc else set()  # without PFC nothing spreads: it drops
        while frontier:
            at = np.isin(fs.entry_link, list(frontier)) & wants & has_up & self.switch_tx[fs.entry_link]
            e = np.flatnonzero(at)
            frontier = set()
            for up, down in zip(fs.entry_link[e - 1].tolist(), fs.entry_link[e].tolist(), strict=True):
                if not paused[up]:
                    paused[up] = True
                    from_[up] = self.port_name[down]
                    frontier.add(up)
        for li in list(self.held):
            if not paused[li]:  # left the tree: what it held goes on downstream
                self.extras.extend(Extra(fid, hop, -1, b, pk) for fid, hop, b, pk in self.held.pop(li))
        self.paused, self.paused_from = paused, from_
        return paused

    # -- one stretch of constant rates ------------------------------------------------------------

    def interval(self, dt: float, fs: ActiveFlows, capacity: npt.NDArray[np.float64]) -> None:
        """Account ``dt`` seconds of the flows ``fs`` at their rates over links of ``capacity`` (wire bit/s)."""
        if dt <= 0:
            return
        p, pkt = self.p, self.pkt
        el, ef = fs.entry_link, fs.entry_flow
        n = self.n_links
        eo = entry_offered(fs, capacity, n)
        offered = np.bincount(el, eo, minlength=n)
        deliv = np.bincount(el, fs.rate[ef], minlength=n)
        movers = np.bincount(el, (fs.rate > 0)[ef].astype(np.float64), minlength=n)
        live = self.switch_tx & ~self.paused & (capacity > 0)
        over = live & (offered > capacity * (1 + 1e-9))
        sat = over & (deliv >= capacity * (1 - 1e-6)) & (movers > 0)
        # Standing queues at the DCQCN fixed point.
        prob = np.zeros(n)
        if sat.any():
            s = np.flatnonzero(sat)
            pr, q = steady_marking(deliv[s] / movers[s], pkt, p)
            prob[s] = pr
            self.ecn[s] += pr * deliv[s] * dt / (8 * pkt)
            np.maximum.at(self.watermark, s, q)
            for li in s.tolist():
                self._cause(li, fs, offered, capacity)
            # Per flow: marked at any of its ports; a CNP in a tau when any of its packets then was.
            logs = np.bincount(ef, np.log1p(-np.minimum(prob[el], 1 - 1e-12)), minlength=len(fs.ids))
            marked = -np.expm1(logs)
            pkts = fs.rate * dt / (8 * pkt)
            cnp_p = -np.expm1(np.maximum(fs.rate * p.cnp_interval / (8 * pkt), 1.0) * logs)
            cnps = cnp_p * dt / p.cnp_interval * (fs.rate > 0)
            np.add.at(self.nic[:, NP_ECN], fs.dst_nic, marked * pkts)
            np.add.at(self.nic[:, NP_CNP], fs.dst_nic, cnps)
            np.add.at(self.nic[:, RP_CNP], fs.src_nic, cnps)
        # Onsets: oversubscription that starts (after a recovery gap) or grows.
        fresh = self.now > self.over_until
        grows = offered > self.prev_offered * (1 + 1e-9)
        for li in np.flatnonzero(over & (fresh | grows)).tolist():
            arrival = offered[li] if fresh[li] else capacity[li] + offered[li] - self.prev_offered[li]
            self._onset(li, arrival, capacity, offered, deliv, fs, eo)
        # Within the recovery time the senders keep their reduced rates: only growth beyond the load they
        # settled on is a new onset (a ring step after a µs gap is not).
        self.prev_offered = np.where(over, offered, np.where(self.now + dt <= self.over_until, self.prev_offered, 0.0))
        self.over_until = np.where(over, self.now + dt + p.recovery, self.over_until)
        # The pause tree: pause time each way, held queues, stalled QPs' ACK timeouts.
        if self.paused.any():
            self._paused_interval(dt, fs)
        self.now += dt

    def _onset(self, li: int, arrival: float, capacity: npt.NDArray[np.float64], offered: npt.NDArray[np.float64],
               deliv: npt.NDArray[np.float64], fs: ActiveFlows, eo: npt.NDArray[np.float64]) -> None:
        p, pkt = self.p, self.pkt
        cap = capacity[li]
        peak, cuts = onset_transient(arrival, cap, p)
        limit = p.xoff if p.pfc else p.buffer
        depth = min(peak, limit)
        self.watermark[li] = max(self.watermark[li], depth)
        marks = cap * cuts * p.cnp_interval / (8 * pkt) * red_probability(depth / 2, p)
        self.ecn[li] += marks
        e = np.flatnonzero((fs.entry_link == li) & (eo > 0))
        flows = fs.entry_flow[e]
        share = eo[e] / max(offered[li], 1e-9)
        np.add.at(self.nic[:, NP_ECN], fs.dst_nic[flows], marks * share)
        np.add.at(self.nic[:, NP_CNP], fs.dst_nic[flows], cuts)
        np.add.at(self.nic[:, RP_CNP], fs.src_nic[flows], cuts)
        self._cause(li, fs, offered, capacity)
        if peak <= limit:
            return
        if p.pfc:
            self._transient_pause(li, (peak - limit) * 8 / cap, e, capacity, deliv, fs)
            return
        # Tail drop: whole packets, shared by the flows in proportion to what they offered.
        total = math.ceil((peak - limit) / pkt)
        counts = largest_remainder(total, share)
        self.drop_pkts[li] += total
        self.drop_bytes[li] += total * pkt
        for ent, fi, c in zip(e.tolist(), flows.tolist(), counts.tolist(), strict=True):
            if c:
                self.extras.append(Extra(fs.ids[fi], 0, int(fs.entry_hop[ent]), c * pkt, c))
                self.nic[fs.dst_nic[fi], OOS] += max(1.0, fs.rate[fi] * p.rtt / (8 * pkt))
                self.nic[fs.src_nic[fi], SEQ_ERR] += 1

    def _transient_pause(self, li: int, duration: float, entries: npt.NDArray[np.intp],
                         capacity: npt.NDArray[np.float64], deliv: npt.NDArray[np.float64], fs: ActiveFlows) -> None:
        """Port ``li`` crossed Xoff: it pauses the links feeding it for ``duration`` s; a fed switch port
        whose queue crosses Xoff meanwhile pauses its own feeders for the rest, hop by hop upstream."""
        todo = [(li, duration, entries)]
        while todo:
            down, d, ents = todo.pop()
            ups = sorted(set(fs.entry_link[ents[fs.entry_hop[ents] > 0] - 1].tolist()))
            for up in ups:
                self._pause(up, d)
                if not self.switch_tx[up] or deliv[up] <= 0:
                    continue
                fill = deliv[up] * d / 8
                self.watermark[up] = max(self.watermark[up], min(fill, self.p.xoff))
                if fill > self.p.kmin:
                    self.causes.setdefault(up, (1, "pause", self.port_name[down]))
                if fill > self.p.xoff:
                    rest = d - self.p.xoff * 8 / deliv[up]
                    todo.append((up, rest, np.flatnonzero((fs.entry_link == up) & (fs.offered[fs.entry_flow] > 0))))

    def _pause(self, li: int, d: float) -> None:
        """Link ``li``'s transmitter is paused by its receiver for ``d`` s (frames refreshed at half quanta)."""
        frames = max(1.0, d / (PAUSE_QUANTA / self.speed[li] / 2))
        us = d * 1e6
        self.rx_pause_frames[li] += frames
        self.rx_pause_us[li] += us
        self.tx_pause_frames[li] += frames
        self.tx_pause_us[li] += us
        if self.tx_nic[li] >= 0:
            self.nic[self.tx_nic[li], NIC_RX_PAUSE] += frames
            self.nic[self.tx_nic[li], NIC_RX_PAUSE_US] += us
        if self.rx_nic[li] >= 0:
            self.nic[self.rx_nic[li], NIC_TX_PAUSE] += frames
            self.nic[self.rx_nic[li], NIC_TX_PAUSE_US] += us

    def _paused_interval(self, dt: float, fs: ActiveFlows) -> None:
        p, pkt = self.p, self.pkt
        # Nothing moves in the tree, so what a port holds is shared by what its flows want to send.
        wants = fs.offered[fs.entry_flow]
        offered = np.bincount(fs.entry_link, wants, minlength=self.n_links)
        limit = p.xoff if p.pfc else p.buffer
        for li in np.flatnonzero(self.paused).tolist():
            if p.pfc:
                self._pause(li, dt)
            origin = self.rx_nic[li] >= 0 and not self.switch_rx[li]
            self.causes[li] = (0, "nic_stall", self.paused_from[li]) if origin else (0, "pause", self.paused_from[li])
            if not self.switch_tx[li]:
                continue
            self.watermark[li] = max(self.watermark[li], limit if offered[li] > 0 else 0.0)
            if li in self.held or offered[li] <= 0:
                continue
            # The port fills to Xoff with what its feeders sent before their own pause took hold; without
            # PFC the same bytes fill it to the drop threshold and what follows is dropped: the senders stop
            # at their window (one window, the buffer's worth: then only their ACK timers fire).
            e = np.flatnonzero((fs.entry_link == li) & (wants > 0))
            total = math.ceil(limit / pkt)
            counts = largest_remainder(total, wants[e] / offered[li])
            held = []
            for ent, c in zip(e.tolist(), counts.tolist(), strict=True):
                if c:
                    fid, hop = fs.ids[fs.entry_flow[ent]], int(fs.entry_hop[ent])
                    if p.pfc:
                        held.append((fid, hop, c * pkt, c))
                    self.extras.append(Extra(fid, 0, hop, c * pkt, c))
            if not p.pfc:
                self.drop_pkts[li] += int(counts.sum())
                self.drop_bytes[li] += int(counts.sum()) * pkt
            self.held[li] = held
        stalled = np.bincount(fs.entry_flow, self.paused[fs.entry_link].astype(np.float64),
                              minlength=len(fs.ids)) > 0
        np.add.at(self.nic[:, ACK_TIMEOUT], fs.src_nic[stalled & (fs.offered > 0)], dt / p.ack_timeout)

    def _cause(self, li: int, fs: ActiveFlows, offered: npt.NDArray[np.float64],
               capacity: npt.NDArray[np.float64]) -> None:
        """Why port ``li`` is oversubscribed (ground truth; a pause cause recorded earlier wins)."""
        e = np.flatnonzero((fs.entry_link == li) & (fs.offered[fs.entry_flow] > 0))
        flows = fs.entry_flow[e]
        srcs, dsts = set(fs.src_nic[flows].tolist()), set(fs.dst_nic[flows].tolist())
        full = self.speed[li]
        if capacity[li] < full * (1 - 1e-9) and offered[li] <= full * (1 + 1e-9):
            cause = (2, "degraded_link", "")
        elif len(dsts) == 1 and len(srcs) >= 2:
            cause = (3, "incast", self.nic_names[next(iter(dsts))])
        elif any(offered[s] < capacity[s] * (1 - 1e-9) for s in self.siblings[li]):
            cause = (4, "collision", "")
        else:
            cause = (5, "oversubscribed", "")
        if li not in self.causes or cause[0] < self.causes[li][0]:
            self.causes[li] = cause

    # -- the tick's end ---------------------------------------------------------------------------

    def _snapshot(self) -> tuple[npt.NDArray[np.float64], ...]:
        return (self.ecn.copy(), self.drop_pkts.copy(), self.drop_bytes.copy(), self.rx_pause_frames.copy(),
                self.rx_pause_us.copy(), self.tx_pause_frames.copy(), self.tx_pause_us.copy(), self.nic.copy())

    def end_tick(self) -> tuple[list[Extra], dict[str, object]]:
        """The tick's extra bytes and its ground-truth record (``ports``, ``nics``, ``causes``, integer
        deltas of the published counters); resets the watermarks."""
        before, after = self._tick_start, self._snapshot()
        d = [np.floor(a) - np.floor(b) for a, b in zip(after, before, strict=True)]
        d_ecn, d_dp, d_db, d_rxf, d_rxu, d_txf, d_txu, d_nic = d
        queued = np.zeros(self.n_links)
        for li, held in self.held.items():
            queued[li] = sum(b for _f, _h, b, _p in held)
        ports: dict[str, list[int]] = {}
        for li in range(self.n_links):
            vals = [int(self.watermark[li]) if self.switch_tx[li] else 0, int(d_ecn[li]), 0, 0, 0, 0,
                    int(d_dp[li]), int(d_db[li]), int(queued[li])]
            if self.switch_tx[li]:  # PAUSE this egress port received, as the port's own counters
                vals[3], vals[5] = int(d_rxf[li]), int(d_rxu[li])
            if any(vals):
                ports[self.port_name[li]] = vals
        for li in range(self.n_links):  # PAUSE the receiving switch port sent, on its own name
            if self.switch_rx[li] and d_txf[li]:
                name = self.link_ids[li].split(">")[1]
                vals = ports.setdefault(name, [0] * 9)
                vals[2] += int(d_txf[li])
                vals[4] += int(d_txu[li])
        nics = {self.nic_names[i]: [int(v) for v in row] for i, row in enumerate(d_nic) if row.any()}
        causes = {self.port_name[li]: {"cause": c, "from": f} for li, (_pr, c, f) in sorted(self.causes.items())
                  if self.switch_tx[li]}
        extras = self.extras
        self.extras = []
        self.causes = {}
        self.last_watermark = self.watermark.copy()
        self.watermark[:] = 0
        self._tick_start = after
        return extras, {"ports": ports, "nics": nics, "causes": causes}

    def reset_switch(self, switch: str) -> None:
        """A switch rebooted: its ports' counters restart at 0 (queues emptied, nothing held)."""
        for li in range(self.n_links):
            if self.src_switch[li] == switch:
                for arr in (self.ecn, self.drop_pkts, self.drop_bytes, self.rx_pause_frames, self.rx_pause_us):
                    arr[li] = 0
                self.held.pop(li, None)
            if self.dst_switch[li] == switch:
                self.tx_pause_frames[li] = self.tx_pause_us[li] = 0
        self._tick_start = self._snapshot()
