"""Congestion signals per link and per NIC port in one window, from the raw congestion counters (pure).

Links: a switch's CongestionBatches (egress queues, per-priority PFC) become one ``LinkCongestion`` per link the
switch owns (:class:`LinkIndex`: a link is owned by its transmitting switch, a host's uplink by its leaf). The
egress queues of a switch port measure the link it transmits on; the PFC counters of the port are read from the
link's transmitting end: pauses it received stopped this link, pauses it sent stopped the reverse one. A host
uplink has no switch at its transmitting end, so its PFC is the leaf port's seen from the NIC (the leaf's sent
pauses are the ones the NIC received) and it has no queue counters.

NICs: each FlowBatch port's ``NicCongestion`` becomes one ``NicCongestionSample``.

Every delta follows the one window rule (:func:`window_delta`). Counters come in groups (PFC, ECN marks, drops;
CNPs, retransmissions, NIC PFC); a group is valid only when something of it was reported in the window and every
reported cell of it is trusted and present: a sum with one baseline, reset, gap or missing counter in it is
unknown, not smaller.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

from flowtracer.fabric.roce import ROCE_PRIORITY
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import analytics_pb2, common_pb2, counters_pb2, flows_pb2
from flowtracer.stream.analytics.congestion_columns import Rows
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.analytics.window_delta import window_delta

_QUEUE_NUMBER = re.compile(r"(\d+)$")


def queue_priority(name: str) -> int | None:
    """The priority an egress queue serves from its name as switches report it ("3", "UC3", "fc3"); None if none."""
    m = _QUEUE_NUMBER.search(name)
    return int(m.group(1)) if m else None


class Tally:
    """Window sums of one group of counters, each summed over all priorities and for the RoCE priority alone.

    Index ``2 * i`` holds counter *i* over all priorities, ``2 * i + 1`` its RoCE priority part (counts).
    """

    def __init__(self, counters: int) -> None:
        self.sums = [0] * (2 * counters)
        self.seen = False
        self.bad = False

    def add(self, cells: Sequence[common_pb2.Counter | None], interval_ns: int, hop_ns: int, roce: bool) -> None:
        """One row of the group (an absent counter is None); a row with nothing in it is not a report."""
        if all(c is None for c in cells):
            return
        self.seen = True
        for i, cell in enumerate(cells):
            d = None if cell is None else window_delta(cell, interval_ns, hop_ns)
            if d is None:
                self.bad = True
                continue
            self.sums[2 * i] += d
            if roce:
                self.sums[2 * i + 1] += d

    @property
    def valid(self) -> bool:
        return self.seen and not self.bad

    def values(self) -> list[int]:
        """The sums when valid, else zeros (unknown is flagged by :attr:`valid`, never a partial sum)."""
        return self.sums if self.valid else [0] * len(self.sums)


def _cells(msg: object, names: Sequence[str]) -> list[common_pb2.Counter | None]:
    return [getattr(msg, n) if msg.HasField(n) else None for n in names]  # type: ignore[attr-defined]


def link_congestion(batches: Iterable[counters_pb2.CongestionBatch], links: LinkIndex, hop_ns: int,
                    window_start_ns: int, window_end_ns: int) -> list[analytics_pb2.LinkCongestion]:
    """One LinkCongestion per link owned by a switch that reported in the window (ns), sorted by link id.

    The rows are tallied as columns (:class:`Rows`, about 135,000 per window on a large fabric); the plain
    per-row :class:`Tally` version is the reference they are tested against.
    """
    batches = list(batches)
    lids = sorted({lk.id for b in batches for lk in links.owned.get(b.switch, ())})
    if not lids:
        return []
    gid = {lid: i for i, lid in enumerate(lids)}
    ends: dict[tuple[str, str], tuple[int, int]] = {}  # (switch, port) -> (out link, host uplink) group, -1 if none

    def groups(key: tuple[str, str]) -> tuple[int, int]:
        g = ends.get(key)
        if g is None:
            out, up = links.out_link.get(key), links.in_host_link.get(key)
            g = ends[key] = (-1 if out is None else gid[out], -1 if up is None else gid[up])
        return g

    roce_queue: dict[str, int] = {}
    pfc, queues = Rows(2), Rows(3)  # PFC (received, sent); queues (ECN marks | dropped pkts, octets)
    wm_rows: list[tuple[int, int, int]] = []  # (group, roce, bytes) of the queues that reported a watermark
    # Bound extends of flat lists: this loop runs once per row, the one per-row cost left, and leaves no tuple
    # per row behind for the garbage collector to scan.
    pfc_meta, pfc_deltas = pfc.meta.extend, pfc.deltas.extend
    queue_meta, queue_deltas = queues.meta.extend, queues.deltas.extend
    for batch in batches:
        sw = batch.switch
        for p in batch.pfc:
            out, up = groups((sw, p.interface))
            if out < 0 and up < 0:
                continue
            roce = int(p.priority == ROCE_PRIORITY)
            rx, tx = p.pause_frames_rx, p.pause_frames_tx
            hrx, htx = p.HasField("pause_frames_rx"), p.HasField("pause_frames_tx")
            if out >= 0:  # this switch transmits on the link: its received pauses stopped it
                pfc_meta((out, roce, p.interval_ns, hrx, rx.status, htx, tx.status))
                pfc_deltas((rx.delta, tx.delta))
            if up >= 0:  # the NIC transmits: it received what the leaf sent
                pfc_meta((up, roce, p.interval_ns, htx, tx.status, hrx, rx.status))
                pfc_deltas((tx.delta, rx.delta))
        for q in batch.queues:
            out = groups((sw, q.interface))[0]
            if out < 0:
                continue
            roce = roce_queue.get(q.queue)
            if roce is None:
                roce = roce_queue[q.queue] = int(queue_priority(q.queue) == ROCE_PRIORITY)
            e, dp, do = q.ecn_marked_pkts, q.dropped_pkts, q.dropped_octets
            queue_meta((out, roce, q.interval_ns, q.HasField("ecn_marked_pkts"), e.status, q.HasField("dropped_pkts"),
                        dp.status, q.HasField("dropped_octets"), do.status))
            queue_deltas((e.delta, dp.delta, do.delta))
            if q.has_max_queue_len:
                wm_rows.append((out, roce, q.max_queue_len_bytes))
    n = len(lids)
    ((pfc_ok, pfc_sums),) = pfc.totals(n, hop_ns, ((0, 1),))
    (ecn_ok, ecn_sums), (drops_ok, drops_sums) = queues.totals(n, hop_ns, ((0,), (1, 2)))
    wm = np.zeros((n, 2), dtype=np.uint64)
    wm_ok = np.zeros(n, dtype=bool)
    if wm_rows:
        w = np.array(wm_rows, dtype=np.uint64)
        g, r = w[:, 0].astype(np.intp), w[:, 1].astype(bool)
        wm_ok[g] = True
        np.maximum.at(wm[:, 0], g, w[:, 2])
        np.maximum.at(wm[:, 1], g[r], w[r, 2])
    out_msgs = []
    for lid, pv, ps, ev, es, dv, ds, wv, ws in zip(lids, pfc_ok.tolist(), pfc_sums.tolist(), ecn_ok.tolist(),
                                                   ecn_sums.tolist(), drops_ok.tolist(), drops_sums.tolist(),
                                                   wm_ok.tolist(), wm.tolist(), strict=True):
        link = links.fabric.links[lid]
        out_msgs.append(analytics_pb2.LinkCongestion(
            schema_version=SCHEMA_VERSION, window_start_ns=window_start_ns, window_end_ns=window_end_ns, link=lid,
            src_node=link.src_node, src_port=link.src_port, dst_node=link.dst_node, dst_port=link.dst_port,
            pfc_pauses_received=ps[0], pfc_pauses_received_roce=ps[1], pfc_pauses_sent=ps[2],
            pfc_pauses_sent_roce=ps[3], pfc_valid=pv,
            ecn_marked_pkts=es[0], ecn_marked_pkts_roce=es[1], ecn_valid=ev,
            dropped_pkts=ds[0], dropped_pkts_roce=ds[1], dropped_octets=ds[2], dropped_octets_roce=ds[3],
            drops_valid=dv, queue_watermark_bytes=ws[0], queue_watermark_bytes_roce=ws[1], watermark_valid=wv))
    return out_msgs


_CNP = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored")
_RETRANSMIT = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "implied_nak_seq_err")


def nic_congestion(batch: flows_pb2.FlowBatch, hop_ns: int, window_start_ns: int,
                   window_end_ns: int) -> list[analytics_pb2.NicCongestionSample]:
    """One NicCongestionSample per port of *batch* that carries congestion counters, in the batch's order."""
    out = []
    for port in batch.ports:
        if not port.HasField("congestion"):
            continue
        c = port.congestion
        cnp, retx, pfc = Tally(len(_CNP)), Tally(len(_RETRANSMIT)), Tally(2)
        cnp.add(_cells(c, _CNP), c.interval_ns, hop_ns, roce=False)
        retx.add(_cells(c, _RETRANSMIT), c.interval_ns, hop_ns, roce=False)
        for p in c.pfc:
            pfc.add(_cells(p, ("rx_pause", "tx_pause")), c.interval_ns, hop_ns, p.priority == ROCE_PRIORITY)
        cv, rv, pv = cnp.values(), retx.values(), pfc.values()
        out.append(analytics_pb2.NicCongestionSample(
            schema_version=SCHEMA_VERSION, window_start_ns=window_start_ns, window_end_ns=window_end_ns,
            nic=f"{batch.host}:{port.rdma_device}", host=batch.host, leaf=batch.leaf, port=port.port,
            netdev=port.netdev,
            ecn_marked_received=cv[0], cnp_sent=cv[2], cnp_handled=cv[4], cnp_ignored=cv[6], cnp_valid=cnp.valid,
            out_of_sequence=rv[0], packet_seq_err=rv[2], local_ack_timeout_err=rv[4], implied_nak_seq_err=rv[6],
            retransmit_valid=retx.valid,
            pfc_pauses_received=pv[0], pfc_pauses_received_roce=pv[1], pfc_pauses_sent=pv[2],
            pfc_pauses_sent_roce=pv[3], pfc_valid=pfc.valid))
    return out
