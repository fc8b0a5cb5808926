"""Names, units and records of the simulated RoCE congestion counters: the contract (docs/congestion.md).

Switch counters are per egress interface and queue (``SWITCH_QUEUE_COUNTERS``) and per interface
and priority (``SWITCH_PFC_COUNTERS``); NIC counters are per RDMA port with the mlx5 names
(``NIC_HW_COUNTERS`` in sysfs ``hw_counters``, ``NIC_PFC_COUNTERS`` in ``ethtool -S``). All are absolute
integers since boot except ``max-queue-len``, a per-tick watermark (bytes). RoCE traffic is priority
and queue ``ROCE_PRIORITY``; the other priorities exist and stay 0.

Where they are published (None while the model is off): ``InterfaceState.congestion`` (switch
interface: name -> tuple of 8 ints, index = queue / priority) and ``PortCounters.congestion`` (NIC
port: name -> int). The engine replaces these dicts at every tick end, never mutates them, so a
shallow copy taken under the lock is a consistent snapshot. Tuples keep the gNMI server's deep copy
cheap.
"""

from __future__ import annotations

#: The priority (PFC class, egress queue) RoCE uses by convention.
ROCE_PRIORITY = 3
PRIORITIES = 8

#: Per (switch, interface, queue). ``max-queue-len`` is a watermark (bytes, deepest in the last tick).
SWITCH_QUEUE_COUNTERS = ("transmit-pkts", "transmit-octets", "dropped-pkts", "dropped-octets", "ecn-marked-pkts",
                         "max-queue-len")
#: Per (switch, interface, priority).
SWITCH_PFC_COUNTERS = ("pfc-tx-pause-frames", "pfc-rx-pause-frames", "pfc-tx-pause-duration-us",
                       "pfc-rx-pause-duration-us")
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


#: Every per-interface counter name: ``InterfaceState.congestion[name]`` is a tuple of 8 values (queue/priority 0..7).
SWITCH_COUNTERS = SWITCH_QUEUE_COUNTERS + SWITCH_PFC_COUNTERS


def zero_interface() -> dict[str, tuple[int, ...]]:
    """An interface's congestion counters, all 0: name -> one value per queue / priority."""
    return dict.fromkeys(SWITCH_COUNTERS, (0,) * PRIORITIES)


def zero_nic() -> dict[str, int]:
    """A NIC port's congestion counters, all 0, by their mlx5 names."""
    return dict.fromkeys(GT_NIC_FIELDS, 0)
