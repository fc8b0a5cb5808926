"""One NCCL log line must never take the host agent down (issue 29): COLL lines with numbers no NCCL writes are
counted as malformed and skipped, through the same HostPipeline the agent runs, and the window's other lines
still make their profiles."""

from __future__ import annotations

import pytest

from flowtracer.collectors.agent.host_pipeline import HostPipeline
from flowtracer.collectors.agent.host_window import HostSample, PipelineConfig, WindowStats
from flowtracer.collectors.agent.peers.matching import PeerDirectory
from flowtracer.collectors.agent.sources.inventory import Inventory
from flowtracer.collectors.agent.sources.sysfs import SysfsView
from flowtracer.fabric.topology import parse_topology
from flowtracer.schemas.bounds import MAX_CALL_BYTES
from flowtracer.schemas.v1 import flows_pb2 as pb

TOPOLOGY = """
switches:
  - {name: leaf1, role: leaf}
hosts:
  - name: node01
    nics:
      - {rdma_device: mlx5_0, netdev: ens1f0np0, ip: 10.0.1.11, leaf: "leaf1:Ethernet10"}
"""
T0, T1, T2 = 1_700_000_000_000_000_000, 1_700_000_001_000_000_000, 1_700_000_002_000_000_000
COLL = ("node01:17:17 [0] NCCL INFO {op}: opCount {opcount} sendbuff 0x1 recvbuff 0x2 count {count} datatype {dt} "
        "op 0 root {root} comm 0x55 [nranks={nranks}] stream 0x9")


def coll(op: str = "AllReduce", opcount: str = "1", count: int = 1024, dt: int = 7, root: int = 0,
         nranks: int = 8) -> str:
    return COLL.format(op=op, opcount=opcount, count=count, dt=dt, root=root, nranks=nranks)


def window_with(lines: list[str]) -> tuple[list[pb.FlowBatch], WindowStats]:
    """A baseline window, then one whose NCCL log holds ``lines``: the second window's batches and stats."""
    p = HostPipeline("node01", Inventory(parse_topology(TOPOLOGY)), PipelineConfig(agent_id="a1"))
    for t, start, text in ((T1, T0, []), (T2, T1, lines)):
        s = HostSample("node01", t, [], None, SysfsView(), text)
        p.prepare(s, PeerDirectory())
        batches, stats = p.window(s, start, t, PeerDirectory())
    return batches, stats


@pytest.mark.parametrize("line", [
    coll(count=2**64), coll(count=2**64 + 12345), coll(nranks=2**31), coll(nranks=2**32 + 1),
    coll(count=2**61, dt=7),  # 2^63 call bytes: the processor's encoder once died on it
    coll(op="AllGather", count=2**38, dt=8, nranks=2**10),  # per-rank count x nranks beyond MAX_CALL_BYTES
    coll(opcount="1" + "0" * 16), coll(root=2**31), coll(root=-2),
    "node01:99999999999:17 [0] NCCL INFO " + coll().split("NCCL INFO ", 1)[1],  # a pid no kernel gives
    "node01:17:17 [0] NCCL INFO comm 0x55 rank 2147483648 nranks 8 cudaDev 0 busId 1000 - Init COMPLETE",
    "node01:17:17 [0] NCCL INFO Channel 2147483648/0 : 2[0] -> 3[0] [send] via NET/IB/0",
])
def test_a_line_with_numbers_no_nccl_writes_is_counted_and_skipped(line: str) -> None:
    batches, stats = window_with([line, coll(count=4096)])
    [batch] = batches
    assert stats.malformed == 1 and batch.malformed_records == 1
    assert [(c.count, c.call_bytes) for c in batch.collectives] == [(4096, 4 * 4096)]  # the good line still counts


def test_a_call_at_the_bound_is_kept() -> None:
    [batch], stats = window_with([coll(count=MAX_CALL_BYTES // 4, dt=7)])
    assert stats.malformed == 0 and [c.call_bytes for c in batch.collectives] == [MAX_CALL_BYTES]


def test_one_process_logging_200k_lines_keeps_bounded_state_and_counts_what_it_forgets() -> None:
    """One pid that creates communicators without destroying them, sets up connections whose QP lines never come,
    and calls with a new size every time (200k lines) keeps at most the bounds, each overflow counted."""
    from flowtracer.collectors.agent.collective_profile import CollectiveProfiler
    from flowtracer.collectors.agent.sources.nccl_log import MAX_COMMS, MAX_SENDS, NcclLog
    from flowtracer.schemas.bounds import MAX_PROFILES

    prof = CollectiveProfiler()
    log = NcclLog(on_call=prof.call)
    n = 200_000 // 4
    lines = []
    for i in range(n):
        lines += [f"node01:17:17 [0] NCCL INFO comm 0x{i + 0x1000:x} rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0",
                  "node01:17:17 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA",
                  f"node01:17:17 [0] NCCL INFO NET/IB: NCCL Dev 3 IbDev 0 Port 1 qpn {i % (1 << 24)} mtu 5 GID 3",
                  coll(count=i + 1).replace("comm 0x55", f"comm 0x{i + 0x1000:x}")]
    log.feed(lines)
    [p] = log._procs.values()
    assert log.malformed == 0
    assert len(p.comms) == MAX_COMMS and log.forgotten_comms == n - MAX_COMMS
    assert p.queued == sum(len(q) for g in p.gpus.values() for q in g.pending.values()) == MAX_SENDS and log.forgotten_sends == n - MAX_SENDS
    assert len(log.tags.by_pid) <= log.tags.max_tags and log.forgotten_tags == max(0, n - log.tags.max_tags)
    assert len(prof._stats) == MAX_PROFILES and prof.dropped == n - MAX_PROFILES
    profiles = prof.take("node01", lambda pid: "job", T1, T2)
    assert len(profiles) == MAX_PROFILES
