"""The kernel data plane as the engine sees it: paths from the kernel, traffic and counters into it.

``KernelDataplane(topology, scale=...)`` builds the fabric (``netns.KernelFabric``) and starts the
traffic threads; the engine (``flowtracer.sim.fabric.engine``) then asks it for paths (``paths``),
tells it about link changes (``link_state``), calls ``tick`` at every tick end (reads the switches'
veth counters, gives the sender the next tick's aims) and ``publish`` for every switch state.

``scale``: one byte (and one packet) on a veth stands for ``scale`` bytes (packets) of the modelled
link. Real frames have the modelled frame size (``traffic.frame_payload``), so the switches' gNMI
interface counters, kernel counters x ``scale``, are comparable with the flows' modelled frame bytes.

What the hosts report is what the kernel sent: the paced senders can reach a tick's modelled bytes up to a
tick late (when rates change), so at every tick end the senders' counts, read with the switches' counters at
one instant, replace the model's per-flow bytes (``sent_flows``, ``flows.restate_tick``). Hosts and switches
then agree as on a real fabric, and the model's intent only steers the senders.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from flowtracer.fabric.topology import Topology
from flowtracer.sim.fabric.flows import CTS_BYTES, restate_tick
from flowtracer.sim.kernel.netns import KernelFabric
from flowtracer.sim.kernel.oracle import KernelOracle, Query
from flowtracer.sim.kernel.traffic import FlowKey, TrafficSender
from flowtracer.sim.switches.state import INTERFACE_COUNTERS, SwitchState

if TYPE_CHECKING:
    from flowtracer.sim.fabric.engine import Engine
    from flowtracer.sim.fabric.flows import TickStats

log = logging.getLogger(__name__)

#: Default scale: 100,000 modelled bytes per real byte. A 16-host 400G ring all-reduce (~6 Tbit/s of
#: frames fabric-wide at full rate) becomes ~7.5 Mbyte/s, ~1,800 4-KiB frames/s from the sender,
#: forwarded over 2-4 veth hops each (docs/kernel-dataplane.md has the measured CPU).
DEFAULT_SCALE = 100_000


def sent_flows(delta: Mapping[int, tuple[float, int]], scale: float,
               header_bytes: int) -> dict[int, tuple[int, int, int]]:
    """Per flow id, (real frame bytes sent in the tick, frame bytes) -> the modelled (payload, frame bytes,
    packets) they stand for: one real byte (packet) is ``scale`` modelled ones, each packet carries
    ``header_bytes`` of frame overhead. Flows that sent nothing are left out."""
    out: dict[int, tuple[int, int, int]] = {}
    for fid, (real, frame) in delta.items():
        if real <= 0 or frame <= 0:
            continue
        wire = round(real * scale)
        pk = round(real / frame * scale)
        out[fid] = (wire - pk * header_bytes, wire, pk)
    return out


class KernelDataplane:
    """Forwarding, traffic and switch counters from a real Linux-kernel fabric."""

    kind = "kernel"

    def __init__(self, topology: Topology, *, scale: float = DEFAULT_SCALE, icmp: dict[str, int] | None = None,
                 traffic: bool = True) -> None:
        if not scale > 0:
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = float(scale)
        self.kf = KernelFabric(topology, icmp=icmp)
        self.kf.build()
        try:
            self.oracle = KernelOracle(self.kf)
            hosts = [self.kf.netns_path(h) for h in self.kf.plan.hosts]
            self.sender = TrafficSender(hosts) if traffic else None
        except BaseException:
            self.kf.close()
            raise
        self._base: dict[tuple[str, str], tuple[int, int, int, int]] = {}
        self._now: dict[tuple[str, str], tuple[int, int, int, int]] = {}
        self._model_cum: dict[int, int] = {}  # flow id -> modelled frame bytes so far
        self._fid_of: dict[FlowKey, int] = {}  # sender key -> the engine's flow id it sends for
        self._frame_of: dict[FlowKey, int] = {}  # sender key -> its frame bytes
        self._sent_last: dict[FlowKey, float] = {}  # sender key -> real bytes sent at the last tick end
        self.read_s = 0.0

    # -- names for other parts (the host agent's prober) --------------------------------------------

    def netns_name(self, node: str) -> str:
        return self.kf.netns_name(node)

    def netns_path(self, node: str) -> str:
        return str(self.kf.netns_path(node))

    # -- what the engine calls ------------------------------------------------------------------------

    def paths(self, queries: Sequence[Query]) -> list[tuple[str, ...] | None]:
        """The kernel's path of each (headers, source NIC, destination NIC), as ``Fabric.hash_path``."""
        return self.oracle.paths(queries)

    def link_state(self, down: frozenset[str]) -> None:
        """Links out of service changed: set the veths and routes, forget cached paths."""
        self.kf.set_down(down)
        self.oracle.invalidate()

    def meta(self) -> dict[str, object]:
        """For ground truth only (the pipeline never sees the seeds)."""
        return {"kind": self.kind, "scale": self.scale, "prefix": self.kf.prefix, "seeds": dict(self.kf.seeds),
                "icmp": dict(self.kf.icmp), "build_s": self.kf.build_s,
                "namespaces": dict(self.kf.plan.namespaces)}

    def tick(self, engine: Engine, stats: TickStats) -> None:
        """At a tick end: read the switches' counters and what each flow's sender really sent by then, aim the
        sender at the next tick, and restate ``stats`` as the bytes the kernel carried (so the hosts' views,
        next-hop counters and ground truth count what the switches' counters count)."""
        t = time.monotonic()
        if self.sender is None:
            self._now, sent = self.kf.read_counters(), None
        else:
            self._now, sent = self.sender.sent_while(self.kf.read_counters)
        self.read_s = time.monotonic() - t
        for fid, (_pl, wire, _pk) in stats.flows.items():
            self._model_cum[fid] = self._model_cum.get(fid, 0) + wire
        if self.sender is None or sent is None:
            return
        delta = {self._fid_of[k]: (b - self._sent_last.get(k, 0.0), self._frame_of[k])
                 for k, b in sent.items() if k in self._fid_of}
        self._sent_last = sent
        tick_s = engine.tick_ns / 1e9
        aims: dict[FlowKey, tuple[int, float, float]] = {}
        for f in engine.flows.values():
            cum = self._model_cum.get(f.id, 0)
            if f.path is None or cum == 0:
                continue
            # The tick ahead is predicted to move what the last one did: the instantaneous rate at a tick
            # end is often 0 (between ring steps, in a compute gap) and would leave the kernel a tick behind.
            wire = stats.flows.get(f.id, (0, 0, 0))[1]
            frame = engine.mtu + engine.header_bytes if f.forward else CTS_BYTES + engine.header_bytes
            key = FlowKey(self.kf.netns_path(f.src.host), f.headers.src_ip, f.headers.dst_ip,
                          f.headers.udp_src_port, f.headers.dst_qpn)
            aims[key] = (frame, cum / self.scale, wire / tick_s / self.scale)
            self._fid_of[key] = f.id
            self._frame_of[key] = frame
        # Aim at the next tick's wall-clock end (real time), when the engine reads the counters again;
        # in virtual time (advance) ticks have no wall-clock meaning and the aim spans one tick from now.
        left = (stats.end_ns + engine.tick_ns - time.time_ns()) / 1e9
        self.sender.update(aims, tick_s, left if 0 < left <= tick_s else tick_s)
        restate_tick(stats, sent_flows(delta, self.scale, engine.header_bytes), engine.flows)

    def reset(self, switch: str) -> None:
        """The switch rebooted: its counters restart at 0 (kernel totals so far become the base)."""
        for key, row in self._now.items():
            if key[0] == switch:
                self._base[key] = row

    def publish(self, state: SwitchState) -> None:
        """Replace the interface counters in ``state`` with the kernel's x scale (caller holds the lock)."""
        mod = 1 << state.counter_bits
        for port, iface in state.interfaces.items():
            now = self._now.get((state.name, port))
            if now is None:
                continue
            base = self._base.get((state.name, port), (0, 0, 0, 0))
            rx_b, tx_b, rx_p, tx_p = (round((a - b) * self.scale) for a, b in zip(now, base, strict=True))
            values = {"in-octets": rx_b, "out-octets": tx_b, "in-pkts": rx_p, "out-pkts": tx_p,
                      "in-unicast-pkts": rx_p, "out-unicast-pkts": tx_p}
            for name in INTERFACE_COUNTERS:
                if name in values:
                    iface.counters[name] = values[name] % mod

    def close(self) -> None:
        """Stop the traffic, then remove the fabric exactly (``KernelFabric.close``)."""
        try:
            if self.sender is not None:
                self.sender.close()
        finally:
            self.kf.close()
