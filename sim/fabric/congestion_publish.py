"""Writes the congestion model's totals into the states the gNMI servers and host views read.

Switch interfaces get their queue and PFC counters (``InterfaceState.congestion``: name -> 8 values,
priority / queue ``ROCE_PRIORITY`` non-zero), NIC ports their mlx5 counters
(``PortCounters.congestion``). Each dict is new every tick, never mutated (docs/congestion.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from flowtracer.sim.fabric.congestion import CongestionModel
from flowtracer.sim.fabric.congestion_counters import GT_NIC_FIELDS, PRIORITIES, ROCE_PRIORITY, SWITCH_COUNTERS
from flowtracer.sim.fabric.counters import CounterBook
from flowtracer.sim.fabric.rdma import NicEnd
from flowtracer.sim.hosts.state import HostState
from flowtracer.sim.switches.state import SwitchState

#: A per-priority counter tuple is 0 except at RoCE's priority.
_BEFORE, _AFTER = (0,) * ROCE_PRIORITY, (0,) * (PRIORITIES - ROCE_PRIORITY - 1)


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
        """Write one switch's counters, modulo its counter width (the caller holds its lock)."""
        cc, book, mod = self.model, self.book, 1 << st.counter_bits
        for i in book.if_of_switch(st.name):
            out, inn = self.if_links[i]
            row = book.if_tot[i]
            vals = dict.fromkeys(SWITCH_COUNTERS, 0)
            vals["transmit-pkts"], vals["transmit-octets"] = int(row[book.OUT_PKT]), int(row[book.OUT_OCT])
            if out >= 0:  # the egress queue, and PAUSE this port received
                vals["dropped-pkts"], vals["dropped-octets"] = int(cc.drop_pkts[out]), int(cc.drop_bytes[out])
                vals["ecn-marked-pkts"] = int(cc.ecn[out])
                vals["max-queue-len"] = int(cc.last_watermark[out])
                vals["pfc-rx-pause-frames"] = int(cc.rx_pause_frames[out])
                vals["pfc-rx-pause-duration-us"] = int(cc.rx_pause_us[out])
            if inn >= 0:  # PAUSE this port sent to the neighbour feeding it
                vals["pfc-tx-pause-frames"] = int(cc.tx_pause_frames[inn])
                vals["pfc-tx-pause-duration-us"] = int(cc.tx_pause_us[inn])
            st.interfaces[book.ifaces[i][1]].congestion = {k: (*_BEFORE, v % mod, *_AFTER) for k, v in vals.items()}

    def nics(self, nics: Iterable[NicEnd], hosts: Mapping[str, HostState]) -> None:
        """Write every NIC port's counters (``nics`` in the model's NIC order), each host under its lock."""
        totals = np.floor(self.model.nic).astype(np.int64).tolist()
        for end, row in zip(nics, totals, strict=True):
            hs = hosts[end.host]
            with hs.lock:
                hs.ports[(end.rdma_device, end.port)].congestion = dict(zip(GT_NIC_FIELDS, row, strict=True))
