"""Run a simulated fabric in real time: the engine thread, one gNMI server per switch, host views.

``SimRunner.start()`` builds the engine, binds the gNMI servers (the topology's ports, or free
loopback ports), writes the initial host views and starts the engine thread; it returns the
"ready" description ``flowtracer sim`` prints. ``stop()`` stops everything it started and closes
the ground-truth files; it is safe to call twice and is called on ``__exit__``.

Layout of ``out_dir``: ``topology.yaml`` (the topology with the gNMI endpoints actually bound, so
collectors can be pointed at it), ``hosts/<host>/`` (host views), ``ground-truth/`` (unless off).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from flowtracer.fabric.platform_profiles import DEFAULT_PLATFORM
from flowtracer.fabric.topology import Topology, validate_topology
from flowtracer.plumbing.target_security import Credentials, SecretError
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import Workload
from flowtracer.sim.hosts.state import HostState
from flowtracer.sim.hosts.trace_responder import ResponderLimits, TraceResponder
from flowtracer.sim.hosts.views import host_view_dir, write_host_view
from flowtracer.sim.switches.server import GnmiServer, TlsFiles

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerOptions:
    """How to run. ``gnmi_ports``: "topology" binds each switch's topology endpoint port on
    ``gnmi_address``, "free" binds free ports. ``shared_port``: None = one server per switch, else
    one server for all switches on this port (0 = free), the gNMI target selecting the switch."""

    tick_s: float = 1.0
    duration_s: float | None = None
    gnmi_address: str = "127.0.0.1"
    gnmi_ports: Literal["topology", "free"] = "topology"
    shared_port: int | None = None
    ground_truth: bool = True
    host_views: bool = True
    counter32: bool = False
    qpn_reuse: bool = False
    coll_log: bool = True
    cancel_on_half_close: bool = True
    #: Answer host agents' trace probes (``hosts/trace_responder.py``) on a free loopback UDP port (fluid model
    #: only: on the kernel data plane the agents probe the kernel itself);
    #: ``trace_loss`` share of answers lost, ``trace_icmp_rate`` ICMP errors/s per switch (0 = no limit)
    #: with ``trace_icmp_burst`` saved up.
    trace_responder: bool = True
    trace_loss: float = 0.0
    trace_icmp_rate: float = 0.0
    trace_icmp_burst: float = 10.0
    #: "model": the engine's hash models forward; "kernel": a Linux-kernel fabric (flowtracer.sim.kernel).
    dataplane: Literal["model", "kernel"] = "model"
    #: Kernel data plane: modelled bytes per real byte on a veth.
    scale: float | None = None
    #: Kernel data plane: "generous" (path tracing never limited) or "linux" (the kernel's defaults).
    icmp_limits: Literal["generous", "linux"] = "generous"
    #: (switch, seconds) pairs: that switch's clock is off by this much (> 0: ahead); every timestamp its
    #: gNMI server sends is skewed, the ground truth is not (docs/operations.md, fault table).
    clock_skew: tuple[tuple[str, float], ...] = ()
    #: Serve gNMI over TLS with this certificate and key; with its ``ca_file`` clients must present a
    #: certificate signed by it (mutual TLS). None = plaintext. Usernames/passwords come from the topology's
    #: ``credentials`` (env or file), as the collector's do.
    gnmi_tls: TlsFiles | None = None
    #: Serve every switch under this vendor profile's paths (fabric/profiles/<platform>.yaml), except those whose
    #: topology ``gnmi.platform`` names one; None = as the topology says (default openconfig).
    platform: str | None = None


class SimRunner:
    """The running simulation. Use as a context manager, or ``start()`` then ``stop()``."""

    def __init__(self, topology: Topology, workload: Workload, out_dir: Path, options: RunnerOptions | None = None,
                 *, start_ns: int | None = None) -> None:
        self.topology = topology
        self.workload = workload
        self.out_dir = Path(out_dir).resolve()  # the ready JSON is read from other directories
        self.options = options or RunnerOptions()
        self._start_ns = start_ns
        self.engine: Engine | None = None
        self.dataplane: Any = None
        self.servers: list[GnmiServer] = []
        self.responder: TraceResponder | None = None
        self.endpoints: dict[str, str] = {}
        self.done = threading.Event()  # set when the engine thread ends (duration over, or stopped)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._views_thread: threading.Thread | None = None
        # Frozen host states of each tick, oldest first. Bounded: when the writer falls behind, the
        # engine waits for it rather than a tick's snapshot being skipped (the agents read the
        # snapshot at each window boundary; a skipped one would shift bytes into the next window).
        self._views_queue: queue.Queue[list[HostState] | None] = queue.Queue(maxsize=4)
        self._stopped = False
        self.error: BaseException | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> dict[str, Any]:
        """Start everything; return the ready description (addresses and directories)."""
        o = self.options
        self.out_dir.mkdir(parents=True, exist_ok=True)
        gt_dir = self.out_dir / "ground-truth" if o.ground_truth else None
        if o.dataplane == "kernel":
            self.dataplane = _kernel_dataplane(self.topology, o)
        try:
            self.engine = Engine(self.topology, self.workload, tick_s=o.tick_s, start_ns=self._start_ns,
                                 counter32=o.counter32, ground_truth=gt_dir, qpn_reuse=o.qpn_reuse,
                                 coll_log=o.coll_log, dataplane=self.dataplane)
        except BaseException:
            self.stop()
            raise
        try:
            self._start_servers()
            if o.trace_responder and self.dataplane is None:  # on the kernel data plane agents probe the kernel
                self.responder = TraceResponder(self.engine, ResponderLimits(o.trace_loss, o.trace_icmp_rate,
                                                                             o.trace_icmp_burst))
                self.responder.start()
            topo_file = self._write_topology()
            hosts_dir = self.out_dir / "hosts"
            if o.host_views:
                for hs in self.engine.host_states.values():
                    write_host_view(hs, hosts_dir, spares_ahead=True)  # before the first tick (views.py)
                self._views_thread = threading.Thread(target=self._write_views, args=(hosts_dir,),
                                                      name="sim-host-views", daemon=True)
                self._views_thread.start()
                self.engine.add_tick_listener(self._tick_done)
            until = None
            if o.duration_s is not None:
                until = self.engine.start_ns + round(o.duration_s * 1e9)
            self._thread = threading.Thread(target=self._run, args=(until,), name="sim-engine", daemon=True)
            self._thread.start()
        except BaseException:
            self.stop()
            raise
        return {
            "ready": True,
            "pid": os.getpid(),
            "topology": str(topo_file) if topo_file else None,
            "gnmi": dict(self.endpoints),
            "platforms": self.platforms(),  # the vendor profile each switch serves (discovery reads it)
            "trace_responder": self.responder.address if self.responder is not None else None,
            "shared_port": o.shared_port is not None,
            "host_views": str(hosts_dir) if o.host_views else None,
            "host_view_dirs": {h: str(host_view_dir(hosts_dir, h)) for h in self.engine.host_states}
            if o.host_views else {},
            "ground_truth": str(gt_dir) if gt_dir else None,
            "tick_s": o.tick_s,
            "start_ns": self.engine.start_ns,
            "duration_s": o.duration_s,
            "dataplane": o.dataplane,
            **({"scale": self.dataplane.scale, "netns": dict(self.dataplane.kf.plan.namespaces)}
               if self.dataplane is not None else {}),
        }

    def stop(self) -> None:
        """Stop the engine thread, the gNMI servers and the view writer; close ground truth."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self._views_thread is not None:
            with contextlib.suppress(queue.Full):
                self._views_queue.put_nowait(None)
            self._views_thread.join()
        for s in self.servers:
            try:
                s.stop()
            except Exception:  # one server failing to stop must not keep the others running
                log.exception("stopping a gNMI server")
        self.servers = []
        if self.responder is not None:
            self.responder.stop()
            self.responder = None
        if self.engine is not None:
            self.engine.close()
        if self.dataplane is not None:
            self.dataplane.close()
        self.done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ends (duration over or ``stop``); True if it has."""
        return self.done.wait(timeout)

    def __enter__(self) -> SimRunner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- parts ------------------------------------------------------------------------------------

    def _run(self, until_ns: int | None) -> None:
        assert self.engine is not None
        try:
            self.engine.run(self._stop, until_ns)
        except BaseException as e:  # surfaced by the CLI; the servers stay up until stop()
            self.error = e
            log.exception("simulation engine failed")
        finally:
            self.done.set()

    def _tick_done(self, t_ns: int) -> None:
        assert self.engine is not None
        frozen = [_freeze(hs) for hs in self.engine.host_states.values()]
        while not self._stop.is_set():
            try:
                self._views_queue.put(frozen, timeout=0.2)
                return
            except queue.Full:
                continue

    def _write_views(self, root: Path) -> None:
        """Write every host's view for every tick, in order."""
        while True:
            try:
                frozen = self._views_queue.get(timeout=0.2)
            except queue.Empty:
                if self._stop.is_set():
                    return
                continue
            if frozen is None:
                return
            for hs in frozen:
                try:
                    write_host_view(hs, root)
                except OSError:
                    log.exception("writing the host view of %s", hs.name)

    def _start_servers(self) -> None:
        assert self.engine is not None
        o = self.options
        states = self.engine.switch_states
        creds = _credentials(self.topology.defaults.credentials, "defaults")
        offsets = {name: round(seconds * 1e9) for name, seconds in o.clock_skew}
        unknown = sorted(set(offsets) - set(states))
        if unknown:
            raise ValueError(f"clock skew for unknown switch(es) {', '.join(unknown)}")
        platforms = self.platforms()
        if o.shared_port is not None:
            server = GnmiServer(states, o.gnmi_address, o.shared_port, credentials=creds, tls=o.gnmi_tls,
                                cancel_on_half_close=o.cancel_on_half_close, clock_offsets=offsets,
                                platforms=platforms)
            port = server.start()
            self.servers.append(server)
            self.endpoints = {name: f"{o.gnmi_address}:{port}" for name in states}
            return
        for sw in self.topology.switches:
            port = sw.gnmi.port if (o.gnmi_ports == "topology" and sw.gnmi is not None) else 0
            sw_creds = _credentials(sw.gnmi.credentials, f"switch {sw.name}") if sw.gnmi is not None else None
            server = GnmiServer({sw.name: states[sw.name]}, o.gnmi_address, port, default_target=sw.name,
                                tls=o.gnmi_tls, credentials=sw_creds or creds,
                                cancel_on_half_close=o.cancel_on_half_close, clock_offsets=offsets,
                                platforms=platforms)
            bound = server.start()
            self.servers.append(server)
            self.endpoints[sw.name] = f"{o.gnmi_address}:{bound}"

    def platforms(self) -> dict[str, str]:
        """Switch -> the platform it serves: its topology ``gnmi.platform`` when set, else ``options.platform``
        (else openconfig)."""
        default = self.options.platform or DEFAULT_PLATFORM
        return {sw.name: sw.gnmi.platform if sw.gnmi is not None and "platform" in sw.gnmi.model_fields_set
                else default for sw in self.topology.switches}

    def _write_topology(self) -> Path | None:
        """The topology with the bound gNMI endpoints (not with a shared port: endpoints must differ)."""
        if self.options.shared_port is not None:
            return None
        data = yaml.safe_load(self.topology.to_yaml())
        for s in data["switches"]:
            addr, _, port = self.endpoints[s["name"]].rpartition(":")
            s["gnmi"] = {**(s.get("gnmi") or {}), "address": addr, "port": int(port)}
            if (platform := self.platforms()[s["name"]]) != DEFAULT_PLATFORM:  # collectors read it from here
                s["gnmi"]["platform"] = platform
        topo = validate_topology(data, "effective topology")
        path = self.out_dir / "topology.yaml"
        path.write_text(topo.to_yaml(), encoding="utf-8")
        return path


def _kernel_dataplane(topology: Topology, o: RunnerOptions) -> Any:
    """Reap what dead earlier runs left, then build the kernel fabric (imported here: model runs never load it)."""
    from flowtracer.sim.kernel.dataplane import DEFAULT_SCALE, KernelDataplane
    from flowtracer.sim.kernel.netns import GENEROUS_ICMP, LINUX_DEFAULT_ICMP
    from flowtracer.sim.kernel.records import reap_stale

    reap_stale()
    icmp = LINUX_DEFAULT_ICMP if o.icmp_limits == "linux" else GENEROUS_ICMP
    return KernelDataplane(topology, scale=o.scale or DEFAULT_SCALE, icmp=icmp)


def _freeze(hs: HostState) -> HostState:
    """A copy of a host's state as of this tick, taken under its lock (the engine moves on meanwhile).

    The NCCL lines go with the copy: every copy is written, in order (``_write_views``), so the live state
    forgets them unless the host is not reporting (then the next written copy carries them). Keeping them
    all grew the simulator by about 2 MB/min (issue 27)."""
    with hs.lock:
        frozen = HostState(hs.name, list(hs.nics), {k: copy.copy(v) for k, v in hs.qps.items()},
                           {k: copy.copy(v) for k, v in hs.ports.items()}, list(hs.nccl_log), hs.timestamp_ns,
                           hs.reporting, nccl_log_dropped=hs.nccl_log_dropped)
        if hs.reporting:
            hs.nccl_log_dropped += len(hs.nccl_log)
            hs.nccl_log.clear()
        return frozen


def _credentials(c: Credentials, where: str) -> tuple[str, str] | None:
    """(username, password) a topology credential reference resolves to, or None if incomplete.

    A reference whose variable or file is missing is logged (one line naming it): those switches then
    check no password, which a test expecting UNAUTHENTICATED would otherwise never learn.
    """
    try:
        resolved = c.resolve()
    except SecretError as e:
        log.warning("topology %s: %s; those simulated switches check no password", where, e)
        return None
    if resolved is None or not resolved[0] or not resolved[1].get_secret_value():
        return None
    return resolved[0], resolved[1].get_secret_value()


def run_for(runner: SimRunner, on_ready: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
    """Start ``runner``, report readiness, then wait until its duration ends or ``stop`` is set."""
    info = runner.start()
    try:
        on_ready(info)
        while not stop.is_set() and not runner.wait(0.2):
            pass
    finally:
        runner.stop()
