"""Which counters measure which directed link, and which switch owns a link's numbers.

A directed link is measured at its transmitting switch (out-octets of the egress port). A link
that a host transmits on (NIC -> leaf) has no switch at its transmitting end, so it is measured
at the leaf by the in-octets of the host port. The switch that measures a link owns it: its
counters and the flow bytes attributed to the link meet in that switch's partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowtracer.fabric.routing import DirectedLink, Fabric
from flowtracer.schemas.v1 import counters_pb2
from flowtracer.stream.analytics.window_delta import TRUSTED_STATUSES, interval_fits


@dataclass
class LinkIndex:
    """Lookups from (switch, port) to the links its counters measure, built once from the fabric."""

    fabric: Fabric
    out_link: dict[tuple[str, str], str] = field(init=False)  # (switch, port) -> link it transmits on
    in_host_link: dict[tuple[str, str], str] = field(init=False)  # (leaf, port) -> host link into it
    owner: dict[str, str] = field(init=False)  # link id -> owning switch
    owned: dict[str, list[DirectedLink]] = field(init=False)  # switch -> links it owns
    #: switch -> port -> (link it transmits on, host link into it; None where there is none): the two lookups above
    #: by port, so that a CounterBatch is read without a key tuple per interface
    ports: dict[str, dict[str, tuple[str | None, str | None]]] = field(init=False)

    def __post_init__(self) -> None:
        self.out_link, self.in_host_link, self.owner = {}, {}, {}
        self.owned = {s: [] for s in self.fabric.switch_names}
        switches = self.fabric.switch_names
        for link in self.fabric.links.values():
            if link.src_node in switches:
                self.out_link[(link.src_node, link.src_port)] = link.id
                owner = link.src_node
            else:
                self.in_host_link[(link.dst_node, link.dst_port)] = link.id
                owner = link.dst_node
            self.owner[link.id] = owner
            self.owned[owner].append(link)
        self.ports = {}
        for sw, port in {*self.out_link, *self.in_host_link}:
            self.ports.setdefault(sw, {})[port] = (self.out_link.get((sw, port)), self.in_host_link.get((sw, port)))

    def measured(self, batch: counters_pb2.CounterBatch, hop_ns: int) -> dict[str, int]:
        """Bytes per owned link from one CounterBatch, for trusted deltas over one hop only.

        A delta over a different interval (a gap, or a collector sampling slower than the hop)
        cannot be placed in one window, so the link has no measurement for it.
        """
        out: dict[str, int] = {}
        ports = self.ports.get(batch.switch, {})
        for itf in batch.interfaces:
            ends = ports.get(itf.name)
            if ends is None or not interval_fits(itf.interval_ns, hop_ns):
                continue
            lid, hid = ends
            if lid is not None and itf.out_octets.status in TRUSTED_STATUSES:
                out[lid] = itf.out_octets.delta
            if hid is not None and itf.in_octets.status in TRUSTED_STATUSES:
                out[hid] = itf.in_octets.delta
        return out

    def oper_up(self, batch: counters_pb2.CounterBatch) -> dict[str, bool]:
        """Oper status (up or not) per owned link from one CounterBatch: the measuring end's interface, as the
        collector last saw its oper-status leaf (ON_CHANGE). Interfaces without a reported status are absent."""
        out: dict[str, bool] = {}
        ports = self.ports.get(batch.switch, {})
        for itf in batch.interfaces:
            if itf.oper_status == counters_pb2.OPER_STATUS_UNSPECIFIED:
                continue
            ends = ports.get(itf.name)
            if ends is None:
                continue
            up = itf.oper_status == counters_pb2.OPER_STATUS_UP
            for lid in ends:
                if lid is not None:  # a host port measures both its directions
                    out[lid] = up
        return out
