"""Launchers' prefixes and NCCL's local-time stamps (``nccl_line``). The launcher lines are built from each tool's
documented output format (no public NCCL log with them was found; tests/fixtures/real/nccl/SOURCES.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from flowtracer.collectors.agent.sources.nccl_line import split_line, timestamp_ns
from flowtracer.collectors.agent.sources.nccl_log import NcclLog

BODY = "gpu-07:4242:4299 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.7<0>"


@pytest.mark.parametrize(("prefix", "launchers"), [
    ("", ()),
    ("gpu-07: ", ("pdsh",)),  # pdsh / clush: "host: "
    ("[1,3]<stdout>:", ("openmpi",)),  # mpirun --tag-output
    ("[1,3]<stderr>: ", ("openmpi",)),
    ("[12] ", ("rank",)),  # mpirun -prepend-rank, horovodrun
    ("0: ", ("srun",)),  # srun -l
    ("  7: ", ("srun",)),  # srun -l pads the task number
    ("(RayTrainWorker pid=83500, ip=10.0.0.218) ", ("ray",)),
    ("(pid=21065) ", ("ray",)),
    ("(EngineCore_DP0 pid=1088) (RayWorkerWrapper pid=285, ip=192.168.177.12) ", ("ray", "ray")),
    ("2024-06-16T22:23:01.844192Z ", ("kubectl",)),  # kubectl logs --timestamps
    ("2024-06-16T22:23:01.844192Z [2025-03-01 10:00:00.123] ", ("kubectl", "stamp")),
    ("[2025-03-01 10:00:00] ", ("stamp",)),  # NCCL_DEBUG_TIMESTAMP_LEVELS, default format
    ("node5: [2025-03-01 10:00:00.123456] ", ("pdsh", "stamp")),
])
def test_launcher_prefixes_come_off_and_the_line_reads_as_plain(prefix: str, launchers: tuple[str, ...]) -> None:
    parts = split_line(prefix + BODY)
    assert parts is not None
    assert (parts.host, parts.pid, parts.dev, parts.launchers, parts.unknown_prefix) == (
        "gpu-07", "4242", "3", launchers, "")
    log = NcclLog()
    log.feed([prefix + BODY])
    assert log.devices(4242) == {0: ("mlx5_0", 1), 1: ("mlx5_1", 1)} and log.shapes.counts == {}


def test_an_rccl_timestamp_column_before_nccl_info_is_skipped() -> None:
    parts = split_line("gpu-07:4242:4299 [3] 1234.567890 NCCL INFO Using network IB")
    assert parts is not None and parts.msg == "Using network IB"


def test_an_unknown_prefix_is_read_through_and_counted_by_shape() -> None:
    log = NcclLog()
    lines = [f"{n}|bash run-5b  | {BODY}" for n in range(3)]  # pm2's prefix, seen around a Ray log
    log.feed(lines)
    assert log.devices(4242) == {0: ("mlx5_0", 1), 1: ("mlx5_1", 1)}  # nothing lost
    assert log.shapes.counts == {"prefix|#|bash run-#b |": 3} and log.malformed == 0


def test_a_line_without_nccls_prefix_is_not_understood_and_counted() -> None:
    log = NcclLog()
    log.feed(["node01:4242 [0] NCCL INFO this prefix lost its thread id", "an application's own line"])
    assert (log.unknown, log.other, log.malformed) == (1, 1, 1)
    assert list(log.shapes.counts) == ["line|node#:# [#] NCCL INFO this prefix lost its thread id"]


def test_long_lines_a_job_prints_are_read_where_nccls_prefix_is_and_shaped_from_their_start() -> None:
    """A captured log mixes in the job's own output (progress bars, base64 blobs up to the tail's 64 KiB): NCCL's
    prefix is still found after a long launcher text, a second ``NCCL INFO`` in the message stays in the message,
    and a long line without the prefix is one shape of its start."""
    bar = "#" * 65_000
    parts = split_line(f"{bar} gpu-07:4242:4299 [3] NCCL INFO Using network IB; NCCL INFO again")
    assert parts is not None and (parts.host, parts.pid, parts.dev) == ("gpu-07", "4242", "3")
    assert parts.msg == "Using network IB; NCCL INFO again" and parts.unknown_prefix == bar + " "
    assert split_line("a" * 65_000) is None and split_line("NCCL INFO " * 6_500) is None
    log = NcclLog()
    log.feed(["step 7 " + "=" * 65_000, "step 8 " + "=" * 65_000])
    assert (log.other, log.malformed) == (2, 0)


def test_a_fall_back_hour_seen_twice_is_read_as_two_hours() -> None:
    """Europe/Zurich, 2025-10-26: at 03:00 CEST the clocks go back to 02:00 CET, so NCCL's local stamps show 02:xx
    twice; read with the newest stamp before, the second pass is an hour later, not back in time."""
    zone, cache, newest = ZoneInfo("Europe/Zurich"), {}, 0
    got = []
    for stamp in ("01:59:59", "02:30:00", "02:59:59", "02:00:00", "02:30:00", "03:00:00"):
        at = timestamp_ns(f"2025-10-26 {stamp}", cache, zone, newest)
        newest = max(newest, at)
        got.append(datetime.fromtimestamp(at / 1e9, UTC).strftime("%H:%M:%S"))
    assert got == ["23:59:59", "00:30:00", "00:59:59", "01:00:00", "01:30:00", "02:00:00"]
    # without what came before (a log's first line), the first instant: as NCCL's first pass would be
    assert timestamp_ns("2025-10-26 02:30:00", {}, zone) == int(datetime(2025, 10, 26, 0, 30, tzinfo=UTC).timestamp()) * 10**9


@pytest.mark.parametrize(("zone", "stamp", "utc"), [
    ("UTC", "2025-11-25 23:30:01", datetime(2025, 11, 25, 23, 30, 1, tzinfo=UTC)),
    ("Europe/Zurich", "2025-11-25 23:30:01", datetime(2025, 11, 25, 22, 30, 1, tzinfo=UTC)),  # CET, UTC+1
    ("Europe/Zurich", "2025-07-01 12:00:00", datetime(2025, 7, 1, 10, 0, 0, tzinfo=UTC)),  # CEST, UTC+2
    ("America/Los_Angeles", "2025-03-09 12:00:00", datetime(2025, 3, 9, 19, 0, 0, tzinfo=UTC)),  # PDT from 09 Mar
    ("Asia/Kolkata", "2025-01-01 05:30:00.25", datetime(2025, 1, 1, 0, 0, 0, 250000, tzinfo=UTC)),
])
def test_nccl_stamps_are_local_time_of_the_hosts_zone(zone: str, stamp: str, utc: datetime) -> None:
    """NCCL formats its stamp with localtime_r (src/debug.cc): the wall clock of the host's zone."""
    want = int(utc.timestamp()) * 10**9 + utc.microsecond * 1000
    assert timestamp_ns(stamp, {}, ZoneInfo(zone)) == want
    calls: list[int] = []
    log = NcclLog(on_call=lambda *a: calls.append(a[-1]), zone=ZoneInfo(zone))
    log.feed([f"[{stamp}] h:5:5 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 "
              "op 0 root 0 comm 0x10 [nranks=2] stream 0x3"])
    assert calls == [want]


def test_without_a_zone_stamps_are_read_in_this_process_local_zone() -> None:
    naive = datetime(2025, 11, 25, 23, 30, 1)
    assert timestamp_ns("2025-11-25 23:30:01", {}) == int(naive.timestamp()) * 10**9


@pytest.mark.parametrize("text", [None, "", "Nov 25 23:30:01", "2025-13-25 23:30:01", "0001-01-01 00:00:00"])
def test_other_stamps_are_no_time(text: str | None) -> None:
    assert timestamp_ns(text, {}, ZoneInfo("America/Los_Angeles")) == 0
