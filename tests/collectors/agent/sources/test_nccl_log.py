"""NCCL_DEBUG=INFO lines -> which communicator, rank, channel and collective a QP serves."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from flowtracer.collectors.agent.sources.nccl_log import NcclLog


def test_fixture_tags_qps_with_communicator_channel_peer_and_collective(fixtures: Path) -> None:
    log = NcclLog()
    log.feed((fixtures / "nccl" / "node01.log").read_text().splitlines())
    assert log.malformed == 2  # a Channel line with a broken rank, a prefix without thread id
    t418, t419 = log.tag(4242, "mlx5_0", 418), log.tag(4242, "mlx5_0", 419)
    assert t418 is not None and t419 is not None
    assert (t418.comm.id, t418.comm.rank, t418.comm.nranks, t418.channel, t418.peer_rank) == (
        "0x8a2d1c4e5f6a7b8c", 0, 16, 0, 8)
    assert (t419.channel, t419.peer_rank) == (1, 8)
    assert (t418.comm.collective, t418.comm.op_count) == ("AllReduce", 0x1F)
    t777 = log.tag(4250, "mlx5_1", 777)  # another process of the same communicator, on the second NIC
    assert t777 is not None
    assert (t777.comm.rank, t777.channel, t777.peer_rank, t777.comm.collective, t777.comm.op_count) == (
        1, 0, 9, "ReduceScatter", 3)
    assert log.traffic_class(4242) == 106 and log.traffic_class(4250) is None
    assert log.tag(9999, "mlx5_0", 5) is None


def test_pid_namespace_mismatch_still_tags_by_device() -> None:
    # NCCL in a container logs its own pid; rdma on the host shows another.
    log = NcclLog()
    log.feed([
        "n1:17:17 [0] NCCL INFO NET/IB : Using [0]mlx5_3:1/RoCE ; OOB eth0:10.0.0.1<0>",
        "n1:17:17 [0] NCCL INFO ncclCommInitRank comm 0xabc rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 1000 "
        "commId 0x1234 - Init START",
        "n1:17:17 [0] NCCL INFO Channel 03/0 : 2[0] -> 3[0] [send] via NET/IB/0",
        "n1:17:20 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 99 mtu 5 GID 3 (0/1) fifoRkey=0x1 fifoLkey=0x1",
    ])
    t = log.tag(123456, "mlx5_3", 99)
    assert t is not None and (t.comm.id, t.comm.rank, t.channel, t.peer_rank) == ("0x1234", 2, 3, 3)


def test_older_and_timestamped_formats() -> None:
    log = NcclLog()
    log.feed([
        # NCCL 2.8-style Channel line (bus ids in hex, no connIndex), old Init COMPLETE without function name,
        # and a [timestamp] prefix (NCCL_DEBUG_TIMESTAMP_FORMAT).
        "[2025-03-01 10:00:00] h:5:5 [0] NCCL INFO comm 0x10 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
        "h:5:5 [0] NCCL INFO Channel 00 : 0[1b000] -> 1[1b000] [send] via NET/IB/0/GDRDMA",
        "h:5:9 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 4711 mtu 5 LID 0 subnet-prefix 0 FLID 0 "
        "fifoRkey=0x1 fifoLkey=0x2",
        "h:5:5 [0] NCCL INFO comm 0x10 rank 0 nranks 2 cudaDev 0 busId 1b000 commId 0xfeed - Init COMPLETE",
        "h:5:5 [0] NCCL INFO AllGather: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 "
        "comm 0x10 [nranks=2] stream 0x3",
    ])
    assert log.malformed == 0
    t = log.tag(5, "", 4711)
    assert t is not None and (t.comm.id, t.channel, t.peer_rank, t.comm.collective) == ("0xfeed", 0, 1, "AllGather")


def test_destroyed_communicator_is_forgotten() -> None:
    log = NcclLog()
    log.feed(["h:5:5 [0] NCCL INFO ncclCommInitRank comm 0x10 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 "
              "commId 0x1 - Init COMPLETE",
              "h:5:5 [0] NCCL INFO comm 0x10 rank 0 nranks 2 cudaDev 0 busId 1 - Destroy COMPLETE"])
    assert log.malformed == 0 and log.tag(5, "mlx5_0", 1) is None


def test_random_lines_never_raise(fixtures: Path) -> None:
    rng = random.Random(3)
    lines = (fixtures / "nccl" / "node01.log").read_text().splitlines()
    log = NcclLog()
    for _ in range(2000):
        s = list(rng.choice(lines))
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(s))
            s[i:i + rng.randrange(0, 8)] = rng.choice(["", "\x00", "0x", "[", "]", " ", "-1", "99999999999999999999"])
        log.feed(["".join(s)])
    assert log.lines == 2000


def process_lines(pid: int, qpn: int, device: str = "mlx5_0") -> list[str]:
    """One short-lived NCCL process: a communicator, one send channel and its QP."""
    return [
        f"n1:{pid}:{pid} [0] NCCL INFO NET/IB : Using [0]{device}:1/RoCE ; OOB eth0:10.0.0.1<0>",
        f"n1:{pid}:{pid} [0] NCCL INFO ncclCommInitRank comm 0x{pid:x} rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
        f"busId 1000 commId 0x{pid:x}ff - Init START",
        f"n1:{pid}:{pid} [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0",
        f"n1:{pid}:{pid} [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn {qpn} mtu 5 GID 3 (0/1) "
        "fifoRkey=0x1 fifoLkey=0x1",
    ]


@pytest.mark.parametrize(("max_pids", "pids", "kept", "forgotten"), [
    (4096, 20_000, 4096, 15_904),  # the 20,000 short-lived processes
    (8, 8, 8, 0),
    (8, 9, 8, 1),
    (1, 3, 1, 2),
])
def test_short_lived_processes_are_bounded(max_pids: int, pids: int, kept: int, forgotten: int) -> None:
    log = NcclLog(max_pids=max_pids)
    for pid in range(1, pids + 1):
        log.feed(process_lines(pid, 1000 + pid, device=""))  # no device: tagged by (pid, qpn)
    assert (len(log._procs), len(log.tags.by_pid), log.forgotten_pids) == (kept, kept, forgotten)
    newest = log.tag(pids, "", 1000 + pids)
    assert newest is not None and newest.comm.id == f"0x{pids:x}ff"  # the most recent ones are kept
    assert (log.tag(1, "", 1001) is None) == (forgotten > 0)


@pytest.mark.parametrize(("listings", "tagged"), [
    ([{99}], True),  # the QP is live: its tag stays
    ([set()], True),  # learned since the last listing: kept one more (the QP may be newer than the listing)
    ([set(), set()], False),  # gone from two listings: forgotten
    ([{99}, set()], False),
    ([{99}, {99}, {99}], True),
])
def test_a_qp_gone_from_the_listing_loses_its_tag(listings: list[set[int]], tagged: bool) -> None:
    log = NcclLog()
    log.feed(process_lines(17, 99, "mlx5_3"))
    for live in listings:
        log.retain({("mlx5_3", q) for q in live}, {(17, q) for q in live})
    # A later non-NCCL QP of another process reuses number 99 on the same device.
    assert (log.tag(4242, "mlx5_3", 99) is not None) == tagged
    assert log.forgotten_qps == (0 if tagged else 1)


def test_max_pids_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_pids must be at least 1, not 0"):
        NcclLog(max_pids=0)
