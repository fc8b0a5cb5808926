"""The simulator's host views: the files of a real Linux RDMA host, read by the agent's real parsers."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowtracer.collectors.agent.sources.nccl_log import NcclLog
from flowtracer.collectors.agent.sources.proc_jobs import ProcJobs
from flowtracer.collectors.agent.sources.rdma_json import parse_res_qp, parse_stat_qp, per_qp_counters
from flowtracer.collectors.agent.sources.sysfs import read_sysfs
from flowtracer.sim.fabric.congestion_counters import GT_NIC_FIELDS, NIC_HW_COUNTERS, NIC_PFC_COUNTERS
from flowtracer.sim.hosts.state import HostState, NicInfo, PortCounters, QpState
from flowtracer.sim.hosts.views import KEEP, SPARES, host_view_dir, ipv4_mapped_gid, write_host_view

T0 = 1_700_000_000_000_000_000


@pytest.fixture
def shm(tmp_path: Path) -> Iterator[Path]:
    """A temp dir on tmpfs when there is one: host views are many small files."""
    if not Path("/dev/shm").is_dir():
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        yield Path(d)


def _host() -> HostState:
    hs = HostState("gpu01", timestamp_ns=T0)
    for dev, nd, ip in (("mlx5_0", "ens1f0np0", "10.0.1.1"), ("mlx5_1", "ens2f0np0", "10.0.2.1")):
        hs.nics.append(NicInfo(dev, 1, nd, ip, 400_000_000_000))
        hs.ports[(dev, 1)] = PortCounters(dev, 1, nd, tx_bytes=4_000_003, rx_bytes=8, tx_packets=1000, rx_packets=2)
    hs.qps[("mlx5_0", 300)] = QpState("mlx5_0", 1, "ens1f0np0", 300, 700, "10.0.1.1", "10.0.1.2", 0, 42, "python3",
                                      T0, sq_psn=0xFFFFFF, rq_psn=5, tx_bytes=123, tx_packets=1, rx_bytes=7,
                                      rx_packets=1)
    hs.nccl_log.append("gpu01:42:42 [0] NCCL INFO ncclCommInitRank comm 0x10 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
                       "busId 1000 commId 0xabc - Init START")
    return hs


def test_a_snapshot_reads_back_through_the_agent_parsers(shm: Path) -> None:
    hs = _host()
    write_host_view(hs, shm)
    d = host_view_dir(shm, "gpu01")
    cur = d / "current"
    assert cur.is_symlink() and json.loads((cur / "view.json").read_text()) == {"host": "gpu01", "timestamp_ns": T0}
    text = (cur / "rdma" / "resource_show_qp.json").read_text()
    assert text.startswith('[{"ifindex":0,"ifname":"mlx5_0","port":1,"lqpn":300,"rqpn":700,"type":"RC"')
    (qp,) = parse_res_qp(text).records
    assert (qp.lqpn, qp.rqpn, qp.sq_psn, qp.rq_psn, qp.pid, qp.comm) == (300, 700, 0xFFFFFF, 5, 42, "python3")
    stat = parse_stat_qp((cur / "rdma" / "statistic_qp_show.json").read_bytes())
    _cntn, (tx_bytes, rx_bytes, tx_packets, rx_packets) = per_qp_counters(stat.records)[("mlx5_0", 1, 300)]
    assert (tx_bytes, rx_bytes, tx_packets, rx_packets) == (123, 7, 1, 1)
    view = read_sysfs(cur / "sys" / "class" / "infiniband")
    assert view.malformed == 0
    p = view.ports[("mlx5_0", 1)]
    assert p.roce_v2_ips() == ["10.0.1.1"] and p.netdev == "ens1f0np0" and p.netdev_mtu == 9000
    assert p.counters["port_xmit_data"] == 1_000_000 and p.tx_bytes == 4_000_000  # 4-byte words, as the PMA
    assert ipv4_mapped_gid("10.0.1.1") == "0000:0000:0000:0000:0000:ffff:0a00:0101"
    log = NcclLog()
    log.feed((d / "nccl.log").read_text().splitlines())
    assert log.malformed == 0 and log.tag(42, "mlx5_0", 300) is not None


def test_congestion_counters_are_the_ports_hw_counters_and_ethtool_pfc(shm: Path) -> None:
    """With the congestion model on, a port's mlx5 hw_counters move with the tick (the agent's sysfs
    reader sees them) and ``ethtool/<netdev>`` prints its priority-3 PFC counters; without, they stay 0."""
    hs = _host()
    cong = dict.fromkeys(GT_NIC_FIELDS, 0) | {"np_cnp_sent": 17, "rp_cnp_handled": 9, "tx_prio3_pause": 5,
                                             "rx_prio3_pause_duration": 1234}
    hs.ports[("mlx5_0", 1)].congestion = cong
    write_host_view(hs, shm)
    cur = host_view_dir(shm, "gpu01") / "current"
    view = read_sysfs(cur / "sys" / "class" / "infiniband")
    assert view.malformed == 0
    hw = view.ports[("mlx5_0", 1)].hw_counters
    assert {k: hw[k] for k in NIC_HW_COUNTERS} == {k: cong[k] for k in NIC_HW_COUNTERS}
    assert set(view.ports[("mlx5_1", 1)].hw_counters.values()) == {0}  # the model publishes nothing for it
    lines = (cur / "ethtool" / "ens1f0np0").read_text().splitlines()
    assert lines[0] == "NIC statistics:"
    assert dict(line.strip().split(": ") for line in lines[1:]) == {k: str(cong[k]) for k in NIC_PFC_COUNTERS}
    assert not (cur / "ethtool" / "ens2f0np0").exists()


def test_snapshots_are_kept_pruned_and_log_lines_appended_once(shm: Path) -> None:
    hs = _host()
    for i in range(KEEP + 5):
        hs.timestamp_ns = T0 + i * 250_000_000
        hs.nccl_log.append(f"gpu01:42:42 [0] NCCL INFO line {i}")
        write_host_view(hs, shm, qp_counters=False)
    d = host_view_dir(shm, "gpu01")
    snaps = sorted(os.listdir(d / "snapshots"))
    assert len(snaps) == KEEP and snaps[-1].startswith(f"{T0 + (KEEP + 4) * 250_000_000:020d}-")
    assert not (d / "current" / "rdma" / "statistic_qp_show.json").exists()  # kernel without per-QP counters
    lines = (d / "nccl.log").read_text().splitlines()
    assert len(lines) == KEEP + 6 and lines[-1].endswith("line 20")


def test_readers_never_see_half_a_snapshot(shm: Path) -> None:
    hs = _host()
    write_host_view(hs, shm)
    cur = host_view_dir(shm, "gpu01") / "current"
    stop = threading.Event()
    bad: list[str] = []

    def read() -> None:
        while not stop.is_set():
            try:
                snap = cur.resolve(strict=True)
                qp = parse_res_qp((snap / "rdma" / "resource_show_qp.json").read_bytes())
                st = parse_stat_qp((snap / "rdma" / "statistic_qp_show.json").read_bytes())
            except FileNotFoundError:
                continue  # pruned between resolve and read: the agent lists again
            if qp.malformed or st.malformed or len(qp.records) != 1:
                bad.append(repr(qp))

    t = threading.Thread(target=read)
    t.start()
    for i in range(60):
        with hs.lock:
            hs.timestamp_ns = T0 + i
            hs.qps[("mlx5_0", 300)].tx_bytes += 10**9
        write_host_view(hs, shm)
    stop.set()
    t.join()
    assert not bad


def test_proc_names_each_process_job_as_slurm_would_and_goes_with_its_last_qp(shm: Path) -> None:
    """``proc/<pid>/cgroup`` gives the agent's /proc reader the ground-truth job of each QP owner (none for a
    process outside any job); when the pid has no QP any more its entry goes, as the process would."""
    hs = _host()
    hs.qps[("mlx5_0", 300)].job = "ring-allreduce"
    hs.qps[("mlx5_1", 301)] = QpState("mlx5_1", 1, "ens2f0np0", 301, 701, "10.0.2.1", "10.0.2.2", 0, 43, "ib_write_bw",
                                      T0)
    write_host_view(hs, shm)
    proc = host_view_dir(shm, "gpu01") / "proc"
    assert (proc / "42" / "cgroup").read_text() == \
        "0::/system.slice/slurmstepd.scope/job_ring-allreduce/step_0/user/task_0\n"
    assert ProcJobs(proc).jobs([42, 43]) == {42: "ring-allreduce"}
    del hs.qps[("mlx5_0", 300)]
    hs.timestamp_ns += 1
    write_host_view(hs, shm)
    assert sorted(os.listdir(proc)) == ["43"]


def _tree(d: Path) -> dict[str, object]:
    """Every entry under ``d``: a directory, a symlink's target or a file's bytes, by relative path."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(d):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(d))
            out[rel] = ("->", os.readlink(p)) if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
    return out


def test_a_recycled_snapshot_is_the_snapshot_built_afresh(shm: Path) -> None:
    """Snapshots rewritten in place from retired ones (the fast way) hold exactly what the plain way builds:
    same entries, bytes and link targets, through QPs appearing and going, the congestion counters turning on
    (a new layout), counters growing and shrinking in width, and the static tree being rebuilt."""
    fast, plain = _host(), _host()
    recycled = 0
    for i in range(3 * KEEP + 10):
        for hs in (fast, plain):
            with hs.lock:
                hs.timestamp_ns = T0 + i * 250_000_000
                qp = hs.qps[("mlx5_0", 300)]
                qp.tx_bytes = 10 ** (i % 13)  # the file's width goes up and down
                qp.sq_psn = (qp.sq_psn + 7 * i) & 0xFFFFFF
                if i % 9 == 4:
                    hs.qps[("mlx5_1", 400 + i)] = QpState("mlx5_1", 1, "ens2f0np0", 400 + i, 800, "10.0.2.1",
                                                          "10.0.2.2", 0, 50 + i, "python3", T0 + i)
                elif i % 9 == 7:
                    hs.qps.pop(("mlx5_1", 400 + i - 3), None)
                if i == 2 * KEEP:
                    hs.ports[("mlx5_0", 1)].congestion = dict.fromkeys(GT_NIC_FIELDS, i)
                if i == 2 * KEEP + 3:
                    hs.qps[("mlx5_0", 300)].mtu = 1024  # the static tree is rebuilt (netdev MTU)
            hs.ports[("mlx5_0", 1)].tx_bytes += 4 * i
        spares = shm / "fast" / "gpu01" / ".spare"
        before = len(os.listdir(spares)) if spares.is_dir() else 0
        write_host_view(fast, shm / "fast")
        recycled += (len(os.listdir(spares)) if spares.is_dir() else 0) <= before and i > KEEP
        write_host_view(plain, shm / "plain", recycle=False)
        a, b = host_view_dir(shm / "fast", "gpu01"), host_view_dir(shm / "plain", "gpu01")
        assert os.readlink(a / "current") == os.readlink(b / "current")
        assert _tree(a / "current") == _tree(b / "current"), i
        assert sorted(os.listdir(a / "snapshots")) == sorted(os.listdir(b / "snapshots"))
    assert recycled > KEEP  # the fast way was taken, not only the fresh build
    assert not (shm / "plain" / "gpu01" / ".spare").exists()


def test_current_moves_last_so_a_reader_of_a_tick_finds_its_log_lines(shm: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent reads a host as soon as ``current`` names the tick's snapshot (the sim source's ``poll``): by then
    the tick's NCCL lines are in ``nccl.log`` (and its processes in ``proc/``)."""
    hs = _host()
    write_host_view(hs, shm)
    log = host_view_dir(shm, "gpu01") / "nccl.log"
    seen: list[str] = []
    replace = os.replace

    def watch(src: str | Path, dst: str | Path) -> None:
        replace(src, dst)
        if Path(dst).name == "current":  # the instant a polling reader could see the new tick
            seen.append(log.read_text())

    monkeypatch.setattr(os, "replace", watch)
    with hs.lock:
        hs.timestamp_ns = T0 + 1_000_000_000
        hs.nccl_log.append("gpu01:42:42 [0] NCCL INFO the tick's line")
    write_host_view(hs, shm)
    assert len(seen) == 1 and seen[0].endswith("NCCL INFO the tick's line\n")


def test_spares_built_ahead_make_every_later_snapshot_a_rewrite_of_the_same_bytes(shm: Path) -> None:
    """``spares_ahead`` (the runner's first write, before the engine's first tick): every later write rewrites a
    spare instead of building a snapshot afresh, and the snapshots are those built the plain way."""
    fast, plain = _host(), _host()
    spares = shm / "fast" / "gpu01" / ".spare"
    for i in range(KEEP + SPARES + 3):
        for hs in (fast, plain):
            with hs.lock:
                hs.timestamp_ns = T0 + i * 250_000_000
                hs.qps[("mlx5_0", 300)].tx_bytes = 10 ** (i % 13)
            hs.ports[("mlx5_0", 1)].tx_bytes += 4 * i
        before = {n for n in os.listdir(spares)} if spares.is_dir() else set()
        write_host_view(fast, shm / "fast", spares_ahead=True)
        write_host_view(plain, shm / "plain", recycle=False)
        if i == 0:
            assert len(os.listdir(spares)) == KEEP + SPARES + 1
        else:  # the new snapshot is one of the spares, renamed into place: nothing was built afresh
            assert before - set(os.listdir(spares)), i
        a, b = host_view_dir(shm / "fast", "gpu01"), host_view_dir(shm / "plain", "gpu01")
        assert os.readlink(a / "current") == os.readlink(b / "current")
        assert _tree(a / "current") == _tree(b / "current"), i
