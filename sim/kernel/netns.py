"""Build and remove a kernel fabric: namespaces, veths, sysctls, addresses, multipath routes.

``KernelFabric(topology).build()`` lays the fabric out (``plan.make_plan``), writes the run record
(``records``) before creating anything, then creates everything with a handful of ``ip -batch``
calls: one for all namespaces, one for all veths, one per namespace for its addresses, neighbors
and routes (run in parallel). Sysctls are written from one thread that enters each namespace with
``setns``. ``close()`` removes exactly what the record names; it runs at most once, also from
``atexit``.

Per-switch multipath hash seeds are drawn from ``secrets`` and kept here: ground truth may record
them, the pipeline is never told.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from flowtracer.fabric.topology import Topology
from flowtracer.sim.kernel import records
from flowtracer.sim.kernel.plan import (
    Plan,
    PlanError,
    make_plan,
    netns_add_lines,
    node_lines,
    route_lines,
    sysctls,
    veth_lines,
)

log = logging.getLogger(__name__)

CLONE_NEWNET = 0x40000000
T = TypeVar("T")

#: ICMP rate limiting on the switches. ``icmp_ratelimit`` 0 ms turns the per-destination token bucket off
#: and the global bucket allows 100,000 ICMP errors/s (burst 10,000): a host agent tracing every flow hop
#: by hop each second is never limited. ``LINUX_DEFAULT_ICMP`` (1000 ms, 1000/s, burst 50) is what a
#: stock kernel does, for rate-limit tests.
GENEROUS_ICMP = {"icmp_ratelimit": 0, "icmp_msgs_per_sec": 100_000, "icmp_msgs_burst": 10_000}
LINUX_DEFAULT_ICMP = {"icmp_ratelimit": 1000, "icmp_msgs_per_sec": 1000, "icmp_msgs_burst": 50}


class KernelFabricError(RuntimeError):
    """Building or changing the kernel fabric failed; ``str()`` is one line."""


def new_prefix() -> str:
    """A run prefix: ``ft`` and 6 random hex digits."""
    return "ft" + secrets.token_hex(3)


def missing_capability() -> str | None:
    """What stops this process from building a kernel fabric, in one line, or None when nothing does.

    Checks by trying: effective root (CAP_NET_ADMIN and CAP_SYS_ADMIN for ``setns``), an ``ip`` binary
    with netns support, and that a network namespace can actually be created (``unshare`` in a thread
    that is thrown away).
    """
    if os.geteuid() != 0:
        return f"the kernel data plane needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); running as uid {os.geteuid()}"
    ip = shutil.which("ip")
    if ip is None:
        return "the kernel data plane needs the `ip` command (iproute2), not found on PATH"
    res = subprocess.run([ip, "netns", "list"], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        why = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"exit {res.returncode}"
        return f"`ip netns list` failed: {why}"
    err: list[str] = []

    def probe() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) != 0:
            err.append(os.strerror(ctypes.get_errno()))

    t = threading.Thread(target=probe, name="netns-probe")  # the thread (and its new netns) ends here
    t.start()
    t.join()
    if err:
        return f"cannot create a network namespace: {err[0]}"
    return None


def run_in_netns(paths: Iterable[Path | None], fn: Callable[[Path | None], T]) -> list[T]:
    """Call ``fn(path)`` with the calling thread inside each namespace in turn (None: the original one).

    Runs in a dedicated thread (``setns`` moves only that thread); sockets ``fn`` creates stay in the
    namespace they were created in. Returns ``fn``'s results in order; re-raises its first error.
    """
    out: list[T] = []
    errors: list[BaseException] = []

    def work() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        with open("/proc/thread-self/ns/net", "rb") as home:
            try:
                for p in paths:
                    if p is not None:
                        with open(p, "rb") as f:
                            if libc.setns(f.fileno(), CLONE_NEWNET) != 0:
                                raise OSError(ctypes.get_errno(), f"setns {p}: {os.strerror(ctypes.get_errno())}")
                    try:
                        out.append(fn(p))
                    finally:
                        if p is not None and libc.setns(home.fileno(), CLONE_NEWNET) != 0:
                            raise OSError(ctypes.get_errno(), "setns back to the original namespace failed")
            except BaseException as e:
                errors.append(e)

    t = threading.Thread(target=work, name="netns-setns")
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return out


def ip_batch(lines: list[str], netns: str | None = None, *, force: bool = False, json: bool = False,
             wait: bool = True) -> subprocess.Popen[str] | subprocess.CompletedProcess[str]:
    """Run ``ip [-n netns] [-j] -batch -`` on ``lines`` (``wait=False``: return the running Popen)."""
    cmd = ["ip"]
    if netns:
        cmd += ["-n", netns]
    if json:
        cmd.append("-j")
    if force:
        cmd.append("-force")
    cmd += ["-batch", "-"]
    text = "".join(line + "\n" for line in lines)
    if not wait:  # input from a file, so a long batch and a long answer cannot block each other
        with tempfile.TemporaryFile("w+") as f:
            f.write(text)
            f.seek(0)
            return subprocess.Popen(cmd, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, input=text, capture_output=True, text=True, check=False)


def _check(res: subprocess.CompletedProcess[str], what: str) -> None:
    if res.returncode != 0:
        msg = " ".join(res.stderr.split())[:300]
        raise KernelFabricError(f"{what}: ip failed: {msg}")


class KernelFabric:
    """A topology built as network namespaces and veths. ``build()`` then ``close()`` (also at exit)."""

    def __init__(self, topology: Topology, *, prefix: str | None = None, seeds: dict[str, int] | None = None,
                 icmp: dict[str, int] | None = None) -> None:
        self.prefix = prefix or new_prefix()
        try:
            self.plan: Plan = make_plan(topology, self.prefix)
        except ValueError as e:
            raise PlanError(str(e)) from None
        #: Per-switch fib_multipath_hash_seed (private to the data plane; ground truth may record it).
        self.seeds = dict(seeds) if seeds else {s: secrets.randbits(32) for s in self.plan.switches}
        self.icmp = {**GENEROUS_ICMP, **(icmp or {})}
        self.record: records.RunRecord | None = None
        self.build_s: float | None = None
        self.down: frozenset[str] = frozenset()
        self._closed = False
        self._lock = threading.Lock()

    # -- names ------------------------------------------------------------------------------------

    def netns_name(self, node: str) -> str:
        """Namespace of a switch or host, e.g. ``ft3a9c1e-leaf01``."""
        return self.plan.namespaces[node]

    def netns_path(self, node: str) -> Path:
        """``/run/netns/<name>``: open it and ``setns(fd, CLONE_NEWNET)`` to enter the node."""
        return records.NETNS_DIR / self.netns_name(node)

    def ifname(self, node: str, port: str) -> str:
        """Interface name of a topology port (a host's: its rdma_device) inside the node's namespace."""
        return self.plan.ifname[(node, port)]

    # -- lifecycle --------------------------------------------------------------------------------

    def build(self) -> KernelFabric:
        """Create everything; on failure remove what was created and raise KernelFabricError."""
        t0 = time.monotonic()
        plan = self.plan
        self.record = records.new_record(self.prefix, list(plan.namespaces.values()))
        atexit.register(self.close)
        try:
            _check(ip_batch(netns_add_lines(plan)), "creating namespaces")  # type: ignore[arg-type]
            nodes = list(plan.namespaces)
            settings = {n: sysctls(plan, n, self.seeds.get(n), self.icmp) for n in nodes}

            def write(path: Path | None) -> None:
                assert path is not None
                for key, value in settings[path.name[len(self.prefix) + 1:]].items():
                    with open(f"/proc/sys/{key}", "w") as f:
                        f.write(value)

            run_in_netns([self.netns_path(n) for n in nodes], write)
            _check(ip_batch(veth_lines(plan)), "creating veths")  # type: ignore[arg-type]
            procs = []
            for n in nodes:
                lines = node_lines(plan, n)
                if n in plan.fabric.switch_names:
                    lines += route_lines(plan, n)
                procs.append((n, ip_batch(lines, self.netns_name(n), wait=False)))
            for n, p in procs:
                assert isinstance(p, subprocess.Popen)
                _, err = p.communicate()
                if p.returncode != 0:
                    raise KernelFabricError(f"configuring {n}: ip failed: {' '.join(err.split())[:300]}")
        except BaseException:
            self.close()
            raise
        self.build_s = time.monotonic() - t0
        log.info("kernel fabric %s: %d namespaces, %d veth pairs built in %.2f s", self.prefix,
                 len(plan.namespaces), len(plan.cables), self.build_s)
        return self

    def close(self) -> None:
        """Remove exactly the namespaces (and processes) of this run's record. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        if self.record is not None:
            records.remove_run(self.record)

    def __enter__(self) -> KernelFabric:
        return self.build()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- link state -------------------------------------------------------------------------------

    def set_down(self, down: frozenset[str]) -> None:
        """Make the kernel match the set of directed links out of service: veth pairs of the cables
        touched go down (both ends) or up, and every switch's routes are replaced with the equal-cost
        next hops that remain (what a converged routing protocol would leave)."""
        plan = self.plan
        cables = {id(plan.cable_of[lid]): plan.cable_of[lid] for lid in down ^ self.down}
        for c in cables.values():
            # Down only when both directions are (a cable down, a switch rebooting): a next hop withdrawn in one
            # direction leaves the cable up and only that switch's routes change (route_lines).
            state = "down" if set(c.link_ids) <= down else "up"
            for end in (c.a, c.b):
                _check(ip_batch([f"link set dev {end.ifname} {state}"], self.netns_name(end.node)),  # type: ignore[arg-type]
                       f"setting {end.node}:{end.port} {state}")
        self.down = down
        procs = [(s, ip_batch(route_lines(plan, s, down, "replace"), self.netns_name(s), wait=False))
                 for s in plan.switches]
        for s, p in procs:
            assert isinstance(p, subprocess.Popen)
            _, err = p.communicate()
            if p.returncode != 0:
                raise KernelFabricError(f"replacing routes of {s}: {' '.join(err.split())[:300]}")

    # -- counters ---------------------------------------------------------------------------------

    def read_counters(self, nodes: Iterable[str] | None = None) -> dict[tuple[str, str], tuple[int, int, int, int]]:
        """``(node, port) -> (rx_bytes, tx_bytes, rx_packets, tx_packets)`` of every veth of ``nodes``
        (default: the switches), from ``ip -s -j link show`` in each namespace, read in parallel.
        Bytes are L2 frame bytes without FCS, as the veth counts them."""
        import json

        wanted = list(nodes) if nodes is not None else self.plan.switches
        procs = [(n, subprocess.Popen(["ip", "-n", self.netns_name(n), "-s", "-j", "link", "show"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) for n in wanted]
        out: dict[tuple[str, str], tuple[int, int, int, int]] = {}
        for n, p in procs:
            stdout, err = p.communicate()
            if p.returncode != 0:
                raise KernelFabricError(f"reading counters of {n}: {' '.join(err.split())[:300]}")
            for link in json.loads(stdout):
                port = self.plan.port_of.get((n, link["ifname"]))
                if port is None:
                    continue
                s = link["stats64"]
                out[(n, port)] = (s["rx"]["bytes"], s["tx"]["bytes"], s["rx"]["packets"], s["tx"]["packets"])
        return out
