"""Writes the congestion model's totals into the states the gNMI servers and host views read.

Switch interfaces get their queue and PFC counters in ``SwitchState.queues`` (queues "0".."7") and
``SwitchState.pfc`` (priorities 0..7), the entries the gNMI server serves; only queue / priority
``ROCE_PRIORITY`` is non-zero. NIC ports get their mlx5 counters (``PortCounters.congestion``, a new dict every
tick, never mutated). docs/congestion.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from flowtracer.schemas.openconfig import QUEUE_COUNTERS
from flowtracer.sim.fabric.congestion import CongestionModel
from flowtracer.sim.fabric.congestion_counters import (
    GT_NIC_FIELDS,
    PFC_STATE_KEYS,
    PRIORITIES,
    ROCE_PRIORITY,
    SWITCH_PFC_COUNTERS,
)
from flowtracer.sim.fabric.counters import CounterBook
from flowtracer.sim.fabric.rdma import NicEnd
from flowtracer.sim.hosts.state import HostState
from flowtracer.sim.switches.state import PfcState, QueueState, SwitchState

_ROCE_QUEUE = str(ROCE_PRIORITY)


class CongestionPublisher:
    """Knows which link each switch interface transmits and receives on (CounterBook's interface order)."""

    def __init__(self, model: CongestionModel, book: CounterBook) -> None:
        self.model = model
        self.book = book
        self.if_links: list[tuple[int, int]] = [(-1, -1)] * len(book.ifaces)
        for li in range(model.n_links):
            out_if, in_if = int(book.link_out_if[li]), int(book.link_in_if[li])
            if out_if >= 0:
                self.if_links[out_if] = (li, self.if_links[out_if][1])
            if in_if >= 0:
                self.if_links[in_if] = (self.if_links[in_if][0], li)

    def switch(self, st: SwitchState) -> None:
        """Write one switch's counters, modulo its counter width (the caller holds its lock).

        ``ecn-marked-octets`` is the marked packets times the model's packet size: the model marks full packets
        (MTU + headers), so it is exact within the model. The other queues and priorities are created once, at 0.
        """
        cc, book, mod = self.model, self.book, 1 << st.counter_bits
        for i in book.if_of_switch(st.name):
            out, inn = self.if_links[i]
            name = book.ifaces[i][1]
            row = book.if_tot[i]
            q = dict.fromkeys(QUEUE_COUNTERS, 0)
            pfc = dict.fromkeys(SWITCH_PFC_COUNTERS, 0)
            watermark = 0
            q["transmit-pkts"], q["transmit-octets"] = int(row[book.OUT_PKT]), int(row[book.OUT_OCT])
            if out >= 0:  # the egress queue, and PAUSE this port received
                q["dropped-pkts"], q["dropped-octets"] = int(cc.drop_pkts[out]), int(cc.drop_bytes[out])
                q["ecn-marked-pkts"] = int(cc.ecn[out])
                q["ecn-marked-octets"] = q["ecn-marked-pkts"] * cc.pkt
                watermark = int(cc.last_watermark[out])
                pfc["pfc-rx-pause-frames"] = int(cc.rx_pause_frames[out])
                pfc["pfc-rx-pause-duration-us"] = int(cc.rx_pause_us[out])
            if inn >= 0:  # PAUSE this port sent to the neighbour feeding it
                pfc["pfc-tx-pause-frames"] = int(cc.tx_pause_frames[inn])
                pfc["pfc-tx-pause-duration-us"] = int(cc.tx_pause_us[inn])
            if (name, _ROCE_QUEUE) not in st.queues:  # first tick: the idle queues / priorities, all 0
                for k in range(PRIORITIES):
                    st.queues[(name, str(k))] = QueueState(name, str(k), max_queue_len=0)
                    st.pfc[(name, k)] = PfcState(name, k, dict.fromkeys(PFC_STATE_KEYS.values(), 0))
            st.queues[(name, _ROCE_QUEUE)] = QueueState(name, _ROCE_QUEUE, {k: v % mod for k, v in q.items()},
                                                        watermark % mod)
            st.pfc[(name, ROCE_PRIORITY)] = PfcState(name, ROCE_PRIORITY,
                                                     {PFC_STATE_KEYS[k]: v % mod for k, v in pfc.items()})

    def nics(self, nics: Iterable[NicEnd], hosts: Mapping[str, HostState]) -> None:
        """Write every NIC port's counters (``nics`` in the model's NIC order), each host under its lock."""
        totals = np.floor(self.model.nic).astype(np.int64).tolist()
        for end, row in zip(nics, totals, strict=True):
            hs = hosts[end.host]
            with hs.lock:
                hs.ports[(end.rdma_device, end.port)].congestion = dict(zip(GT_NIC_FIELDS, row, strict=True))
