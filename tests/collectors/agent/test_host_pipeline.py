"""Fixture files of one host, two samples -> the FlowBatches an agent sends (one per leaf)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from flowtracer.collectors.agent.host_pipeline import HostPipeline
from flowtracer.collectors.agent.host_window import HostSample, PipelineConfig
from flowtracer.collectors.agent.peers.matching import PeerDirectory
from flowtracer.collectors.agent.sources.inventory import Inventory
from flowtracer.collectors.agent.sources.rdma_json import QpRecord, parse_res_qp, parse_stat_qp
from flowtracer.collectors.agent.sources.sysfs import SysfsView, read_sysfs
from flowtracer.fabric.roce import rocev2_udp_sport
from flowtracer.fabric.topology import parse_topology
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.schemas.v1.common_pb2 import DeltaStatus

TOPOLOGY = """
switches:
  - {name: leaf1, role: leaf}
  - {name: leaf2, role: leaf}
  - {name: spine1, role: spine}
links:
  - {a: "leaf1:Ethernet1", b: "spine1:Ethernet1", speed: 400G}
  - {a: "leaf2:Ethernet1", b: "spine1:Ethernet2", speed: 400G}
hosts:
  - name: node01
    nics:
      - {rdma_device: mlx5_0, netdev: ens1f0np0, ip: 10.0.1.11, leaf: "leaf1:Ethernet10", rail: 0}
      - {rdma_device: mlx5_1, netdev: ens2f0np0, ip: 10.0.2.11, leaf: "leaf2:Ethernet10", rail: 1}
  - name: node02
    nics:
      - {rdma_device: mlx5_0, netdev: ens1f0np0, ip: 10.0.1.22, leaf: "leaf1:Ethernet11", rail: 0}
"""
T1, T2 = 1_700_000_001_000_000_000, 1_700_000_002_000_000_000
READ_NS = 3_000_000  # the agent read the sample 3 ms after the boundary


def _second_sample_files(fixtures: Path, tmp: Path) -> tuple[bytes, bytes, Path]:
    qps = json.loads((fixtures / "rdma" / "res_qp.json").read_text())
    for q in qps:
        q["sq-psn"] = {418: 300, 419: 1500, 133: 330}.get(q["lqpn"], q["sq-psn"])  # 418 wraps: 516 packets
    stat = json.loads((fixtures / "rdma" / "stat_qp.json").read_text())
    stat[0]["rdma_tx_bytes"] += 2_000_000
    stat[0]["rdma_tx_packets"] += 516
    root = tmp / "sysfs"
    shutil.copytree(fixtures / "sysfs", root, symlinks=True)
    c = root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters"
    (c / "port_xmit_data").write_text(f"{123456789 + 1_000_000}\n")
    (c / "port_xmit_packets").write_text(f"{300000 + 1016}\n")
    hw = c.parent / "hw_counters"
    (hw / "np_cnp_sent").write_text("24\n")  # 17 -> 24
    (hw / "out_of_sequence").write_text("1\n")  # 3 -> 1: the counters were reset
    return json.dumps(qps).encode(), json.dumps(stat).encode(), root / "class" / "infiniband"


def test_two_samples_of_fixture_files_give_these_batches(fixtures: Path, tmp_path: Path) -> None:
    inv = Inventory(parse_topology(TOPOLOGY))
    pipe = HostPipeline("node01", inv, PipelineConfig(agent_id="a1", dscp=3))
    peer = HostPipeline("node02", inv, PipelineConfig(agent_id="a1"))
    peer_qps = [QpRecord("mlx5_0", 1, 948, 418, "RC", "RTS", 0, 0, 77, "python3"),
                QpRecord("mlx5_0", 1, 949, 419, "RC", "RTS", 0, 0, 77, "python3")]
    nccl = (fixtures / "nccl" / "node01.log").read_text().splitlines()

    def run(t: int, qp_text: bytes, stat_text: bytes, sysfs: SysfsView,
            lines: list[str], pause: int) -> list[pb.FlowBatch]:
        qps, stat = parse_res_qp(qp_text), parse_stat_qp(stat_text)
        s = HostSample("node01", t, qps.records, stat.records, sysfs, lines, qps.malformed + stat.malformed
                       + sysfs.malformed, pfc={("mlx5_0", 1): {3: {0: pause, 2: 10 * pause}}})
        sp = HostSample("node02", t, peer_qps, None, SysfsView())
        peers = PeerDirectory()
        pipe.prepare(s, peers)
        peer.prepare(sp, peers)
        peer.window(sp, T1, t, peers)
        batches, _ = pipe.window(s, T1, t, peers, received_ns=t + READ_NS)
        return batches

    first = run(T1, (fixtures / "rdma" / "res_qp.json").read_bytes(),
                (fixtures / "rdma" / "stat_qp.json").read_bytes(),
                read_sysfs(fixtures / "sysfs" / "class" / "infiniband"), nccl, 5)
    assert first == []  # baselines only
    qp_text, stat_text, sysfs_root = _second_sample_files(fixtures, tmp_path)
    leaf1, leaf2 = run(T2, qp_text, stat_text, read_sysfs(sysfs_root), [], 12)

    assert (leaf1.leaf, leaf1.host, leaf1.window_start_ns, leaf1.window_end_ns, leaf1.sequence) == (
        "leaf1", "node01", T1, T2, 1)
    assert leaf1.received_ns == leaf2.received_ns == T2 + READ_NS  # every leaf's batch carries the read stamp
    # 1 garbage sysfs file in each sample + 2 NCCL lines (the baseline's carried over); once per host.
    assert leaf1.malformed_records == 4
    assert leaf2.malformed_records == 0
    f418, f419 = leaf1.flows
    assert (f418.lqpn, f418.rqpn, f418.src_ip, f418.dst_ip, f418.udp_src_port, f418.udp_dst_port) == (
        418, 948, "10.0.1.11", "10.0.1.22", rocev2_udp_sport(418, 948), 4791)
    assert (f418.tx_bytes, f418.tx_packets, f418.byte_source, f418.byte_error_bound) == (
        2_000_000, 516, pb.BYTE_SOURCE_QP_COUNTER, 0)
    assert (f418.netdev, f418.qp_type, f418.qp_state, f418.pid, f418.comm, f418.qp_generation) == (
        "ens1f0np0", pb.QP_TYPE_RC, pb.QP_STATE_RTS, 4242, "python3", T1)
    assert f418.dscp == 106 >> 2  # NCCL_IB_TC=106 in the log beats the configured default
    assert (f418.nccl.comm_id, f418.nccl.rank, f418.nccl.nranks, f418.nccl.peer_rank, f418.nccl.channel,
            f418.nccl.collective, f418.nccl.op_count) == ("0x8a2d1c4e5f6a7b8c", 0, 16, 8, 1 - 1, "AllReduce", 0x1F)
    # 419 shares a counter with 420: no exact bytes, PSN estimate with a bound from the port totals.
    assert (f419.tx_packets, f419.tx_bytes, f419.byte_source) == (500, 500 * 4158, pb.BYTE_SOURCE_PSN_ESTIMATE)
    assert 0 < f419.byte_error_bound <= 500 * 4095
    assert f419.nccl.channel == 1
    (port1,) = leaf1.ports
    assert (port1.rdma_device, port1.tx_bytes, port1.tx_packets, port1.netdev) == (
        "mlx5_0", 4_000_000, 1016, "ens1f0np0")
    # The NIC's congestion counters over the window: the ones it exposes, with the one delta rule.
    cong = port1.congestion
    ok, reset = DeltaStatus.DELTA_STATUS_OK, DeltaStatus.DELTA_STATUS_RESET
    assert (cong.interval_ns, cong.np_cnp_sent.delta, cong.np_cnp_sent.status) == (T2 - T1, 7, ok)
    assert (cong.rp_cnp_handled.value, cong.rp_cnp_handled.delta, cong.rp_cnp_handled.status) == (9, 0, ok)
    assert (cong.out_of_sequence.value, cong.out_of_sequence.delta, cong.out_of_sequence.status) == (1, 0, reset)
    assert not cong.HasField("np_ecn_marked_roce_packets")  # not in this NIC's hw_counters: absent, not 0
    (prio3,) = cong.pfc
    assert (prio3.priority, prio3.rx_pause.delta, prio3.rx_pause_duration_us.delta) == (3, 7, 70)
    assert not prio3.HasField("tx_pause")
    (f133,) = leaf2.flows  # kernel NFS/RDMA QP on the rail-1 NIC: its peer is no host we know
    assert (f133.src_ip, f133.dst_ip, f133.pid, f133.comm, f133.tx_packets, f133.dscp) == (
        "10.0.2.11", "", 0, "rpcrdma", 20, 3)
    assert f133.tx_bytes == 20 * (1024 + 62)  # netdev MTU 1500 -> RoCE path MTU 1024
    assert not f133.HasField("nccl")
    # Each window's listing retains the NCCL tags of live QPs only: 777 (mlx5_1, learned in the first window) is
    # in neither listing and is forgotten after the second, so a QP that reuses the number is not given its tag.
    assert pipe.nccl.tag(1, "mlx5_0", 418) is not None and pipe.nccl.tag(1, "mlx5_1", 777) is None
    assert pipe.nccl.forgotten_qps == 1
