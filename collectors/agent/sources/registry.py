"""Flow sources: where an agent's samples come from. One Protocol, one registry.

Lifecycle (the agent calls, in this order): construct with the ``AgentConfig`` (raises
``SourceUnavailable`` when the host cannot be read at all, ``ConfigError`` for bad settings);
then per window ``wait_until(boundary_ns, stop)`` and ``sample(boundary_ns)``; ``close()`` at the
end. ``now_ns()`` is the source's clock: wall clock on a real host, engine time for the simulator
(so windows line up with the simulated switches even when the simulation runs faster than real
time). Every source reads through the same parsers (``rdma_json``, ``sysfs``, ``nccl_log``).

Why one module over 400 lines: the protocol, the registry and the sources registered in it are read together (a new
source is written against the two sources here); the sim source's readiness rules are most of the length.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Protocol, runtime_checkable

from flowtracer.collectors.agent.config import AgentConfig, ConfigError
from flowtracer.collectors.agent.host_window import HostSample
from flowtracer.collectors.agent.sources.ethtool_stats import parse_ethtool_stats, pfc_stats, read_ethtool_stats
from flowtracer.collectors.agent.sources.guard import PartGuard
from flowtracer.collectors.agent.sources.log_tail import GlobTail, LogChunk, LogTail
from flowtracer.collectors.agent.sources.proc_jobs import ProcJobs
from flowtracer.collectors.agent.sources.rdma_json import Parsed, parse_res_qp, parse_stat_qp
from flowtracer.collectors.agent.sources.rdma_tool import RdmaToolError, RdmaUnavailable, run_rdma
from flowtracer.collectors.agent.sources.sysfs import SysfsView, read_sysfs

log = logging.getLogger(__name__)


_salvage_logged: set[str] = set()  # sources already warned about: the rest is counted, not logged each window


def log_salvage(parsed: Parsed, what: str) -> Parsed:
    """``parsed``, with a warning (once per source) when its document was not valid JSON (entries salvaged, lost
    ones counted as malformed: flowtracer_agent_malformed_records_total)."""
    if parsed.salvaged and what not in _salvage_logged:
        _salvage_logged.add(what)
        log.warning("%s: output is not valid JSON (iproute2 before 6.8 with -dd prints such); salvaged %d complete "
                    "entries, %d lost (counted as malformed)", what, parsed.salvaged, parsed.malformed)
    return parsed


class SourceUnavailable(RuntimeError):
    """The source cannot read this host at all (no rdma tool, no RDMA devices, no sim views)."""


class FlowSource(Protocol):
    """What the agent needs from a source of host samples."""

    def hosts(self) -> list[str]:
        """Host names this source reads (one on a real host; every simulated host for ``sim``)."""
        ...

    def now_ns(self) -> int:
        """The source's clock, ns since the Unix epoch."""
        ...

    def wait_until(self, t_ns: int, stop: threading.Event) -> bool:
        """Block until ``now_ns() >= t_ns``; False when ``stop`` was set first."""
        ...

    def sample(self, at_ns: int) -> list[HostSample]:
        """Read every host as of ``at_ns`` (or as close after it as the source can)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class PerHostSource(Protocol):
    """A source of many hosts that can tell when each host's data for a boundary exists (``sim``), so the agent
    reads each host as soon as it can instead of waiting for the slowest one."""

    def poll(self, at_ns: int, pending: Collection[str]) -> tuple[list[str], list[str]]:
        """Of ``pending`` hosts: (those whose data as of ``at_ns`` exists now, those not to wait for)."""
        ...

    def sample_hosts(self, at_ns: int, hosts: Iterable[str]) -> list[HostSample]:
        """``sample`` of these hosts only."""
        ...


SOURCES: dict[str, Callable[[AgentConfig], FlowSource]] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make a source available as ``--source NAME``."""

    def deco(cls: type) -> type:
        SOURCES[name] = cls
        return cls

    return deco


def create_source(cfg: AgentConfig) -> FlowSource:
    try:
        factory = SOURCES[cfg.source]
    except KeyError:
        raise ConfigError(f"source: {cfg.source!r} is not one of: {', '.join(sorted(SOURCES))}") from None
    return factory(cfg)


class _GidClock:
    """Says when GID tables are due for a re-read (they are large in sysfs and rarely change)."""

    def __init__(self, every_ns: int) -> None:
        self.every_ns, self._next = every_ns, 0

    def due(self, now_ns: int) -> bool:
        if now_ns >= self._next:
            self._next = now_ns + self.every_ns
            return True
        return False


@register("linux")
class LinuxSource:
    """This host: ``rdma -j resource show qp``, ``rdma -j statistic qp show``, sysfs, optional NCCL log."""

    def __init__(self, cfg: AgentConfig) -> None:
        self.cfg = cfg
        self.host = cfg.host
        self._timeout = cfg.rdma_timeout.total_seconds()
        self._stat_ok = cfg.qp_counters and not cfg.sysfs_only
        self._stat_retry_ns = 0
        self._gids = _GidClock(round(cfg.gid_refresh.total_seconds() * 1e9))
        # What the logs hold at start is history (log_tail.py): a restarted agent resumes at their ends.
        self._nccl = GlobTail(cfg.nccl_log, catch_up=True) if cfg.nccl_log else None
        self.guard = PartGuard(f"agent {self.host}")
        self._netdevs: dict[tuple[str, int], str] = {}  # (device, port) -> netdev, from the last GID read
        self._jobs = ProcJobs(cfg.proc_root)
        probe = read_sysfs(cfg.sysfs_root, gids=False)
        if not probe.root_exists or not probe.ports:
            raise SourceUnavailable(
                f"no RDMA devices: {cfg.sysfs_root} {'has no ports' if probe.root_exists else 'does not exist'} "
                f"(is an RDMA driver such as mlx5_ib loaded?)")
        if not cfg.sysfs_only:
            try:
                run_rdma(cfg.rdma_command, ["resource", "show", "qp"], self._timeout)
            except RdmaUnavailable as e:
                raise SourceUnavailable(str(e)) from None
            except RdmaToolError as e:
                log.warning("rdma probe failed (will retry every window): %s", e)

    def hosts(self) -> list[str]:
        return [self.host]

    def now_ns(self) -> int:
        return time.time_ns()

    def wait_until(self, t_ns: int, stop: threading.Event) -> bool:
        while (left := t_ns - time.time_ns()) > 0:
            if stop.wait(left / 1e9):
                return False
        return not stop.is_set()

    def _rdma(self, *args: str) -> bytes | None:
        try:
            return run_rdma(self.cfg.rdma_command, args, self._timeout)
        except RdmaToolError as e:
            log.warning("%s", e)
            return None

    def sample(self, at_ns: int) -> list[HostSample]:
        """This host as of now. Every part is read through ``self.guard``: a part whose read raises
        is missing for this window (counted). The QP view and sysfs are what a window is made of:
        without either the host has no window (its next one spans the gap); per-QP counters, the
        port counters before the QP snapshot and the NCCL log lines are dropped and the rest goes on."""
        g, root = self.guard, self.cfg.sysfs_root
        malformed = 0
        qps = counters = None
        # Port counters just before and just after the QP snapshot bracket it (PSN error bounds).
        before = None if self.cfg.sysfs_only else g.read("sysfs", lambda: read_sysfs(root, gids=False), None)
        if not self.cfg.sysfs_only:
            parsed = g.read("rdma_qp", lambda: self._qps(), None)
            if parsed is None:
                return []  # no QP view this window: skip it rather than lose every QP's baseline
            qps, malformed = parsed.records, parsed.malformed
            if self._stat_ok or at_ns >= self._stat_retry_ns > 0:
                p = g.read("rdma_stat", lambda: self._counters(at_ns), None)
                if p is not None:
                    counters, malformed = p.records, malformed + p.malformed
        gids = self._gids.due(at_ns)
        sysfs = g.read("sysfs", lambda: read_sysfs(root, gids=gids), None)
        if sysfs is None:
            return []  # no port view this window (ports, addresses, MTU): skip it like a missing QP view
        chunks: list[LogChunk] = []
        if self._nccl is not None:
            chunks = g.read("nccl_log", self._nccl.read_chunks, [])
            malformed += self._nccl.take_dropped()  # over-long log lines
        pfc: dict[tuple[str, int], dict[int, dict[int, int]]] = {}
        if self.cfg.ethtool_pfc:
            for key, nd in self._port_netdevs(sysfs).items():
                text = g.read("ethtool", lambda nd=nd: read_ethtool_stats(nd, self.cfg.ethtool_command), None)
                if text is not None:
                    stats, bad = parse_ethtool_stats(text)
                    malformed += bad
                    pfc[key] = pfc_stats(stats)
        jobs = g.read("proc", lambda: self._jobs.jobs(q.pid for q in qps), {}) if qps else {}
        return [HostSample(self.host, time.time_ns(), qps, counters, sysfs, [], malformed + sysfs.malformed,
                           sysfs_before=before, pfc=pfc, jobs=jobs, nccl_chunks=chunks)]

    def _port_netdevs(self, sysfs: SysfsView) -> dict[tuple[str, int], str]:
        """Each port's netdev, from this read's GID tables or the last that had them (GIDs are re-read rarely)."""
        for key, pv in sysfs.ports.items():
            if pv.netdev:
                self._netdevs[key] = pv.netdev
        return {k: self._netdevs[k] for k in sysfs.ports if k in self._netdevs}

    def _qps(self) -> Parsed | None:
        """``rdma resource show qp``, parsed; None when the tool failed (logged)."""
        text = self._rdma("resource", "show", "qp")
        return None if text is None else log_salvage(parse_res_qp(text), "rdma resource show qp")

    def _counters(self, at_ns: int) -> Parsed | None:
        """``rdma statistic qp show``, parsed; None (and a retry in a minute) when the tool failed."""
        stat = self._rdma("statistic", "qp", "show")
        if stat is None:
            # Old kernel or iproute2: no per-QP counters. Look again in a minute.
            self._stat_ok, self._stat_retry_ns = False, at_ns + 60_000_000_000
            return None
        self._stat_ok = True
        return log_salvage(parse_stat_qp(stat), "rdma statistic qp show")

    def close(self) -> None:
        pass


@register("nccl-log")
class NcclLogSource(LinuxSource):
    """The linux source with NCCL log tagging required (``nccl_log`` must be set)."""

    def __init__(self, cfg: AgentConfig) -> None:
        if not cfg.nccl_log:
            raise ConfigError("source nccl-log needs nccl_log (--nccl-log FILE-or-GLOB)")
        super().__init__(cfg)


def read_ready_json(path: Path) -> dict:
    """The ready JSON ``flowtracer sim`` printed (the last line of the file that is a JSON object)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the sim endpoints: {e.strerror or e}") from None
    doc = None
    for line in reversed([*text.splitlines(), text]):
        try:
            cand = json.loads(line)
        except ValueError:
            continue
        if isinstance(cand, dict):
            doc = cand
            break
    if doc is None:
        raise ConfigError(f"{path}: no JSON object found (expected the ready JSON of `flowtracer sim`)")
    return doc


def load_sim_endpoints(path: Path) -> dict[str, Path]:
    """Host name -> host view directory, from the ready JSON ``flowtracer sim`` printed.

    Accepted shapes (the last line of the file that is a JSON object is used): a mapping under
    ``host_view_dirs`` (what ``flowtracer sim`` prints) / ``host_views`` / ``hosts`` of host ->
    directory (or -> {"view_dir": directory}), or ``host_views`` / ``host_view_root`` naming the
    directory whose subdirectories are the hosts. Relative paths are relative to the file.
    """
    doc = read_ready_json(path)
    base = Path(path).parent
    for key in ("host_view_dirs", "host_views", "hosts"):
        hv = doc.get(key)
        if isinstance(hv, dict):
            out: dict[str, Path] = {}
            for host, v in hv.items():
                d = v if isinstance(v, str) else (v.get("view_dir") or v.get("dir")) if isinstance(v, dict) else None
                if isinstance(d, str):
                    out[str(host)] = base / d
            if out:
                return out
    for key in ("host_views", "host_view_root"):
        root = doc.get(key)
        if isinstance(root, str) and (base / root).is_dir():
            return {p.name: p for p in sorted((base / root).iterdir()) if p.is_dir()}
    raise ConfigError(f"{path}: no host views in it (expected 'host_view_dirs': {{host: dir}} or 'host_views': dir)")


def _snapshot_ts(name: str) -> int | None:
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else None


@register("sim")
class SimSource:
    """Every simulated host, read from its view directory through the real parsers.

    The snapshot read for a window boundary is the newest one taken at or before it, so the
    deltas are the host's state at the boundary even when this process lags behind the engine.

    This process acts as every host's agent, so one host's agent stopping (the simulator's ``agent_stop``: that
    host's view is no longer written) must not stop the others: a host whose newest snapshot is more than one
    interval behind the newest host's is not waited for, and a host with no snapshot since a boundary, or none
    within an interval before it, has no sample for it (its agent would have read nothing). When its view moves
    again, its next window starts where its last one ended, as for any host that missed windows.

    A host's data for a boundary exists once its ``current`` names a snapshot at or after it (the view writer moves
    ``current`` last, sim/hosts/views.py): ``poll`` says which hosts are there, so the agent reads each host as its
    view lands rather than all of them after the last one (the writer takes a while for hundreds of hosts).
    """

    #: Every this many ``poll`` calls, every host's ``current`` is read (keeps "newest" fresh for the stopped-host
    #: rule); the others read the pending hosts only up to the first one still to wait for.
    FULL_SCAN_EVERY = 25

    def __init__(self, cfg: AgentConfig) -> None:
        if cfg.sim_endpoints is None:
            raise ConfigError("source sim needs sim_endpoints (--sim-endpoints FILE)")
        self.cfg = cfg
        self.dirs = load_sim_endpoints(cfg.sim_endpoints)
        if not self.dirs:
            raise SourceUnavailable(f"{cfg.sim_endpoints}: lists no simulated hosts")
        self._tails = {h: LogTail(d / "nccl.log") for h, d in self.dirs.items()}
        self._jobs = {h: ProcJobs(d / "proc") for h, d in self.dirs.items()}  # the host's processes (views.py)
        self._gids = _GidClock(round(cfg.gid_refresh.total_seconds() * 1e9))
        self._gids_at: tuple[int, bool] = (-1, False)  # (boundary, whether GIDs are read for it)
        self.guard = PartGuard("sim source")
        # Polled many times a second for hundreds of hosts: plain strings, not Path objects.
        self._links = {h: os.path.join(d, "current") for h, d in self.dirs.items()}
        self._newest = 0  # the newest snapshot time seen on any host (ns)
        self._polls = 0
        # The order hosts became ready for the last boundary polled (the writer's order), and for this one.
        self._order = sorted(self.dirs)
        self._order_at = -1
        self._became_ready: list[str] = []

    def hosts(self) -> list[str]:
        return sorted(self.dirs)

    def _current_ts(self, host: str) -> int | None:
        try:
            t = _snapshot_ts(os.path.basename(os.readlink(self._links[host])))
        except OSError:
            return None
        if t is not None and t > self._newest:
            self._newest = t
        return t

    def now_ns(self) -> int:
        """Engine time every reporting host has reached (the oldest of the hosts' newest snapshots, leaving out
        those more than one interval behind the newest: stopped); 0 before any."""
        ts = [t for h in self.dirs if (t := self._current_ts(h)) is not None]
        if not ts:
            return 0
        newest = max(ts)
        return min(t for t in ts if t >= newest - self.cfg.interval_ns)

    def wait_until(self, t_ns: int, stop: threading.Event) -> bool:
        pending: set[str] = set(self.dirs)
        while pending:
            ready, gone = self.poll(t_ns, pending)
            pending.difference_update(ready, gone)
            if pending and stop.wait(0.01):
                return False
        return not stop.is_set()

    def poll(self, at_ns: int, pending: Collection[str]) -> tuple[list[str], list[str]]:
        """Of ``pending``: (hosts whose view has a snapshot at or after ``at_ns``, hosts not to wait for: no view,
        or more than one interval behind the newest). The hosts are read in the order they became ready for the
        last boundary (the writer's order, so the ready ones come first), up to the first one still to wait for;
        every ``FULL_SCAN_EVERY`` calls every host is read."""
        self._polls += 1
        full = self._polls % self.FULL_SCAN_EVERY == 0
        if at_ns != self._order_at:
            seen = set(self._became_ready)
            self._order = self._became_ready + [h for h in self._order if h not in seen]
            self._order_at, self._became_ready = at_ns, []
        if full:
            for h in self.dirs:
                self._current_ts(h)
        ready: list[str] = []
        gone: list[str] = []
        for h in self._order:
            if h not in pending:
                continue
            t = self._current_ts(h)
            if t is not None and t >= at_ns:
                ready.append(h)
            elif t is None or t < self._newest - self.cfg.interval_ns:
                gone.append(h)
            elif not full:
                break  # the writer has not reached this host yet: nor the ones after it
        self._became_ready += ready
        return ready, gone

    def sample(self, at_ns: int) -> list[HostSample]:
        return self.sample_hosts(at_ns, self.hosts())

    def sample_hosts(self, at_ns: int, hosts: Iterable[str]) -> list[HostSample]:
        if self._gids_at[0] != at_ns:  # one decision per boundary, however many calls read its hosts
            self._gids_at = (at_ns, self._gids.due(at_ns))
        gids = self._gids_at[1]
        out = []
        for host in hosts:
            # one host's snapshot that fails to read costs that host's window, not the others'
            s = self.guard.read("snapshot", lambda h=host: self._read_host(h, at_ns, gids), None)
            if s is not None:
                out.append(s)
        return out

    def _read_host(self, host: str, at_ns: int, gids: bool) -> HostSample | None:
        snaps_dir = self.dirs[host] / "snapshots"
        for _ in range(3):  # a snapshot can be pruned between listing and reading: list again
            try:
                names = sorted(n for n in os.listdir(snaps_dir) if not n.startswith("."))
            except OSError:
                return None
            timed = [(t, n) for n in names if (t := _snapshot_ts(n)) is not None]
            if not timed or timed[-1][0] < at_ns:  # none yet, or none since the boundary: its agent is stopped
                return None
            before = [x for x in timed if x[0] <= at_ns]
            ts, name = before[-1] if before else timed[0]
            if ts < at_ns - self.cfg.interval_ns:  # none written around the boundary: its agent was stopped then
                return None
            snap = snaps_dir / name
            try:
                qp_text = (snap / "rdma" / "resource_show_qp.json").read_bytes()
            except FileNotFoundError:
                continue
            stat_path = snap / "rdma" / "statistic_qp_show.json"
            stat_text = stat_path.read_bytes() if stat_path.exists() else None
            sysfs = read_sysfs(snap / "sys" / "class" / "infiniband", gids=gids)
            if not sysfs.root_exists:
                continue
            parsed = log_salvage(parse_res_qp(qp_text), f"{host}: resource_show_qp.json")
            malformed = parsed.malformed + sysfs.malformed
            counters = None
            if stat_text is not None and self.cfg.qp_counters:
                p = parse_stat_qp(stat_text)
                counters, malformed = p.records, malformed + p.malformed
            chunks = self._tails[host].read_chunks()
            malformed += self._tails[host].take_dropped()  # over-long log lines
            jobs = self._jobs[host].jobs(q.pid for q in parsed.records)
            return HostSample(host, ts, parsed.records, counters, sysfs, [], malformed, jobs=jobs, nccl_chunks=chunks)
        return None

    def close(self) -> None:
        pass
