"""The files a host agent reads on a real Linux RDMA host, written for each simulated host.

``write_host_view(state, root)`` writes one *snapshot* of ``state`` (a ``HostState``) under
``root/<host>/``; the engine calls it at the end of every tick. Layout of a host directory::

    current -> snapshots/<ts>-<seq>            the newest snapshot (symlink, swapped atomically)
    snapshots/<ts>-<seq>/                      ts = engine time in ns (20 digits), seq = write count
        view.json                              {"host", "timestamp_ns"}
        rdma/resource_show_qp.json             = rdma -j resource show qp
        rdma/statistic_qp_show.json            = rdma -j statistic qp show (absent without QP counters)
        sys/class/infiniband/<dev>/ports/<n>/counters/*      PMA counters that move (port_*_data in 4-byte words)
        sys/class/infiniband/<dev>/ports/<n>/{gids,gid_attrs,hw_counters} -> ../../../../../../../../static/...
        sys/class/infiniband/<dev>/ports/<n>/hw_counters/*   with the congestion model on: a real directory
                                                   holding the port's mlx5 counters of this tick (docs/congestion.md)
        ethtool/<netdev>                           with the congestion model on: = ethtool -S <netdev>, the
                                                   priority-3 PFC pause counters
        sys/class/net -> ../../../../static/net  (<netdev>/mtu)
    static/                                    GID tables, hw_counters (all 0) and netdev MTUs (written once)
    static/lldpctl.json                        = lldpctl -f json of an lldpd that only receives (lldpd -r): the
                                               switch port each NIC hears
    proc/<pid>/cgroup                          = /proc/<pid>/cgroup of each process owning QPs: the Slurm cgroup/v2
                                               path of its job (``job_<job name>``), written before the first
                                               snapshot listing the pid and removed with its last QP
    nccl.log                                   NCCL_DEBUG=INFO lines, append-only (NCCL_DEBUG_FILE)
    .spare/<ts>-<seq>/                         snapshots pruned from snapshots/, waiting to be rewritten as new ones

Each snapshot is built under a temporary name and renamed into place before ``current`` moves,
so a reader never sees half a file or a mix of two ticks; ``current`` moves last (after the tick's NCCL lines
and ``proc/`` entries), so a host's data for a tick exists once ``current`` names its snapshot (what an agent
waits for); the last ``KEEP`` snapshots are kept
so an agent can read the one at its window boundary (the state of the host at that instant).
What a snapshot holds is one rule (``_plan_snapshot``); it is built afresh, or, once ``SPARES`` older
ones wait in ``.spare/``, by rewriting the oldest of them in place when its layout matches (only the files
that differ: on a journaling file system creating directories, files and symlinks and removing them is
most of the cost, about 10x a rewrite; docs/benchmarks.md, simulator).
JSON is formatted as iproute2 prints it (compact, keys in its order); sysfs files as the kernel
prints them. Formats are documented, with their upstream sources, in docs/agent.md.

Per-QP byte counters (Linux >= 6.15 optional counters, one counter bound per QP) are written
unless ``qp_counters`` is False, or the environment has ``FLOWTRACER_SIM_QP_COUNTERS=0``: then
an agent must fall back to PSN estimates, as on older kernels.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from flowtracer.sim.hosts.state import HostState, NicInfo, QpState

KEEP = 16
"""Snapshots kept per host (at a 0.25 s tick: 4 s of history)."""
SPARES = 4
"""Writes a retired snapshot waits in ``.spare/`` before its directory is rewritten as a new one."""

# The hardware counters mlx5 exposes per port and per QP counter (values the simulator does not
# model stay 0, as on an idle error-free port).
_HW_COUNTERS = ("duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err", "np_cnp_sent",
                "np_ecn_marked_roce_packets", "out_of_buffer", "out_of_sequence", "packet_seq_err",
                "rnr_nak_retry_err", "rp_cnp_handled", "rp_cnp_ignored", "rx_atomic_requests", "rx_read_requests",
                "rx_write_requests")
_QP_HW_COUNTERS = ("rx_write_requests", "rx_read_requests", "rx_atomic_requests", "out_of_buffer",
                   "out_of_sequence", "duplicate_request", "rnr_nak_retry_err", "packet_seq_err",
                   "implied_nak_seq_err", "local_ack_timeout_err")
# A netdev MTU for each RoCE path MTU such that Linux's iboe_get_mtu() yields that path MTU.
_NETDEV_MTU = {4096: 9000, 2048: 4000, 1024: 1500, 512: 1000, 256: 500}
_FIRST_CNTN = 4  # mlx5 allocates the default port counters first


@dataclass
class _HostWriter:
    """What the writer remembers about one host between ticks."""

    seq: int = 0
    nccl_written: int = 0
    static_key: tuple[object, ...] = ()
    cntn: dict[tuple[str, int, int, int], int] = field(default_factory=dict)  # (dev, port, lqpn, created) -> cntn
    procs: dict[int, str] = field(default_factory=dict)  # pid -> job, of the proc/ entries written
    next_cntn: int = _FIRST_CNTN
    lock: threading.Lock = field(default_factory=threading.Lock)
    recycle: bool = True
    plans: dict[str, _Plan] = field(default_factory=dict)  # snapshot name -> what it holds (ours, in snapshots/)
    spares: deque[tuple[Path, _Plan]] = field(default_factory=deque)  # retired snapshots, oldest first


_writers: dict[Path, _HostWriter] = {}
_writer_of: dict[tuple[str, str], _HostWriter] = {}  # (root as given, host) -> its directory's writer
_writers_lock = threading.Lock()


def host_view_dir(root: Path, host: str) -> Path:
    """The directory holding one host's view (what ``flowtracer sim`` reports per host)."""
    return Path(root) / host


def ipv4_mapped_gid(ip: str) -> str:
    """The RoCE v2 GID of an IPv4 address as sysfs prints it: ``0000:...:ffff:0a00:0001``."""
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def _link_local_gid(ip: str) -> str:
    # A stable, MAC-like fe80:: GID (index 0/1 on a real port); only its presence matters here.
    _a, b, c, d = (int(x) for x in ip.split("."))
    return f"fe80:0000:0000:0000:0200:00ff:fe{b:02x}:{c:02x}{d:02x}"


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def _write_static(hostdir: Path, state: HostState, mtus: dict[tuple[str, int], int]) -> None:
    """GID tables (index 0/1: link-local v1/v2, 2/3: IPv4-mapped v1/v2, as mlx5 fills them) and MTUs."""
    tmp = Path(tempfile.mkdtemp(prefix=".static-", dir=hostdir))
    for nic in state.nics:
        pdir = tmp / nic.rdma_device / str(nic.port)
        for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
            (pdir / sub).mkdir(parents=True, exist_ok=True)
        entries = [(_link_local_gid(nic.ip), "IB/RoCE v1"), (_link_local_gid(nic.ip), "RoCE v2"),
                   (ipv4_mapped_gid(nic.ip), "IB/RoCE v1"), (ipv4_mapped_gid(nic.ip), "RoCE v2")]
        for i, (gid, gtype) in enumerate(entries):
            _write(pdir / "gids" / str(i), gid + "\n")
            _write(pdir / "gid_attrs" / "types" / str(i), gtype + "\n")
            _write(pdir / "gid_attrs" / "ndevs" / str(i), nic.netdev + "\n")
        (pdir / "hw_counters").mkdir()
        for cname in _HW_COUNTERS:
            _write(pdir / "hw_counters" / cname, "0\n")
        _write(pdir / "hw_counters" / "lifespan", "10\n")
        ndir = tmp / "net" / nic.netdev
        ndir.mkdir(parents=True, exist_ok=True)
        _write(ndir / "mtu", f"{_NETDEV_MTU.get(mtus.get((nic.rdma_device, nic.port), 4096), 9000)}\n")
    _write(tmp / "lldpctl.json", _lldpctl_json(state))
    final = hostdir / "static"
    old = None
    if final.exists():
        old = hostdir / f".static-old-{os.getpid()}-{threading.get_ident()}"
        os.rename(final, old)
    os.rename(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _lldpctl_json(state: HostState) -> str:
    """``lldpctl -f json`` (lldpd 1.0 json_writer: one interface is an object, several a list of objects)."""
    ifaces = []
    for nic in state.nics:
        switch, _, port = nic.switch_port.partition(":")
        if switch:
            ifaces.append({nic.netdev: {"via": "LLDP", "chassis": {switch: {"capability": {"type": "Router",
                                                                                            "enabled": True}}},
                                        "port": {"id": {"type": "ifname", "value": port}, "descr": port}}})
    return json.dumps({"lldp": {"interface": ifaces[0] if len(ifaces) == 1 else ifaces}}, indent=2) + "\n"


def proc_cgroup(job: str) -> str:
    """``/proc/<pid>/cgroup`` of a process of ``job`` on a cgroup v2 host: under Slurm's cgroup/v2 plugin
    (https://slurm.schedmd.com/cgroup_v2.html) for a job, a login session for a process outside any job ("")."""
    if not job:
        return "0::/user.slice/user-1000.slice/session-1.scope\n"
    return f"0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0\n"


def _write_procs(hostdir: Path, w: _HostWriter, qps: list[QpState]) -> None:
    """``proc/<pid>/cgroup`` for the pids new in ``qps``; the entries of pids without QPs any more go (their
    process ended, as far as an agent can tell)."""
    live = {q.pid: q.job for q in qps if q.pid > 0}
    proc = hostdir / "proc"
    for pid, job in live.items():
        if w.procs.get(pid) != job:
            d = proc / str(pid)
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".cgroup-{os.getpid()}"
            _write(tmp, proc_cgroup(job))
            os.replace(tmp, d / "cgroup")  # a reader sees the whole line or no file
            w.procs[pid] = job
    for pid in [p for p in w.procs if p not in live]:
        shutil.rmtree(proc / str(pid), ignore_errors=True)
        del w.procs[pid]


def _qp_json(ifindex: dict[str, int], qps: list[QpState]) -> str:
    rows = []
    for q in qps:
        rows.append({"ifindex": ifindex.get(q.rdma_device, 0), "ifname": q.rdma_device, "port": q.port,
                     "lqpn": q.lqpn, "rqpn": q.rqpn, "type": q.qp_type, "state": q.state,
                     "rq-psn": q.rq_psn & 0xFFFFFF, "sq-psn": q.sq_psn & 0xFFFFFF, "path-mig-state": "MIGRATED",
                     "pdn": 3, "pid": q.pid, "comm": q.comm})
    return json.dumps(rows, separators=(",", ":")) + "\n"


def _stat_json(w: _HostWriter, ifindex: dict[str, int], qps: list[QpState]) -> str:
    rows = []
    live = set()
    for q in qps:
        key = (q.rdma_device, q.port, q.lqpn, q.created_ns)
        live.add(key)
        cntn = w.cntn.get(key)
        if cntn is None:
            cntn = w.cntn[key] = w.next_cntn
            w.next_cntn += 1
        row: dict[str, object] = {"ifindex": ifindex.get(q.rdma_device, 0), "ifname": q.rdma_device,
                                  "port": q.port, "cntn": cntn, "qp-type": q.qp_type, "pid": q.pid, "comm": q.comm}
        for name in _QP_HW_COUNTERS:
            row[name] = 0
        row["rdma_tx_bytes"], row["rdma_tx_packets"] = q.tx_bytes, q.tx_packets
        row["rdma_rx_bytes"], row["rdma_rx_packets"] = q.rx_bytes, q.rx_packets
        row["lqpn"] = [q.lqpn]
        rows.append(row)
    for key in [k for k in w.cntn if k not in live]:
        del w.cntn[key]  # destroyed QPs release their counters
    return json.dumps(rows, separators=(",", ":")) + "\n"


def write_host_view(state: HostState, root: Path, *, qp_counters: bool | None = None, recycle: bool = True,
                    spares_ahead: bool = False) -> None:
    """Write one snapshot of ``state`` under ``root/<state.name>/`` and make it ``current``.

    Call at the end of each engine tick. ``qp_counters`` (default: env
    ``FLOWTRACER_SIM_QP_COUNTERS``, else on) writes ``rdma statistic qp`` with one counter per QP.
    Writes nothing while the host is not ``reporting`` (its agent stopped): ``current`` stays on the last
    snapshot, and the next one written after that holds everything since (cumulative counters, the missed NCCL lines).
    ``recycle`` (default): a snapshot pruned from ``snapshots/`` is kept aside and later rewritten in place as a new
    one (same files, same bytes as one built afresh: tests/sim/hosts checks); False builds every snapshot afresh.
    ``spares_ahead`` (with ``recycle``, on a host's first write: the runner's, before the engine's first tick): also
    build ``KEEP + SPARES + 1`` spare copies of this snapshot now, so the ticks that follow rewrite from the first one
    on instead of building their first ``KEEP + SPARES`` snapshots afresh (~5x the cost: at 256 hosts on a loaded
    machine the views then lagged the engine by several seconds for the first 20-25 s).
    """
    if not state.reporting:
        return
    if qp_counters is None:
        qp_counters = os.environ.get("FLOWTRACER_SIM_QP_COUNTERS", "1") not in ("0", "false", "no")
    hostdir = host_view_dir(root, state.name)
    with _writers_lock:
        w = _writer_of.get((str(root), state.name))
        if w is None:  # one writer per directory, however it is named
            w = _writers.setdefault(hostdir.resolve() if hostdir.exists() else hostdir.absolute(), _HostWriter())
            _writer_of[(str(root), state.name)] = w
    with w.lock:
        w.recycle = recycle
        _write_snapshot(state, hostdir, w, qp_counters, spares_ahead)


@dataclass
class _Plan:
    """One snapshot as data: directories, regular files (bytes) and symlinks (target), by path relative to the
    snapshot directory. ``layout`` is everything but the files' contents: two snapshots with the same layout differ
    only in what their files hold, so one can be turned into the other by rewriting files."""

    dirs: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)

    @property
    def layout(self) -> tuple[object, ...]:
        return tuple(self.dirs), tuple(self.files), tuple(self.links.items())


def _plan_snapshot(state_name: str, ts: int, nics: list[NicInfo], qps: list[QpState],
                   ports: dict[tuple[str, int], tuple[int, int, int, int]],
                   congestion: dict[tuple[str, int], dict[str, int] | None], w: _HostWriter,
                   qp_counters: bool) -> _Plan:
    """The files of one snapshot (the one rule for what a snapshot holds)."""
    plan = _Plan()
    ifindex: dict[str, int] = {}
    for n in nics:
        ifindex.setdefault(n.rdma_device, len(ifindex))
    plan.files["view.json"] = (json.dumps({"host": state_name, "timestamp_ns": ts}) + "\n").encode()
    plan.dirs.append("rdma")
    plan.files["rdma/resource_show_qp.json"] = _qp_json(ifindex, qps).encode()
    if qp_counters:
        plan.files["rdma/statistic_qp_show.json"] = _stat_json(w, ifindex, qps).encode()
    for n in nics:
        pdir = f"sys/class/infiniband/{n.rdma_device}/ports/{n.port}"
        for d in ("sys", "sys/class", "sys/class/infiniband", f"sys/class/infiniband/{n.rdma_device}",
                  f"sys/class/infiniband/{n.rdma_device}/ports", pdir, f"{pdir}/counters"):
            if d not in plan.dirs:
                plan.dirs.append(d)
        tx_b, rx_b, tx_p, rx_p = ports.get((n.rdma_device, n.port), (0, 0, 0, 0))
        # Only the counters that move; the error counters (all 0 here) live in the static tree.
        for cname, value in (("port_xmit_data", tx_b // 4), ("port_rcv_data", rx_b // 4),
                             ("port_xmit_packets", tx_p), ("port_rcv_packets", rx_p),
                             ("unicast_xmit_packets", tx_p), ("unicast_rcv_packets", rx_p)):
            plan.files[f"{pdir}/counters/{cname}"] = f"{value}\n".encode()
        cong = congestion.get((n.rdma_device, n.port))
        for sub in ("gids", "gid_attrs") if cong is not None else ("gids", "gid_attrs", "hw_counters"):
            plan.links[f"{pdir}/{sub}"] = f"{_up(pdir)}static/{n.rdma_device}/{n.port}/{sub}"
        if cong is not None:
            # The congestion model's NIC counters: hw_counters as mlx5 shows them, PFC as ``ethtool -S`` prints them.
            plan.dirs.append(f"{pdir}/hw_counters")
            for cname in _HW_COUNTERS:
                plan.files[f"{pdir}/hw_counters/{cname}"] = f"{cong.get(cname, 0)}\n".encode()
            plan.files[f"{pdir}/hw_counters/lifespan"] = b"10\n"
            if "ethtool" not in plan.dirs:
                plan.dirs.append("ethtool")
            plan.files[f"ethtool/{n.netdev}"] = ("NIC statistics:\n" + "".join(
                f"     {k}: {v}\n" for k, v in cong.items() if k not in _HW_COUNTERS)).encode()
    if "sys/class" not in plan.dirs:
        plan.dirs += [d for d in ("sys", "sys/class") if d not in plan.dirs]
    plan.links["sys/class/net"] = f"{_up('sys/class')}static/net"
    return plan


def _up(rel_dir: str) -> str:
    """From ``snapshots/<name>/<rel_dir>`` up to the host directory (symlinks into ``static/`` are relative)."""
    return "../" * (rel_dir.count("/") + 3)


def _build_fresh(plan: _Plan, tmp: Path) -> None:
    """Materialise ``plan`` in the empty directory ``tmp``."""
    for d in plan.dirs:
        os.mkdir(tmp / d)
    for rel, data in plan.files.items():
        with open(tmp / rel, "wb") as f:
            f.write(data)
    for rel, target in plan.links.items():
        os.symlink(target, tmp / rel)
    os.chmod(tmp, 0o755)


def _rewrite(plan: _Plan, old: _Plan, spare: Path) -> None:
    """Turn ``spare``, a retired snapshot holding ``old`` (same layout), into ``plan``: only files whose bytes differ
    are written, in place (no new inode, no directory or symlink made: those are what cost on a journaling file
    system). Safe for readers: the directory left ``snapshots/`` ``SPARES`` writes ago."""
    for rel, data in plan.files.items():
        before = old.files[rel]
        if data == before:
            continue
        fd = os.open(f"{spare}/{rel}", os.O_WRONLY)
        try:
            os.pwrite(fd, data, 0)
            if len(data) < len(before):
                os.ftruncate(fd, len(data))
        finally:
            os.close(fd)


def _write_snapshot(state: HostState, hostdir: Path, w: _HostWriter, qp_counters: bool, spares_ahead: bool) -> None:
    with state.lock:  # copy what is needed, write outside the engine's lock
        ts = state.timestamp_ns
        nics = list(state.nics)
        qps = [q for _, q in sorted(state.qps.items())]
        qps = [copy.copy(q) for q in qps]
        ports = {k: (p.tx_bytes, p.rx_bytes, p.tx_packets, p.rx_packets) for k, p in sorted(state.ports.items())}
        congestion = {k: p.congestion for k, p in state.ports.items()}  # replaced per tick, never mutated
        # ``nccl_written`` counts lines since the start; the state holds those after ``nccl_log_dropped``.
        new_lines = state.nccl_log[max(0, w.nccl_written - state.nccl_log_dropped):]
        w.nccl_written = state.nccl_log_dropped + len(state.nccl_log)
    snaps_dir = hostdir / "snapshots"
    if not w.plans:  # first snapshot of this writer: leftovers of an earlier run are not reusable
        shutil.rmtree(hostdir / ".spare", ignore_errors=True)
    snaps_dir.mkdir(parents=True, exist_ok=True)

    mtus: dict[tuple[str, int], int] = {}
    for q in qps:
        k = (q.rdma_device, q.port)
        mtus[k] = max(mtus.get(k, 0), q.mtu)
    static_key = tuple((n.rdma_device, n.port, n.netdev, n.ip, mtus.get((n.rdma_device, n.port), 4096))
                       for n in nics)
    if static_key != w.static_key or not (hostdir / "static").is_dir():
        _write_static(hostdir, state, mtus)
        w.static_key = static_key

    _write_procs(hostdir, w, qps)  # before the snapshot that lists the pids
    w.seq += 1
    name = f"{ts:020d}-{w.seq:09d}"
    plan = _plan_snapshot(state.name, ts, nics, qps, ports, congestion, w, qp_counters)
    tmp = None
    if w.recycle and len(w.spares) > SPARES:
        spare, old = w.spares.popleft()
        try:
            if old.layout != plan.layout:
                raise FileNotFoundError  # another shape: build afresh
            _rewrite(plan, old, spare)
            tmp = spare
        except OSError:  # or removed by someone else meanwhile
            shutil.rmtree(spare, ignore_errors=True)
    if tmp is None:
        tmp = Path(tempfile.mkdtemp(prefix=".snap-", dir=snaps_dir))
        _build_fresh(plan, tmp)
    if new_lines:  # before ``current`` moves: a reader that sees this tick's snapshot finds its log lines too
        with open(hostdir / "nccl.log", "a", encoding="utf-8") as f:
            f.write("".join(line if line.endswith("\n") else line + "\n" for line in new_lines))
    final = snaps_dir / name
    os.rename(tmp, final)
    w.plans[name] = plan
    if spares_ahead and w.recycle and not w.spares and len(w.plans) == 1:
        # Never listed in snapshots/, so no reader can hold them: usable from the next write on.
        (hostdir / ".spare").mkdir(exist_ok=True)
        for _ in range(KEEP + SPARES + 1):
            spare = Path(tempfile.mkdtemp(prefix=".ahead-", dir=hostdir / ".spare"))
            _build_fresh(plan, spare)
            w.spares.append((spare, plan))
    link_tmp = hostdir / f".current-{os.getpid()}-{threading.get_ident()}"
    if link_tmp.is_symlink():
        link_tmp.unlink()
    os.symlink(os.path.join("snapshots", name), link_tmp)
    os.replace(link_tmp, hostdir / "current")  # atomic: readers see the old or the new snapshot

    snaps = sorted(p for p in os.listdir(snaps_dir) if not p.startswith("."))
    for old_name in snaps[:-KEEP]:
        old_plan = w.plans.pop(old_name, None)
        if old_plan is None or not w.recycle:  # not ours (an earlier run's), or recycling off
            shutil.rmtree(snaps_dir / old_name, ignore_errors=True)
            continue
        # Retired, not deleted: rewriting its files later is far cheaper than building a new tree and removing
        # this one (rmdir and file creation are the slow calls). It leaves snapshots/ now, so a reader that
        # lists again no longer finds it; it is reused only after SPARES more writes.
        (hostdir / ".spare").mkdir(exist_ok=True)
        spare = hostdir / ".spare" / old_name
        os.rename(snaps_dir / old_name, spare)
        w.spares.append((spare, old_plan))
