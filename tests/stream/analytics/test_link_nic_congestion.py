"""Congestion per link and per NIC port (stream/analytics/congestion.py), table-driven on one small fabric.

Each case is a window of raw cells and what the record must say: which link a port's PFC and queue rows land on
and in which direction, the RoCE-priority split, and the one delta rule (a baseline, reset, gap, missing counter or
an interval other than the hop makes the whole group unknown, never a smaller sum).
"""

from __future__ import annotations

from typing import Any

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import common_pb2, counters_pb2, flows_pb2
from flowtracer.stream.analytics.congestion import link_congestion, nic_congestion, queue_priority
from flowtracer.stream.analytics.link_index import LinkIndex

HOP = 1_000_000_000
START, END = 9 * HOP, 10 * HOP
LINKS = LinkIndex(Fabric(generate(FabricSpec(hosts=2, leaves=2, spines=2))))
UPLINK = "leaf01:Ethernet2>spine01:Ethernet1"  # leaf01's Ethernet2 transmits on it
DOWNLINK = "spine01:Ethernet1>leaf01:Ethernet2"  # the reverse, owned by spine01
HOST_UP = "host01:mlx5_0>leaf01:Ethernet1"  # owned by leaf01, measured at its host port
HOST_DOWN = "leaf01:Ethernet1>host01:mlx5_0"
OK, BASE, RESET, GAP, WRAP = (common_pb2.DELTA_STATUS_OK, common_pb2.DELTA_STATUS_BASELINE,
                              common_pb2.DELTA_STATUS_RESET, common_pb2.DELTA_STATUS_GAP,
                              common_pb2.DELTA_STATUS_WRAPPED)


def c(delta: int, status: int = OK) -> common_pb2.Counter:
    return common_pb2.Counter(value=1000 + delta, delta=delta if status in (OK, WRAP, GAP) else 0, status=status)


def pfc(itf: str, prio: int, rx: int, tx: int, status: int = OK, interval: int = HOP) -> counters_pb2.PfcCounters:
    return counters_pb2.PfcCounters(interface=itf, priority=prio, interval_ns=interval,
                                    pause_frames_rx=c(rx, status), pause_frames_tx=c(tx, status))


def queue(itf: str, name: str, ecn: int = 0, drops: int = 0, octets: int = 0, wm: int | None = None,
          status: int = OK, interval: int = HOP, **absent: bool) -> counters_pb2.QueueCounters:
    q = counters_pb2.QueueCounters(interface=itf, queue=name, interval_ns=interval, ecn_marked_pkts=c(ecn, status),
                                   dropped_pkts=c(drops, status), dropped_octets=c(octets, status),
                                   transmit_pkts=c(1, status))
    if wm is not None:
        q.max_queue_len_bytes, q.has_max_queue_len = wm, True
    for name_ in absent:
        q.ClearField(name_)
    return q


def batch(switch: str, queues: list[Any] = (), pfcs: list[Any] = ()) -> counters_pb2.CongestionBatch:  # type: ignore[assignment]
    return counters_pb2.CongestionBatch(schema_version=1, switch=switch, timestamp_ns=END, collector_id="c",
                                        session=1, sequence=1, queues=queues, pfc=pfcs)


# Each case: the window's batches -> {link: {field: value}} that must hold (other links are not checked).
LINK_CASES: dict[str, tuple[list[counters_pb2.CongestionBatch], dict[str, dict[str, Any]]]] = {
    "uplink paused by the spine, RoCE part split out": (
        [batch("leaf01", pfcs=[pfc("Ethernet2", 3, rx=40, tx=2), pfc("Ethernet2", 0, rx=5, tx=0)])],
        {UPLINK: {"pfc_pauses_received": 45, "pfc_pauses_received_roce": 40, "pfc_pauses_sent": 2,
                  "pfc_pauses_sent_roce": 2, "pfc_valid": True, "ecn_valid": False, "drops_valid": False},
         DOWNLINK: {"pfc_valid": False}}),  # spine01 did not report: its link is not emitted (see below)
    "host uplink: the NIC received what the leaf port sent": (
        [batch("leaf01", pfcs=[pfc("Ethernet1", 3, rx=7, tx=30)])],
        {HOST_UP: {"pfc_pauses_received": 30, "pfc_pauses_sent": 7, "pfc_valid": True, "ecn_valid": False},
         HOST_DOWN: {"pfc_pauses_received": 7, "pfc_pauses_sent": 30, "pfc_valid": True}}),
    "egress queues: totals over queues, RoCE queue by its name's number": (
        [batch("leaf01", queues=[queue("Ethernet2", "UC3", ecn=100, drops=0, wm=5000),
                                 queue("Ethernet2", "UC0", ecn=1, drops=2, octets=3000, wm=9000)])],
        {UPLINK: {"ecn_marked_pkts": 101, "ecn_marked_pkts_roce": 100, "dropped_pkts": 2, "dropped_pkts_roce": 0,
                  "dropped_octets": 3000, "queue_watermark_bytes": 9000, "queue_watermark_bytes_roce": 5000,
                  "ecn_valid": True, "drops_valid": True, "watermark_valid": True, "pfc_valid": False}}),
    "a wrapped delta is trusted": (
        [batch("leaf01", queues=[queue("Ethernet2", "3", ecn=8, status=WRAP)])],
        {UPLINK: {"ecn_marked_pkts": 8, "ecn_valid": True}}),
    "a reset queue makes the link's sums unknown, not smaller": (
        [batch("leaf01", queues=[queue("Ethernet2", "3", ecn=50), queue("Ethernet2", "0", status=RESET)])],
        {UPLINK: {"ecn_marked_pkts": 0, "ecn_valid": False, "drops_valid": False}}),
    "baseline PFC: unknown": (
        [batch("leaf01", pfcs=[pfc("Ethernet2", 3, rx=0, tx=0, status=BASE)])],
        {UPLINK: {"pfc_valid": False, "pfc_pauses_received": 0}}),
    "a gap spans several windows: unknown": (
        [batch("leaf01", pfcs=[pfc("Ethernet2", 3, rx=90, tx=0, status=GAP, interval=3 * HOP)])],
        {UPLINK: {"pfc_valid": False, "pfc_pauses_received": 0}}),
    "an OK delta over another interval than the hop: unknown": (
        [batch("leaf01", queues=[queue("Ethernet2", "3", ecn=9, interval=2 * HOP)])],
        {UPLINK: {"ecn_valid": False, "ecn_marked_pkts": 0}}),
    "a counter the platform does not serve leaves its group unknown, others known": (
        [batch("leaf01", queues=[queue("Ethernet2", "3", ecn=4, drops=1, dropped_octets=True)])],
        {UPLINK: {"ecn_marked_pkts": 4, "ecn_valid": True, "drops_valid": False, "dropped_pkts": 0}}),
    "no watermark reported": (
        [batch("leaf01", queues=[queue("Ethernet2", "3", ecn=1)])],
        {UPLINK: {"watermark_valid": False, "queue_watermark_bytes": 0}}),
    "two batches of one instant add up": (
        [batch("leaf01", pfcs=[pfc("Ethernet2", 3, rx=1, tx=0)]), batch("leaf01", pfcs=[pfc("Ethernet2", 4, rx=2, tx=0)])],
        {UPLINK: {"pfc_pauses_received": 3, "pfc_pauses_received_roce": 1}}),
    "a reporting switch's other links are emitted, unknown": (
        [batch("spine01", pfcs=[pfc("Ethernet1", 3, rx=0, tx=6)])],
        {DOWNLINK: {"pfc_pauses_sent": 6, "pfc_valid": True},
         "spine01:Ethernet2>leaf02:Ethernet2": {"pfc_valid": False, "ecn_valid": False}}),
}


@pytest.mark.parametrize("name", LINK_CASES)
def test_link_congestion(name: str) -> None:
    batches, want = LINK_CASES[name]
    got = {m.link: m for m in link_congestion(batches, LINKS, HOP, START, END)}
    reported = {b.switch for b in batches}
    assert set(got) == {lk.id for sw in reported for lk in LINKS.owned[sw]}
    for lid, fields in want.items():
        if LINKS.owner[lid] not in reported:
            assert lid not in got
            continue
        m = got[lid]
        assert (m.window_start_ns, m.window_end_ns, m.schema_version) == (START, END, 1)
        assert {k: getattr(m, k) for k in fields} == fields, lid


def test_no_batches_no_records() -> None:
    assert link_congestion([], LINKS, HOP, START, END) == []


@pytest.mark.parametrize(("name", "prio"), [("3", 3), ("UC3", 3), ("fc3", 3), ("UC12", 12), ("best-effort", None)])
def test_queue_priority(name: str, prio: int | None) -> None:
    assert queue_priority(name) == prio


_CNP = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored")
_RETX = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "implied_nak_seq_err")


def nic(values: dict[str, int], status: int = OK, interval: int = HOP,
        pfc_rows: tuple[tuple[int, int, int], ...] = ()) -> flows_pb2.NicCongestion:
    n = flows_pb2.NicCongestion(interval_ns=interval)
    for k, v in values.items():
        getattr(n, k).CopyFrom(c(v, status))
    for prio, rx, tx in pfc_rows:
        n.pfc.add(priority=prio, rx_pause=c(rx, status), tx_pause=c(tx, status))
    return n


ALL = dict(zip(_CNP + _RETX, range(1, 9), strict=True))

# Each case: the port's NicCongestion -> fields that must hold.
NIC_CASES: dict[str, tuple[flows_pb2.NicCongestion, dict[str, Any]]] = {
    "every counter exposed": (
        nic(ALL, pfc_rows=((3, 10, 20), (0, 1, 0))),
        {"ecn_marked_received": 1, "cnp_sent": 2, "cnp_handled": 3, "cnp_ignored": 4, "cnp_valid": True,
         "out_of_sequence": 5, "packet_seq_err": 6, "local_ack_timeout_err": 7, "implied_nak_seq_err": 8,
         "retransmit_valid": True, "pfc_pauses_received": 11, "pfc_pauses_received_roce": 10,
         "pfc_pauses_sent": 20, "pfc_pauses_sent_roce": 20, "pfc_valid": True}),
    "a NIC without rp_cnp_ignored: CNPs unknown, retransmissions known": (
        nic({k: v for k, v in ALL.items() if k != "rp_cnp_ignored"}),
        {"cnp_valid": False, "cnp_sent": 0, "retransmit_valid": True, "out_of_sequence": 5, "pfc_valid": False}),
    "after an agent restart (reset): all unknown": (
        nic(ALL, status=RESET, pfc_rows=((3, 0, 0),)),
        {"cnp_valid": False, "retransmit_valid": False, "pfc_valid": False, "cnp_handled": 0}),
    "an interval other than the hop: unknown": (
        nic(ALL, interval=HOP // 2), {"cnp_valid": False, "retransmit_valid": False}),
}


@pytest.mark.parametrize("name", NIC_CASES)
def test_nic_congestion(name: str) -> None:
    cong, want = NIC_CASES[name]
    fb = flows_pb2.FlowBatch(schema_version=1, host="host01", leaf="leaf01", window_end_ns=END)
    fb.ports.add(rdma_device="mlx5_0", port=1, netdev="ens1f0np0", congestion=cong)
    fb.ports.add(rdma_device="mlx5_1", port=1, netdev="ens2")  # no congestion counters: no record
    (m,) = nic_congestion(fb, HOP, START, END)
    assert (m.nic, m.host, m.leaf, m.port, m.netdev) == ("host01:mlx5_0", "host01", "leaf01", 1, "ens1f0np0")
    assert (m.window_start_ns, m.window_end_ns) == (START, END)
    assert {k: getattr(m, k) for k in want} == want
