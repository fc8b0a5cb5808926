"""Fault state of the simulated fabric: cables down or degraded, switches rebooting.

Pure bookkeeping, no clocks or threads: the engine applies a fault at a tick boundary, asks which
directed links are out of service (``down_links``, fed to ``Fabric.hash_path`` so groups shrink
and flows rehash), what capacity each link has left, and which interfaces changed oper status.
A cable is named by either end: ``switch:port`` or, for a host cable, ``host:rdma_device``. A
rebooting switch takes all its cables down until it is back. A stalled NIC (``nic_stall``) stops
draining what it receives: the link toward it carries nothing (capacity 0) until ``nic_resume``.

Routing faults leave the cable up: ``nh_withdraw: switch:port`` withdraws the next hop out of that port from the
switch's ECMP groups (a route withdrawn, a misconfiguration; the engine routes around it as around a down link, in
that one direction) until ``nh_restore``; ``nh_weight: switch:port`` with ``weight`` sets the AFT weight of that
next hop in its groups. The model forwards with it (``Fabric.hash_path`` with ``weights``: weighted ECMP as a hash
table in which each member appears weight times, as many ASICs program it), so a 2:1 group carries about 2:1 of its
flows. The kernel data plane (``sim/kernel``) forwards with equal weights: there the AFT weight is only reported.
A withdrawal is one direction: the neighbor behind the port still routes back over the cable.

Reporting faults leave the traffic alone: ``gnmi_silent: switch`` hangs the switch's gNMI server (sessions stay
open, nothing is sent: no samples, no heartbeats, no oper-status changes, and a new Subscribe gets no initial sync)
until ``gnmi_resume``; ``agent_stop: host`` stops the host's reporting (its view, what the agent reads, is no
longer written) until ``agent_resume``. The boundary is the engine's tick: the sample and the view stamped at the
fault's time still go out (they were published before it), the ones stamped at the resume's time do not, the
next tick's do.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowtracer.fabric.routing import Fabric

#: Faults on reporting only: kind -> (starts rather than ends, names a switch rather than a host).
REPORTING_FAULTS = {"gnmi_silent": (True, True), "gnmi_resume": (False, True), "agent_stop": (True, False),
                    "agent_resume": (False, False)}


class FaultError(ValueError):
    """A fault names something the fabric does not have."""


@dataclass(frozen=True)
class Cable:
    """Both directions of one cable: ends ``a``/``b`` as (node, port) and the directed link ids."""

    a: tuple[str, str]
    b: tuple[str, str]
    ab: str
    ba: str

    @property
    def link_ids(self) -> tuple[str, str]:
        return self.ab, self.ba


def cables(fabric: Fabric) -> dict[tuple[str, str], Cable]:
    """Every cable of the fabric by each of its two ends."""
    out: dict[tuple[str, str], Cable] = {}
    for dl in fabric.links.values():
        a, b = (dl.src_node, dl.src_port), (dl.dst_node, dl.dst_port)
        if a in out:
            continue
        c = Cable(a, b, dl.id, dl.reverse_id)
        out[a] = out[b] = c
    return out


@dataclass(frozen=True)
class OperChange:
    """A switch interface went up or down."""

    switch: str
    port: str
    up: bool


class FaultState:
    """Which cables are down or degraded and which switches are rebooting (until when, ns)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.cables = cables(fabric)
        self.down: set[Cable] = set()
        self.degraded: dict[Cable, float] = {}
        self.rebooting: dict[str, int] = {}
        self.stalled: set[str] = set()
        #: Directed links whose next hop is withdrawn from their switch's groups; AFT weight of next hops != 1.
        self.withdrawn: set[str] = set()
        self.weights: dict[str, int] = {}
        #: Switches whose gNMI server is silent; hosts whose agent is stopped (reporting only, traffic flows).
        self.silent: set[str] = set()
        self.agents_stopped: set[str] = set()
        self._switches = fabric.switch_names
        self._hosts = {h.name for h in fabric.topology.hosts}

    def cable(self, ref: str) -> Cable:
        """The cable one end names: ``switch:port`` or ``host:rdma_device``."""
        node, sep, port = ref.partition(":")
        if not sep or (node, port) not in self.cables:
            ends = sorted(f"{n}:{p}" for n, p in self.cables if n in self._switches)[:6]
            raise FaultError(f"no cable ends at {ref!r} (give switch:port or host:rdma_device, e.g. "
                             f"{', '.join(ends)})")
        return self.cables[(node, port)]

    def nic(self, name: str) -> str:
        if name not in self.fabric.nics:
            raise FaultError(f"no NIC named {name!r} (give host:rdma_device)")
        return name

    def next_hop(self, ref: str) -> str:
        """The directed link a switch's next hop ``switch:port`` transmits on (a switch-to-switch link)."""
        c = self.cable(ref)
        node, _, port = ref.partition(":")
        link = c.ab if c.a == (node, port) else c.ba
        dl = self.fabric.links[link]
        if dl.src_node not in self._switches or dl.dst_node not in self._switches:
            raise FaultError(f"{ref!r} is not a switch-to-switch port: no ECMP next hop leaves through it")
        return link

    def switch(self, name: str) -> str:
        if name not in self._switches:
            raise FaultError(f"no switch named {name!r}")
        return name

    def host(self, name: str) -> str:
        if name not in self._hosts:
            raise FaultError(f"no host named {name!r} (e.g. {', '.join(sorted(self._hosts)[:3])})")
        return name

    def check(self, kind: str, target: str) -> None:
        """Refuse a fault whose target does not exist for its kind (raises FaultError naming it)."""
        if kind in ("reboot", "gnmi_silent", "gnmi_resume"):
            self.switch(target)
        elif kind in ("agent_stop", "agent_resume"):
            self.host(target)
        elif kind in ("nic_stall", "nic_resume"):
            self.nic(target)
        elif kind in ("nh_withdraw", "nh_restore", "nh_weight"):
            self.next_hop(target)
        else:
            self.cable(target)

    # -- what the engine asks ----------------------------------------------------------------------

    def down_links(self) -> frozenset[str]:
        """Directed link ids out of service (cables down, and every cable of a rebooting switch)."""
        out: set[str] = set()
        for c in self.down:
            out.update(c.link_ids)
        out.update(self.withdrawn)  # out of the routes in that direction, the cable up
        for sw in self.rebooting:
            for dl in self.fabric.out_links[sw]:
                out.update((dl.id, dl.reverse_id))
        return frozenset(out)

    def capacity_factor(self, link_id: str) -> float:
        """Fraction of a link's capacity left (1.0 unless degraded; 0 toward a stalled NIC)."""
        dl = self.fabric.links[link_id]
        if f"{dl.dst_node}:{dl.dst_port}" in self.stalled:
            return 0.0
        c = self.cables[(dl.src_node, dl.src_port)]
        return self.degraded.get(c, 1.0)

    def oper_up(self) -> dict[tuple[str, str], bool]:
        """Oper status of every switch interface: up unless its cable is down or an end is rebooting."""
        out = {}
        for (node, port), c in self.cables.items():
            if node not in self._switches:
                continue
            other = c.b if c.a == (node, port) else c.a
            out[(node, port)] = c not in self.down and node not in self.rebooting and other[0] not in self.rebooting
        return out

    def due_boots(self, now_ns: int) -> list[str]:
        """Switches whose reboot ends at or before ``now_ns``."""
        return sorted(s for s, until in self.rebooting.items() if until <= now_ns)

    # -- changes ----------------------------------------------------------------------------------

    def apply(self, kind: str, target: str, now_ns: int, capacity: float = 0.5,
              down_for_ns: int = 2_000_000_000, weight: int = 1) -> list[OperChange]:
        """Apply one fault; return the interfaces whose oper status changed."""
        before = self.oper_up()
        if kind == "link_down":
            self.down.add(self.cable(target))
        elif kind == "link_up":
            self.down.discard(self.cable(target))
        elif kind == "degrade":
            if not 0 < capacity <= 1:
                raise FaultError(f"degrade capacity must be in (0, 1], got {capacity}")
            self.degraded[self.cable(target)] = capacity
        elif kind == "restore":
            self.degraded.pop(self.cable(target), None)
        elif kind == "reboot":
            self.rebooting[self.switch(target)] = now_ns + down_for_ns
        elif kind == "boot":
            self.rebooting.pop(self.switch(target), None)
        elif kind == "nic_stall":
            self.stalled.add(self.nic(target))
        elif kind == "nic_resume":
            self.stalled.discard(self.nic(target))
        elif kind == "nh_withdraw":
            self.withdrawn.add(self.next_hop(target))
        elif kind == "nh_restore":
            self.withdrawn.discard(self.next_hop(target))
        elif kind == "nh_weight":
            if weight < 1:
                raise FaultError(f"nh_weight weight must be an integer >= 1, got {weight}")
            link = self.next_hop(target)
            if weight == 1:
                self.weights.pop(link, None)
            else:
                self.weights[link] = weight
        elif kind in REPORTING_FAULTS:
            on, is_switch = REPORTING_FAULTS[kind]
            names, name = (self.silent, self.switch(target)) if is_switch else (self.agents_stopped, self.host(target))
            if on:
                names.add(name)
            else:
                names.discard(name)
        else:
            raise FaultError(f"unknown fault {kind!r}")
        after = self.oper_up()
        return [OperChange(sw, port, up) for (sw, port), up in after.items() if before[(sw, port)] != up]
