"""Congestion through the Processor class: serialized CongestionBatches, CounterBatches and FlowBatches (with the
NICs' congestion counters) accepted on their partitions as Kafka would deliver them, attributions fed back, and
the finalized windows' LinkCongestion and NicCongestionSample records checked, down to their InfluxDB lines."""

from __future__ import annotations

from typing import Any

import pytest

from flowtracer.schemas import topics
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.v1 import common_pb2, counters_pb2, flows_pb2
from flowtracer.stream.runtime.processor import Processor
from flowtracer.stream.runtime.worker import emitted_lines
from flowtracer.stream.stages.emitted import Emitted

S = 1_000_000_000
P = 2  # conftest.PARTITIONS: the ``proc`` fixture's
END = 1_900_000_000 * S  # the window (END - S, END]
NOW = END + S // 10  # the worker's clock when the records arrive
UPLINK = "leaf01:Ethernet3>spine01:Ethernet1"  # leaf01's port Ethernet3 transmits on it
HOST_UP = "host01:mlx5_0>leaf01:Ethernet1"


def cell(delta: int, status: int = common_pb2.DELTA_STATUS_OK) -> common_pb2.Counter:
    return common_pb2.Counter(value=10_000 + delta, delta=delta, status=status)


def deliver(proc: Processor, topic: str, key: str, msg: Any) -> None:
    proc.accept(topic, partition_for(key, P), msg.SerializeToString(), object(), NOW)


def test_congestion_records_per_window_from_serialized_batches(proc: Processor) -> None:
    fabric = proc.fabric
    for sw in sorted(fabric.switch_names):
        # Counters of every switch (idle), sequence 7: the same as the congestion batches' below, which must
        # not replace them in the window (counters and congestion count sequences apart).
        cb = counters_pb2.CounterBatch(schema_version=1, switch=sw, timestamp_ns=END, received_ns=END,
                                        collector_id="c1", session=1, sequence=7)
        for port in sorted({lk.src_port for lk in fabric.out_links[sw]}):
            cb.interfaces.add(name=port, interval_ns=S, out_octets=cell(0), in_octets=cell(0))
        deliver(proc, topics.COUNTERS.name, sw, cb)
    cong = counters_pb2.CongestionBatch(schema_version=1, switch="leaf01", timestamp_ns=END, received_ns=END,
                                        collector_id="c1", session=1, sequence=7)
    cong.pfc.add(interface="Ethernet3", priority=3, interval_ns=S, pause_frames_rx=cell(40), pause_frames_tx=cell(0))
    cong.pfc.add(interface="Ethernet1", priority=3, interval_ns=S, pause_frames_rx=cell(0), pause_frames_tx=cell(25))
    cong.queues.add(interface="Ethernet3", queue="UC3", interval_ns=S, ecn_marked_pkts=cell(900),
                    dropped_pkts=cell(0), dropped_octets=cell(0), max_queue_len_bytes=4_000_000,
                    has_max_queue_len=True)
    deliver(proc, topics.SWITCH_CONGESTION.name, "leaf01", cong)
    deliver(proc, topics.SWITCH_CONGESTION.name, "leaf01", cong)  # redelivered: counted once
    for host in ("host01", "host02", "host03", "host04"):
        nic = fabric.nics[f"{host}:mlx5_0"]
        fb = flows_pb2.FlowBatch(schema_version=1, host=host, leaf=nic.leaf, window_start_ns=END - S,
                                 window_end_ns=END, received_ns=END)
        port = fb.ports.add(rdma_device="mlx5_0", port=1, netdev="ens1f0np0")
        if host == "host01":  # the only agent reading congestion counters
            c = port.congestion
            c.interval_ns = S
            for name, v in (("np_ecn_marked_roce_packets", 900), ("np_cnp_sent", 450), ("rp_cnp_handled", 0),
                            ("rp_cnp_ignored", 0), ("out_of_sequence", 0), ("packet_seq_err", 0),
                            ("local_ack_timeout_err", 0), ("implied_nak_seq_err", 0)):
                getattr(c, name).CopyFrom(cell(v))
            c.pfc.add(priority=3, rx_pause=cell(25), tx_pause=cell(0))
        deliver(proc, topics.FLOWS.name, nic.leaf, fb)

    out = Emitted()
    out.extend(proc.finalize(NOW))
    senders = {partition_for(leaf, P) for leaf in fabric.leaves}
    assert len(out.attributions) == len(senders) * P  # every flows partition marks every links partition
    for dest, ab in out.attributions:
        proc.accept(topics.ATTRIBUTIONS.name, dest, ab.SerializeToString(), object(), NOW)
    out.extend(proc.finalize(NOW))

    [nic] = out.nic_congestion
    assert (nic.nic, nic.leaf, nic.window_start_ns, nic.window_end_ns) == ("host01:mlx5_0", "leaf01", END - S, END)
    assert (nic.ecn_marked_received, nic.cnp_sent, nic.cnp_valid, nic.retransmit_valid) == (900, 450, True, True)
    assert (nic.pfc_pauses_received_roce, nic.pfc_pauses_sent, nic.pfc_valid) == (25, 0, True)

    links = {m.link: m for m in out.link_congestion}
    assert set(links) == {lk.id for lk in proc.links.owned["leaf01"]}  # only the switch that sent congestion
    up = links[UPLINK]
    assert (up.window_start_ns, up.window_end_ns) == (END - S, END)
    assert (up.pfc_pauses_received, up.pfc_pauses_received_roce, up.pfc_valid) == (40, 40, True)
    assert (up.ecn_marked_pkts_roce, up.ecn_valid, up.drops_valid) == (900, True, True)
    assert (up.queue_watermark_bytes_roce, up.watermark_valid) == (4_000_000, True)
    assert (links[HOST_UP].pfc_pauses_received, links[HOST_UP].ecn_valid) == (25, False)  # the leaf paused the NIC
    loads = {ll.link: ll for ll in out.link_loads}
    assert loads[UPLINK].measured_valid  # the counters of the same sequence were kept

    text = emitted_lines(out)
    assert sum(t.startswith("link_congestion,") for t in text) == len(links)
    assert [t for t in text if t.startswith("nic_congestion,")] == [
        f"nic_congestion,leaf=leaf01,nic=host01:mlx5_0 ecn_marked_received=900i,cnp_sent=450i,cnp_handled=0i,"
        f"cnp_ignored=0i,out_of_sequence=0i,packet_seq_err=0i,local_ack_timeout_err=0i,implied_nak_seq_err=0i,"
        f"pfc_pauses_received=25i,pfc_pauses_received_roce=25i,pfc_pauses_sent=0i,pfc_pauses_sent_roce=0i,"
        f"cnp_valid=1i,retransmit_valid=1i,pfc_valid=1i {END}"]


def test_a_congestion_batch_without_switch_is_a_bad_record(proc: Processor) -> None:
    from flowtracer.stream.runtime.inputs import BadRecord

    bad = counters_pb2.CongestionBatch(schema_version=1, timestamp_ns=END)
    with pytest.raises(BadRecord, match="CongestionBatch without switch or timestamp_ns"):
        proc.accept(topics.SWITCH_CONGESTION.name, 0, bad.SerializeToString(), object(), NOW)
