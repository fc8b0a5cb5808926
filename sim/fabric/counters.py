"""Absolute switch counters the engine keeps per boot, and how they are written into ``SwitchState``.

Interface counters follow the directed links: a link's bytes are out-octets of its transmitting
switch port and in-octets of its receiving switch port, so both ends of a cable agree by
construction. Every packet is unicast; discards and errors stay 0 (congestion is modelled as
lower rates, not drops). Next hops: one per member link of the switch's ECMP groups
(``Fabric.ecmp_groups``), shared by the groups that use it, with the neighbor's address on that
link as next-hop IP; a next hop counts the bytes the switch forwarded over it by an ECMP decision.
A group whose member link is down, or whose next hop is withdrawn (``nh_withdraw``), loses that member (the next
hop stays, its counters frozen); a member's weight is 1 unless an ``nh_weight`` fault set it.
IPv4 entries: each host NIC's /32 points at the group the switch reaches the NIC's leaf through.

Counters are kept as 64-bit totals since the switch booted; in counter32 mode they are published
modulo 2**32. Next-hop indexes and group ids are drawn per boot, so they change on reboot.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from flowtracer.fabric.routing import Fabric, natural_key
from flowtracer.sim.fabric.congestion_counters import SWITCH_COUNTERS, published
from flowtracer.sim.switches.state import INTERFACE_COUNTERS, InterfaceState, NextHop, NextHopGroup, SwitchState

_IN_OCT, _OUT_OCT, _IN_PKT, _OUT_PKT, _IN_UC, _OUT_UC = range(6)


@dataclass(frozen=True)
class NextHopDef:
    """A next hop of one switch: its egress link (index into the engine's link list) and address."""

    switch: str
    link: int
    interface: str
    ip: str


class CounterBook:
    """Per-boot interface and next-hop totals of every switch (bytes, packets)."""

    #: Columns of ``if_tot`` (INTERFACE_COUNTERS order) the congestion counters reuse.
    OUT_OCT, OUT_PKT = _OUT_OCT, _OUT_PKT

    def __init__(self, fabric: Fabric, link_ids: list[str], p2p: dict[tuple[str, str], str], seed: int) -> None:
        self.fabric = fabric
        self.seed = seed
        n_links = len(link_ids)
        link_index = {lid: i for i, lid in enumerate(link_ids)}
        switches = fabric.switch_names
        ports: dict[tuple[str, str], int] = {}
        for dl in fabric.links.values():
            for node, port in ((dl.src_node, dl.src_port), (dl.dst_node, dl.dst_port)):
                if node in switches:
                    ports[(node, port)] = dl.speed_bps
        self.ifaces = sorted(ports, key=lambda np_: (natural_key(np_[0]), natural_key(np_[1])))
        self.if_index = {k: i for i, k in enumerate(self.ifaces)}
        self.if_speed = [ports[k] for k in self.ifaces]
        self.link_out_if = np.full(n_links, -1, dtype=np.intp)
        self.link_in_if = np.full(n_links, -1, dtype=np.intp)
        for lid, i in link_index.items():
            dl = fabric.links[lid]
            self.link_out_if[i] = self.if_index.get((dl.src_node, dl.src_port), -1)
            self.link_in_if[i] = self.if_index.get((dl.dst_node, dl.dst_port), -1)

        self.next_hops: list[NextHopDef] = []
        self.link_nh = np.full(n_links, -1, dtype=np.intp)
        #: switch -> [(group id string, next-hop positions in member order)]
        self.groups: dict[str, list[tuple[str, list[int]]]] = {s: [] for s in switches}
        #: switch -> the IPv4 /32 prefixes (host NICs behind the group's destination leaves) of each group above
        self.group_prefixes: dict[str, list[tuple[str, ...]]] = {s: [] for s in switches}
        nic_prefixes: dict[str, list[str]] = {}
        for ref in fabric.nics.values():
            nic_prefixes.setdefault(ref.leaf, []).append(f"{ref.nic.ip}/32")
        for gid, group in fabric.ecmp_groups.items():
            members = []
            for m in group.members:
                li = link_index[m.id]
                if self.link_nh[li] < 0:
                    self.link_nh[li] = len(self.next_hops)
                    self.next_hops.append(NextHopDef(group.switch, li, m.src_port, p2p[(m.dst_node, m.dst_port)]))
                members.append(int(self.link_nh[li]))
            self.groups[group.switch].append((gid, members))
            self.group_prefixes[group.switch].append(
                tuple(p for leaf in group.destinations for p in nic_prefixes.get(leaf, ())))
        self.if_tot = np.zeros((len(self.ifaces), len(INTERFACE_COUNTERS)), dtype=np.int64)
        self.nh_tot = np.zeros((len(self.next_hops), 2), dtype=np.int64)
        self._if_of_switch: dict[str, list[int]] = {s: [] for s in switches}
        for i, (sw, _port) in enumerate(self.ifaces):
            self._if_of_switch[sw].append(i)
        self._nh_of_switch: dict[str, list[int]] = {s: [] for s in switches}
        for i, nh in enumerate(self.next_hops):
            self._nh_of_switch[nh.switch].append(i)
        #: Per switch and boot: reported next-hop index of each next hop, and id of each group.
        self.nh_ids: dict[str, dict[int, int]] = {}
        self.group_ids: dict[str, list[int]] = {}
        for s in switches:
            self.renumber(s, 0)

    def if_of_switch(self, switch: str) -> list[int]:
        """Indexes (into ``ifaces`` / ``if_tot``) of a switch's interfaces."""
        return self._if_of_switch[switch]

    def renumber(self, switch: str, boot_epoch: int) -> None:
        """Draw the next-hop indexes and group ids a switch uses in this boot."""
        rng = random.Random(f"{self.seed}:{switch}:{boot_epoch}")
        nh_base = rng.randrange(1, 1 << 20)
        self.nh_ids[switch] = {nh: nh_base + j for j, nh in enumerate(self._nh_of_switch[switch])}
        g_base = rng.randrange(1, 1 << 20)
        self.group_ids[switch] = [g_base + j for j in range(len(self.groups[switch]))]

    def add(self, link_bytes: npt.NDArray[np.int64], link_pkts: npt.NDArray[np.int64],
            nh_bytes: npt.NDArray[np.int64], nh_pkts: npt.NDArray[np.int64], frozen: set[str]) -> None:
        """Add one tick: per directed link bytes/packets, and the ECMP-forwarded part per link.

        ``frozen``: switches that are rebooting; they count nothing.
        """
        for side, cols in ((self.link_out_if, (_OUT_OCT, _OUT_PKT, _OUT_UC)),
                           (self.link_in_if, (_IN_OCT, _IN_PKT, _IN_UC))):
            ok = side >= 0
            idx = side[ok]
            np.add.at(self.if_tot[:, cols[0]], idx, link_bytes[ok])
            np.add.at(self.if_tot[:, cols[1]], idx, link_pkts[ok])
            np.add.at(self.if_tot[:, cols[2]], idx, link_pkts[ok])
        ok = self.link_nh >= 0
        np.add.at(self.nh_tot[:, 0], self.link_nh[ok], nh_bytes[ok])
        np.add.at(self.nh_tot[:, 1], self.link_nh[ok], nh_pkts[ok])
        for sw in frozen:
            self.reset(sw)

    def reset(self, switch: str) -> None:
        """Counters restart at 0 (reboot)."""
        self.if_tot[self._if_of_switch[switch]] = 0
        self.nh_tot[self._nh_of_switch[switch]] = 0

    # -- publishing -------------------------------------------------------------------------------

    def init_state(self, state: SwitchState) -> None:
        """Create the interfaces of a new SwitchState (all up, counters 0)."""
        for i in self._if_of_switch[state.name]:
            port = self.ifaces[i][1]
            state.interfaces[port] = InterfaceState(port, self.if_speed[i])

    def publish(self, state: SwitchState, oper: dict[tuple[str, str], bool], down_links: set[int],
                weights: dict[int, int] | None = None) -> None:
        """Write this switch's totals, next hops and groups into ``state`` (caller holds the lock); ``weights``:
        AFT weight of the next hops over these link indexes (1 for the others)."""
        sw = state.name
        mod = 1 << state.counter_bits
        for i in self._if_of_switch[sw]:
            iface = state.interfaces[self.ifaces[i][1]]
            row = self.if_tot[i]
            for j, name in enumerate(INTERFACE_COUNTERS):
                iface.counters[name] = int(row[j]) % mod
            iface.oper_up = oper.get(self.ifaces[i], True)
        ids = self.nh_ids[sw]
        nhs: dict[int, NextHop] = {}
        for nh in self._nh_of_switch[sw]:
            d = self.next_hops[nh]
            nhs[ids[nh]] = NextHop(ids[nh], d.ip, d.interface, int(self.nh_tot[nh, 0]) % mod,
                                   int(self.nh_tot[nh, 1]) % mod)
        state.next_hops = nhs
        groups: dict[int, NextHopGroup] = {}
        for gid, (_name, members) in zip(self.group_ids[sw], self.groups[sw], strict=True):
            groups[gid] = NextHopGroup(gid, {ids[nh]: (weights or {}).get(self.next_hops[nh].link, 1)
                                             for nh in members if self.next_hops[nh].link not in down_links})
        state.groups = groups
        state.ipv4_entries = {prefix: gid for gid, prefixes in zip(self.group_ids[sw], self.group_prefixes[sw],
                                                                   strict=True) for prefix in prefixes}

    def record(self, state: SwitchState) -> dict[str, object]:
        """Compact JSON-able copy of what ``publish`` wrote (for ground truth); caller holds the lock."""
        out: dict[str, object] = {
            "boot_epoch": state.boot_epoch,
            "available": state.available,
            "last_clear_ns": state.last_clear_ns,
            "interfaces": {name: [int(i.oper_up), *(i.counters[c] for c in INTERFACE_COUNTERS)]
                           for name, i in state.interfaces.items()},
            "next_hops": {str(idx): [nh.interface, nh.ip_address, nh.octets_forwarded, nh.packets_forwarded]
                          for idx, nh in state.next_hops.items()},
            "groups": {},
        }
        groups: dict[str, object] = {}
        for gid, (name, _m) in zip(self.group_ids[state.name], self.groups[state.name], strict=True):
            members = state.groups[gid].next_hops
            rec: dict[str, object] = {"name": name, "members": sorted(members)}
            if any(w != 1 for w in members.values()):
                rec["weights"] = [members[i] for i in sorted(members)]
            groups[str(gid)] = rec
        out["groups"] = groups
        if state.silent:  # only while it is: a healthy run's records stay as they were
            out["silent"] = True
        # The congestion model's counters as published (priority ROCE_PRIORITY, SWITCH_COUNTERS order).
        cong = {name: [vals[c] for c in SWITCH_COUNTERS]
                for name in state.interfaces if (vals := published(state, name)) is not None}
        if cong:
            out["congestion"] = cong
        return out
