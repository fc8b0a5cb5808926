"""Per-port RoCE congestion counters of one host -> NicCongestion per window, with exact deltas (pure).

Inputs are absolute counters as read: the port's ``hw_counters`` (sysfs, mlx5 names: HW_COUNTERS) and,
when the agent reads ``ethtool -S``, the netdev's per-priority PFC counters (``ethtool_stats.pfc_stats``).
Deltas come from the collectors' one counter-delta rule, ``DeltaState`` (``column_deltas``), the same the
gNMI collector runs: first sample BASELINE, a counter that went down RESET (a driver reload or counter
reset), no GAP detection (windows are the agent's own). A counter the NIC does not expose stays unset in
NicCongestion; a port that exposes none of them gets no NicCongestion at all.
"""

from __future__ import annotations

from collections.abc import Mapping

from flowtracer.collectors.agent.sources.ethtool_stats import PFC_STATS
from flowtracer.collectors.gnmi.counters.column_deltas import DeltaState
from flowtracer.schemas.v1.common_pb2 import Counter
from flowtracer.schemas.v1.flows_pb2 import NicCongestion, NicPfc

HW_COUNTERS: tuple[str, ...] = (
    "np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored",
    "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "implied_nak_seq_err",
)
"""hw_counters files read, in the order (and with the names) of the NicCongestion fields."""

Port = tuple[str, int]  # (RDMA device, port number)


class NicCongestionTracker:
    """The congestion counters' delta state of one host's ports, across windows."""

    def __init__(self) -> None:
        self.hw = DeltaState(len(HW_COUNTERS))
        self.pfc = DeltaState(len(PFC_STATS))

    def update(self, hw: Mapping[Port, Mapping[str, int]], pfc: Mapping[Port, Mapping[int, Mapping[int, int]]],
               taken_ns: int) -> dict[Port, NicCongestion]:
        """One sample: ``hw`` each port's hw_counters (name -> value), ``pfc`` each port's PFC counters (priority
        -> {index into PFC_STATS: value}), read at ``taken_ns`` (ns since the epoch). Returns each port's
        NicCongestion (ports that expose no congestion counter are left out)."""
        out: dict[Port, NicCongestion] = {}
        ports = sorted(hw)
        rows = [{i: c[n] for i, n in enumerate(HW_COUNTERS) if n in c} for c in (hw[p] for p in ports)]
        for port, (cells, interval) in zip(ports, self.hw.update_sparse(ports, rows, taken_ns), strict=True):
            if cells:
                msg = out[port] = NicCongestion(interval_ns=interval)
                for i, (v, d, st) in cells.items():
                    getattr(msg, HW_COUNTERS[i]).CopyFrom(Counter(value=v, delta=d, status=st))  # type: ignore[arg-type]
        keys = sorted((p, prio) for p, by_prio in pfc.items() for prio in by_prio)
        rows = [dict(pfc[p][prio]) for p, prio in keys]
        for (port, prio), (cells, interval) in zip(keys, self.pfc.update_sparse(keys, rows, taken_ns), strict=True):
            if not cells:
                continue
            msg = out.get(port)
            if msg is None:
                msg = out[port] = NicCongestion(interval_ns=interval)
            msg.interval_ns = max(msg.interval_ns, interval)
            entry = NicPfc(priority=prio)
            for i, (v, d, st) in cells.items():
                getattr(entry, PFC_STATS[i][0]).CopyFrom(Counter(value=v, delta=d, status=st))  # type: ignore[arg-type]
            msg.pfc.append(entry)
        return out

