"""Names, units and records of the simulated RoCE congestion counters: the contract (docs/congestion.md).

Switch counters are per egress interface and queue (``SWITCH_QUEUE_COUNTERS``) and per interface
and priority (``SWITCH_PFC_COUNTERS``); NIC counters are per RDMA port with the mlx5 names
(``NIC_HW_COUNTERS`` in sysfs ``hw_counters``, ``NIC_PFC_COUNTERS`` in ``ethtool -S``). All are absolute
integers since boot except ``max-queue-len``, a per-tick watermark (bytes). RoCE traffic is priority
and queue ``ROCE_PRIORITY``; the other priorities exist and stay 0.

Where they are published: the switch's ``SwitchState.queues`` (``QueueState`` per interface and queue
"0".."7") and ``SwitchState.pfc`` (``PfcState`` per interface and priority 0..7), the representation the
simulated gNMI server serves (``sim/switches/schema.py``; empty while the model is off), and
``PortCounters.congestion`` (NIC port: name -> int; None while off). All are written at every tick end under
the state's lock.
"""

from __future__ import annotations

from flowtracer.fabric.roce import ROCE_PRIORITY
from flowtracer.schemas.openconfig import PFC_COUNTERS, QUEUE_COUNTERS, QUEUE_WATERMARK
from flowtracer.sim.switches.state import SwitchState

PRIORITIES = 8

#: Per (switch, interface, queue): the served openconfig-qos leaves (``QueueState.counters``), then the watermark
#: ``max-queue-len`` (``QueueState.max_queue_len``, bytes, deepest in the last tick).
SWITCH_QUEUE_COUNTERS = (*QUEUE_COUNTERS, QUEUE_WATERMARK)
#: Per (switch, interface, priority), the simulator's (SAI-like) names.
SWITCH_PFC_COUNTERS = ("pfc-tx-pause-frames", "pfc-rx-pause-frames", "pfc-tx-pause-duration-us",
                       "pfc-rx-pause-duration-us")
#: Key of each SWITCH_PFC_COUNTERS name in ``PfcState.counters``: the frames under SR Linux's served leaves (received
#: = rx, generated = tx); the durations under their own names, kept for ground truth but not served (no SR Linux leaf).
PFC_STATE_KEYS: dict[str, str] = {
    "pfc-rx-pause-frames": PFC_COUNTERS[0], "pfc-tx-pause-frames": PFC_COUNTERS[1],
    "pfc-tx-pause-duration-us": "pfc-tx-pause-duration-us", "pfc-rx-pause-duration-us": "pfc-rx-pause-duration-us",
}
#: Per NIC port, sysfs ``/sys/class/infiniband/<dev>/ports/<port>/hw_counters/<name>``.
NIC_HW_COUNTERS = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored",
                   "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "implied_nak_seq_err")
#: Per NIC port, ``ethtool -S <netdev>`` (priority ``ROCE_PRIORITY``).
NIC_PFC_COUNTERS = (f"rx_prio{ROCE_PRIORITY}_pause", f"tx_prio{ROCE_PRIORITY}_pause",
                    f"rx_prio{ROCE_PRIORITY}_pause_duration", f"tx_prio{ROCE_PRIORITY}_pause_duration")

#: Order of a port's values in ground truth ``congestion.jsonl`` (priority ``ROCE_PRIORITY``).
GT_PORT_FIELDS = ("max-queue-len", "ecn-marked-pkts", "pfc-tx-pause-frames", "pfc-rx-pause-frames",
                  "pfc-tx-pause-duration-us", "pfc-rx-pause-duration-us", "dropped-pkts", "dropped-octets",
                  "queue-octets")
#: Order of a NIC's values in ground truth ``congestion.jsonl``.
GT_NIC_FIELDS = NIC_HW_COUNTERS + NIC_PFC_COUNTERS

#: Causes ground truth gives a congested port.
CAUSES = ("collision", "incast", "degraded_link", "pause", "nic_stall", "oversubscribed")


#: Every per-interface counter name, the order of ``counters.jsonl``'s ``congestion`` values.
SWITCH_COUNTERS = SWITCH_QUEUE_COUNTERS + SWITCH_PFC_COUNTERS


def published(state: SwitchState, interface: str, priority: int = ROCE_PRIORITY) -> dict[str, int] | None:
    """One interface's queue and PFC counters of ``priority`` as ``state`` holds them, by SWITCH_COUNTERS name
    (packets, bytes, frames, µs); None when it has none (model off). The caller holds the state's lock."""
    q, p = state.queues.get((interface, str(priority))), state.pfc.get((interface, priority))
    if q is None or p is None:
        return None
    out = {c: q.counters[c] for c in QUEUE_COUNTERS}
    out[QUEUE_WATERMARK] = q.max_queue_len or 0
    out.update((c, p.counters[PFC_STATE_KEYS[c]]) for c in SWITCH_PFC_COUNTERS)
    return out
