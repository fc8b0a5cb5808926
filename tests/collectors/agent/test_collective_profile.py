"""Collective profiles from NCCL COLL lines: the parser's timestamps and the per-window aggregation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flowtracer.collectors.agent.collective_profile import DTYPE_BYTES, CollectiveProfiler, bus_factor, call_bytes
from flowtracer.collectors.agent.sources.nccl_log import NcclLog, timestamp_ns
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.sim.hosts import nccl_log as sim_log

T0 = 1_764_113_401_123_456_000  # 2025-11-25 23:30:01.123456 UTC


def _init(host: str, pid: int, ptr: str, rank: int, nranks: int) -> str:
    return (f"{host}:{pid}:{pid} [{rank}] NCCL INFO ncclCommInitRank comm {ptr} rank {rank} nranks {nranks} cudaDev "
            f"{rank} nvmlDev {rank} busId 1b000 commId 0xabc - Init COMPLETE")


def _coll(pid: int, ptr: str, op: str, count: int, dtype: int, nranks: int, t_ns: int | None = None,
          root: int = 0, op_count: int = 1) -> str:
    stamp = "" if t_ns is None else sim_log.timestamp(t_ns)
    return (f"{stamp}h1:{pid}:{pid} [0] NCCL INFO {op}: opCount {op_count:x} sendbuff 0x1 recvbuff 0x2 count {count} "
            f"datatype {dtype} op 0 root {root} comm {ptr} [nranks={nranks}] stream 0x3")


def _profiles(lines: list[str], jobs: dict[int, str] | None = None) -> tuple[CollectiveProfiler, list[pb.CollectiveProfile]]:
    prof = CollectiveProfiler()
    NcclLog(on_call=prof.call).feed(lines)
    return prof, prof.take("h1", lambda pid: (jobs or {}).get(pid, "default"), 0, 10)


def test_nccl_timestamps_are_read_with_their_fraction() -> None:
    cache: dict[str, int] = {}
    want = int(datetime(2025, 11, 25, 23, 30, 1, tzinfo=UTC).timestamp()) * 10**9
    assert timestamp_ns("2025-11-25 23:30:01", cache, UTC) == want
    assert timestamp_ns("2025-11-25 23:30:01.123456", cache, UTC) == want + 123_456_000
    assert timestamp_ns("2025-11-25 23:30:01.5", cache, UTC) == want + 500_000_000
    # the simulator writes local time as NCCL does, and the agent reads it in its local zone by default
    assert timestamp_ns(sim_log.timestamp(T0)[1:-2], {}) == T0
    for other in (None, "", "Nov 25 23:30:01", "2025-13-25 23:30:01"):
        assert timestamp_ns(other, cache) == 0


def test_calls_sizes_ranks_and_estimated_bandwidth_of_two_local_ranks() -> None:
    """Ranks 0 and 1 of a 16-rank communicator on this host: 3 AllReduces enqueued at T0, one at T0 + 10 ms.
    The T0 calls are timed by the interval to the rank's next call (10 ms for 3 calls, per rank)."""
    lines = [_init("h1", 100, "0x10", 0, 16), _init("h1", 101, "0x20", 1, 16)]
    for pid, ptr in ((100, "0x10"), (101, "0x20")):
        lines += [_coll(pid, ptr, "AllReduce", 262144, 7, 16, T0, op_count=i) for i in range(3)]
        lines.append(_coll(pid, ptr, "AllReduce", 262144, 7, 16, T0 + 10_000_000, op_count=3))
    _, [p] = _profiles(lines, {100: "job-a", 101: "job-a"})
    assert (p.job_id, p.comm_id, p.operation, p.datatype, p.datatype_bytes, p.count) == \
        ("job-a", "0xabc", "AllReduce", 7, 4, 262144)
    assert p.call_bytes == 262144 * 4 and p.calls == 4 and list(p.ranks) == [0, 1] and p.nranks == 16
    assert (p.first_call_ns, p.last_call_ns) == (T0, T0 + 10_000_000)
    assert p.timed_calls == 6 and p.timed_ns == 20_000_000
    algbw = p.call_bytes * 6 / 0.020
    assert p.algo_bw_bytes_per_s == pytest.approx(algbw)
    assert p.bus_bw_bytes_per_s == pytest.approx(algbw * 2 * 15 / 16)


def test_the_open_interval_is_timed_in_the_window_it_closes() -> None:
    prof = CollectiveProfiler()
    log = NcclLog(on_call=prof.call)
    log.feed([_coll(7, "0x10", "AllGather", 1000, 9, 8, T0)])
    [first] = prof.take("h1", lambda pid: "j", 0, 10)
    assert first.calls == 1 and first.timed_calls == 0 and first.algo_bw_bytes_per_s == 0
    assert first.call_bytes == 1000 * 2 * 8  # AllGather's count is per rank
    log.feed([_coll(7, "0x10", "ReduceScatter", 1000, 9, 8, T0 + 4_000_000)])
    ag, rs = sorted(prof.take("h1", lambda pid: "j", 10, 20), key=lambda p: p.operation)
    assert (ag.operation, ag.calls, ag.timed_calls, ag.timed_ns) == ("AllGather", 0, 1, 4_000_000)
    assert ag.bus_bw_bytes_per_s == pytest.approx(16000 / 0.004 * 7 / 8)
    assert (rs.operation, rs.calls, rs.timed_calls, rs.first_call_ns) == ("ReduceScatter", 1, 0, T0 + 4_000_000)
    assert prof.take("h1", lambda pid: "j", 20, 30) == []


def test_send_recv_peers_untimed_lines_and_unknown_datatypes() -> None:
    lines = [_coll(5, "0x10", op, 64, 7, 4, root=peer) for peer in (1, 3) for op in ("Send", "Recv")]
    lines.append(_coll(5, "0x10", "Broadcast", 64, 99, 4))
    _, profiles = _profiles(lines)
    by_op = {p.operation: p for p in profiles}
    assert set(by_op) == {"Send", "Recv", "Broadcast"}
    assert list(by_op["Send"].peers) == [1, 3] and by_op["Send"].calls == 2 and by_op["Send"].call_bytes == 256
    assert list(by_op["Broadcast"].peers) == [] and by_op["Broadcast"].call_bytes == 0
    assert all(p.first_call_ns == 0 and p.timed_calls == 0 and p.bus_bw_bytes_per_s == 0 for p in profiles)
    assert all(p.comm_id == "0x10" and list(p.ranks) == [] for p in profiles)  # no init line: pointer, rank unknown


def test_each_job_and_size_is_its_own_profile() -> None:
    lines = [_coll(1, "0x10", "AllReduce", 8, 7, 2, T0), _coll(1, "0x10", "AllReduce", 16, 7, 2, T0),
             _coll(2, "0x20", "AllReduce", 8, 7, 2, T0)]
    _, profiles = _profiles(lines, {1: "a", 2: "b"})
    assert [(p.job_id, p.comm_id, p.count, p.calls) for p in profiles] == \
        [("a", "0x10", 8, 1), ("a", "0x10", 16, 1), ("b", "0x20", 8, 1)]


def test_datatype_sizes_and_bus_factors_are_nccls() -> None:
    assert DTYPE_BYTES[7] == 4 and DTYPE_BYTES[9] == 2 and DTYPE_BYTES[8] == 8 and DTYPE_BYTES[0] == 1
    for name, (enum, width) in sim_log.DTYPES.items():  # the simulator's table agrees
        assert DTYPE_BYTES[enum] == width, name
    assert bus_factor("AllReduce", 16) == pytest.approx(30 / 16)
    assert bus_factor("AllGather", 4) == bus_factor("ReduceScatter", 4) == 0.75
    assert bus_factor("Broadcast", 4) == bus_factor("Send", 4) == 1.0
    assert call_bytes("ReduceScatter", 10, 6, 4) == 80 and call_bytes("Reduce", 10, 6, 4) == 20


def test_remembered_open_intervals_are_bounded() -> None:
    prof = CollectiveProfiler(max_open=3)
    for pid in range(10):
        prof.call(pid, 0, "0x1", "AllReduce", 1, 7, 0, 2, T0)
    prof.call(0, 0, "0x1", "AllReduce", 1, 7, 0, 2, T0 + 1)  # pid 0's first call was forgotten: not timed
    prof.call(9, 0, "0x1", "AllReduce", 1, 7, 0, 2, T0 + 1)  # pid 9's is still open: timed
    assert sum(p.timed_calls for p in prof.take("h1", str, 0, 1)) == 1
