"""Golden tests over real NCCL logs (tests/fixtures/real/nccl, sources in its SOURCES.md): what each must yield.

The expectations were written from reading each sample: the devices of its ``NET/IB : Using`` lines, which QP
serves which channel, rank and peer (a process's ``[send]`` lines in order, taken by its QP lines of the same net
device in order), and how its lines divide into used (a format this reader needs), ignored (known, not needed),
other (no NCCL INFO line, or a message of no family read here) and unknown (counted by shape). An agent reads one
host's log, so a sample of several hosts is read per host.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from flowtracer.collectors.agent.sources.nccl_line import split_line
from flowtracer.collectors.agent.sources.nccl_log import NcclLog

REAL = Path(__file__).parents[3] / "fixtures" / "real" / "nccl"


def lines_of(name: str) -> list[str]:
    return (REAL / name).read_text().splitlines()


def read(name: str) -> NcclLog:
    """The whole sample through one reader (for the line accounting)."""
    log = NcclLog()
    log.feed(lines_of(name), name)
    return log


def read_per_host(name: str) -> dict[str, NcclLog]:
    """One reader per host, each fed that host's lines in order, as that host's agent would read them."""
    by_host: dict[str, list[str]] = defaultdict(list)
    for line in lines_of(name):
        parts = split_line(line)
        by_host[parts.host if parts else ""].append(line)
    logs = {}
    for host, lines in by_host.items():
        logs[host] = NcclLog()
        logs[host].feed(lines, name)
    return logs


def counts(log: NcclLog) -> tuple[int, int, int, int, int]:
    return log.used, log.ignored, log.other, log.unknown, log.bad


def tag_of(log: NcclLog, pid: int, device: str, qpn: int) -> tuple[str, int, int, int, int]:
    """(comm id, rank, nranks, channel, peer) of a QP's tag."""
    t = log.tag(pid, device, qpn)
    assert t is not None, f"QP {qpn} of pid {pid} on {device!r} has no tag"
    return t.comm.id, t.comm.rank, t.comm.nranks, t.channel, t.peer_rank


# -- every sample: each line accounted for, in the sample's buckets ------------------------------------------------

# (file, lines, (used, ignored, other, unknown, bad)), counted by hand from each file.
ACCOUNTS = [
    ("ring2-node0_2.20.5_torchrun.log", 61, (10, 2, 49, 0, 0)),
    ("nccl-tests-350_2.16.5_mpirun.log", 66, (8, 0, 58, 0, 0)),
    ("dgx-spark_2.28.9_mpirun.log", 139, (48, 21, 70, 0, 0)),
    ("nccl-1453_prepend-rank_pxn.log", 14, (3, 10, 1, 0, 0)),
    ("nccl-1453_prepend-rank_direct.log", 13, (6, 0, 7, 0, 0)),
    ("nccl-302_2.5.6_prepend-rank.log", 10, (1, 3, 6, 0, 0)),
    ("nccl-tests-36_ring-era_mpirun.log", 13, (5, 0, 8, 0, 0)),
    ("ray-16979_2.7.8_plain.log", 13, (3, 0, 10, 0, 0)),
    ("ray-16979_2.7.8_ray-pid.log", 15, (0, 0, 15, 0, 0)),
    ("ray-40850_raytrainworker.log", 12, (0, 0, 12, 0, 0)),
    ("fastsafetensors-36_nested-ray.log", 7, (1, 0, 6, 0, 0)),
    ("nccl-1357_sharp-plugin.log", 13, (3, 0, 10, 0, 0)),
    ("nccl-tests-185_2.19.3_mpirun.log", 14, (2, 0, 12, 0, 0)),
    ("nccl-1412_one-process-8-gpus.log", 22, (9, 10, 3, 0, 0)),
    ("rccl-1026_comm-suffix.log", 13, (4, 5, 4, 0, 0)),
    ("rccl-419_4-nics.log", 16, (3, 0, 13, 0, 0)),
    ("nccl-1657_k8s.log", 10, (2, 0, 8, 0, 0)),
    ("nccl-1814_ibext-v8.log", 13, (13, 0, 0, 0, 0)),
]


@pytest.mark.parametrize(("name", "n", "want"), ACCOUNTS, ids=[a[0] for a in ACCOUNTS])
def test_every_line_of_a_real_log_is_accounted_for(name: str, n: int, want: tuple[int, ...]) -> None:
    log = read(name)
    assert log.lines == n == sum(counts(log))
    assert counts(log) == want
    assert log.shapes.counts == {}  # every launcher prefix of these samples is known
    assert log.malformed == 0


def test_the_corpus_spans_versions_and_launchers() -> None:
    """The issue's bar: at least 12 real logs of at least 5 NCCL versions and 3 launcher styles."""
    names = {a[0] for a in ACCOUNTS}
    assert len(names) >= 12 and names == {p.name for p in REAL.glob("*.log")}
    versions = {v for name in names for v in ("2.5.6", "2.7.8", "2.16.5", "2.19.3", "2.20.5", "2.28.9") if v in name}
    assert len(versions) >= 5
    launchers = set()
    for name in names:
        for line in lines_of(name):
            parts = split_line(line)
            if parts is not None:
                launchers.add(parts.launchers)
    assert {(), ("rank",), ("ray",), ("ray", "ray")} <= launchers


# -- devices --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "pid", "devices"), [
    ("ring2-node0_2.20.5_torchrun.log", 4744, {0: ("rxe0", 1)}),
    ("nccl-tests-350_2.16.5_mpirun.log", 101855, {0: ("mlx5_0", 1), 1: ("mlx5_2", 1)}),
    ("dgx-spark_2.28.9_mpirun.log", 24302, {0: ("rocep1s0f1", 1), 1: ("roceP2p1s0f1", 1)}),
    ("nccl-302_2.5.6_prepend-rank.log", 5330,
     {0: ("mlx5_1", 1), 1: ("mlx5_3", 1), 2: ("mlx5_0", 1), 3: ("mlx5_2", 1), 4: ("mlx5_4", 1)}),
    ("ray-16979_2.7.8_plain.log", 34730, {0: ("mlx5_0", 1)}),
    ("nccl-1357_sharp-plugin.log", 49360, {0: ("mlx5_0", 1), 1: ("mlx5_1", 1), 2: ("mlx5_4", 1), 3: ("mlx5_5", 1)}),
    ("nccl-tests-185_2.19.3_mpirun.log", 2152176, {0: ("mlx5_10", 1), 1: ("mlx5_11", 1)}),
    ("rccl-419_4-nics.log", 927, {0: ("mlx5_3", 1), 1: ("mlx5_2", 1), 2: ("mlx5_1", 1), 3: ("mlx5_0", 1)}),
])
def test_devices_of_the_using_line(name: str, pid: int, devices: dict[int, tuple[str, int]]) -> None:
    assert read(name).devices(pid) == devices


# -- QPs ------------------------------------------------------------------------------------------------------------

def test_2_20_qp_lines_tag_their_channel_and_peer_and_the_remote_qp_of_set_ece_is_not_ours() -> None:
    log = read("ring2-node0_2.20.5_torchrun.log")
    comm = "0x1f82f8f6b7863cd3"
    assert tag_of(log, 4744, "rxe0", 34) == (comm, 0, 3, 0, 1)  # Channel 00/0 : 0[0] -> 1[0] [send]
    assert tag_of(log, 4744, "rxe0", 36) == (comm, 0, 3, 0, 2)  # Channel 00/0 : 0[0] -> 2[0] [send]
    assert log.tag(4744, "rxe0", 35) is None and log.tag(4744, "rxe0", 42) is None  # the peers' QPs (set_ece)


def test_2_16_qp_lines_of_a_log_without_init_start_get_the_communicator_named_later() -> None:
    log = read("nccl-tests-350_2.16.5_mpirun.log")
    comm = "0xb2f794396f6d0bd1"  # from the Init COMPLETE line, logged after both QP lines
    assert tag_of(log, 101855, "mlx5_2", 3038) == (comm, 0, 2, 0, 1)  # Dev 1 = [1]mlx5_2
    assert tag_of(log, 101855, "mlx5_2", 3039) == (comm, 0, 2, 1, 1)
    assert log.tag(4242, "mlx5_0", 3038) is None  # the same number on the other NIC, in another process


def test_2_28_qp_lines_of_two_hosts_on_two_nics() -> None:
    logs = read_per_host("dgx-spark_2.28.9_mpirun.log")
    comm = "0x3470ca318760efc8"
    nic0, nic1 = "rocep1s0f1", "roceP2p1s0f1"
    # spark-4440 is rank 1: even channels leave on net device 0, odd on 1, each device's QP lines in order.
    a = logs["spark-4440"]
    assert tag_of(a, 24302, nic0, 576) == (comm, 1, 2, 0, 0)
    assert tag_of(a, 24302, nic1, 704) == (comm, 1, 2, 1, 0)
    assert tag_of(a, 24302, nic0, 577) == (comm, 1, 2, 2, 0)
    assert tag_of(a, 24302, nic1, 705) == (comm, 1, 2, 3, 0)
    assert tag_of(a, 24302, nic0, 582) == (comm, 1, 2, 4, 0)
    b = logs["spark-fb97"]  # rank 0
    assert [tag_of(b, 23491, nic1, q)[3] for q in (704, 707, 710)] == [1, 3, 5]
    assert [tag_of(b, 23491, nic0, q)[3] for q in (578, 581, 582, 585)] == [0, 2, 4, 6]
    assert tag_of(b, 23491, nic0, 585) == (comm, 0, 2, 6, 1)


def test_a_qp_line_with_no_using_line_and_no_communicator_is_tagged_by_pid_with_the_channel_rank() -> None:
    log = read("nccl-1657_k8s.log")
    assert tag_of(log, 88, "", 1047) == ("", 0, 0, 1, 1)  # Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/0


def test_old_qp_lines_logged_before_their_ring_line_get_only_their_process_rank() -> None:
    """NCCL 2.4/2.5 printed the QP before the ``Ring ... [send]`` line, and this excerpt names no communicator: a QP
    gets its process's one communicator, known by the rank its Ring lines give, with no channel or peer."""
    logs = read_per_host("nccl-tests-36_ring-era_mpirun.log")
    assert tag_of(logs["pkb-aa8dbd1b-0"], 9100, "", 624257) == ("", 0, 0, -1, -1)  # 0[435e00000] -> 1[...] [send]
    assert tag_of(logs["pkb-aa8dbd1b-1"], 9482, "", 472981) == ("", 1, 0, -1, -1)  # 0[...] -> 1[...] [receive]


# -- communicators ------------------------------------------------------------------------------------------------

def test_nested_ray_prefix_and_the_comm_nranks_line() -> None:
    log = read("fastsafetensors-36_nested-ray.log")
    t = log.tag(285, "mlx5_0", 1)  # a QP of the process: its only communicator
    assert t is not None and (t.comm.pointer, t.comm.rank, t.comm.nranks, t.channel) == ("0x1095e9d0", 1, 2, -1)


def test_rccl_channel_lines_name_their_communicator() -> None:
    logs = read_per_host("rccl-1026_comm-suffix.log")
    t = logs["g1064"].tag(11144, "", 7)
    assert t is not None and (t.comm.pointer, t.comm.rank) == ("0x9e4d8d0", 1)
    t = logs["g1072"].tag(1263985, "", 7)
    assert t is not None and (t.comm.pointer, t.comm.rank) == ("0x95cdeb0", 4)  # 1[c6000] -> 4[c1000] [receive]


# -- held-out samples: parsed or counted by shape, never dropped ----------------------------------------------------

@pytest.mark.parametrize("path", sorted((REAL / "heldout").glob("*.log")), ids=lambda p: p.name)
def test_held_out_samples_are_parsed_or_counted_by_shape(path: Path) -> None:
    lines = path.read_text().splitlines()
    log = NcclLog()
    log.feed(lines, path.name)
    assert log.lines == len(lines) == sum(counts(log)) and log.bad == 0
    not_understood = sum(n for s, n in log.shapes.counts.items() if not s.startswith("prefix|"))
    assert not_understood == log.unknown == log.malformed


def test_held_out_glued_lines_are_counted_not_half_read() -> None:
    log = NcclLog()
    log.feed((REAL / "heldout" / "deepep-106_glued-lines.log").read_text().splitlines())
    assert log.unknown == 2 and log.used == 0 and all(s.startswith("glued|") for s in log.shapes.counts)
