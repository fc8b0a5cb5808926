"""The fabric as the what-if replays it: link conditions (degraded, failed), capacities, live paths, groups.

Pure. A condition names a cable by either end (``switch:port`` or ``host:rdma_device``, as the
simulator's faults do) and then applies to both directions, or names one directed link by its id
(``leaf01:Ethernet5>spine01:Ethernet1``). ``--degrade END=FRACTION`` leaves that fraction of the
line rate; ``--fail END`` takes the link out of service: switches withdraw it from their groups,
groups shrink and hashes spread over the members left (``Fabric.hash_path`` with ``down``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from flowtracer.fabric.routing import DirectedLink, EcmpGroup, Fabric, natural_key


class ConditionError(ValueError):
    """A --degrade/--fail argument names no link or has a bad value; ``str()`` says which and why."""


@dataclass(frozen=True)
class Conditions:
    """Link health for one replay: ``down`` directed link ids, ``capacity`` fraction (0, 1] left per link."""

    down: frozenset[str] = frozenset()
    capacity: Mapping[str, float] = field(default_factory=dict)
    label: str = "healthy"

    def factor(self, link: str) -> float:
        """Fraction of line rate left on a directed link: 0 when down."""
        return 0.0 if link in self.down else self.capacity.get(link, 1.0)


def resolve_link(fabric: Fabric, ref: str) -> tuple[str, ...]:
    """The directed link ids ``ref`` names: both directions of a cable end, or one directed link id."""
    if ">" in ref:
        if ref in fabric.links:
            return (ref,)
        raise ConditionError(f"no directed link {ref!r} in the topology")
    node, sep, port = ref.partition(":")
    if sep:
        for dl in fabric.links.values():
            if (dl.src_node, dl.src_port) == (node, port):
                return (dl.id, dl.reverse_id)
    ends = sorted((f"{dl.src_node}:{dl.src_port}" for dl in fabric.switch_links()), key=natural_key)[:4]
    raise ConditionError(f"no cable ends at {ref!r} (give switch:port, host:rdma_device or a directed link id, "
                         f"e.g. {', '.join(ends)})")


def parse_conditions(fabric: Fabric, degrade: Sequence[str] = (), fail: Sequence[str] = ()) -> Conditions:
    """Conditions from ``--degrade END=FRACTION`` and ``--fail END`` arguments."""
    capacity: dict[str, float] = {}
    labels = []
    for spec in degrade:
        ref, sep, value = spec.rpartition("=")
        if not sep or not ref:
            raise ConditionError(f"--degrade {spec!r}: give END=FRACTION, e.g. leaf01:Ethernet5=0.5")
        try:
            frac = float(value)
        except ValueError:
            raise ConditionError(f"--degrade {spec!r}: {value!r} is not a number") from None
        if not 0.0 < frac <= 1.0:
            raise ConditionError(f"--degrade {spec!r}: the fraction left must be in (0, 1], got {frac}")
        for lid in resolve_link(fabric, ref):
            capacity[lid] = frac
        labels.append(f"{ref} at {frac:g}")
    down: set[str] = set()
    for ref in fail:
        down.update(resolve_link(fabric, ref))
        labels.append(f"{ref} failed")
    return Conditions(frozenset(down), capacity, "; ".join(labels) or "healthy")


@dataclass(frozen=True)
class LiveGroup:
    """An ECMP group and the indexes (into ``ReplayFabric.link_ids``) of its members still in service."""

    group: EcmpGroup
    members: tuple[int, ...]


class ReplayFabric:
    """A ``Fabric`` under ``Conditions``, with links numbered for numpy. Capacities in bit/s."""

    def __init__(self, fabric: Fabric, conditions: Conditions | None = None) -> None:
        self.fabric = fabric
        self.conditions = conditions or Conditions()
        self.link_ids: list[str] = sorted(fabric.links, key=natural_key)
        self.index: dict[str, int] = {lid: i for i, lid in enumerate(self.link_ids)}
        links = [fabric.links[lid] for lid in self.link_ids]
        #: Line rate x the condition's fraction, bit/s; 0 for a failed link.
        self.capacity_bps = np.array([dl.speed_bps * self.conditions.factor(dl.id) for dl in links])
        #: True for switch-to-switch links: the ones routing decides about.
        self.fabric_link = np.array([not dl.host_link for dl in links])
        self._paths: dict[tuple[str, str], tuple[tuple[tuple[str, ...], float], ...]] = {}
        self._ordinal: dict[str, int] | None = None

    @property
    def down(self) -> frozenset[str]:
        return self.conditions.down

    def link(self, lid: str) -> DirectedLink:
        return self.fabric.links[lid]

    def members(self, switch: str, dst_leaf: str) -> tuple[DirectedLink, ...]:
        """Equal-cost egress links of ``switch`` toward ``dst_leaf`` that are in service (member order)."""
        return self.fabric.next_hops(switch, dst_leaf, self.down)

    def host_links(self, src_nic: str, dst_nic: str) -> tuple[str, str] | None:
        """The NIC -> leaf and leaf -> NIC links of a flow; None when either is down."""
        src, dst = self.fabric.nics[src_nic], self.fabric.nics[dst_nic]
        up = f"{src.host}:{src.nic.rdma_device}>{src.leaf}:{src.leaf_port}"
        down = f"{dst.leaf}:{dst.leaf_port}>{dst.host}:{dst.nic.rdma_device}"
        return None if up in self.down or down in self.down else (up, down)

    def paths(self, src_nic: str, dst_nic: str) -> tuple[tuple[tuple[str, ...], float], ...]:
        """Every live shortest path with the share per-hop even spraying gives it (shares sum to 1).

        Each switch splits evenly over its live members toward the destination leaf, so in a
        symmetric fabric every path gets the same share and after a failure the shares follow the
        shrunk groups. () when the destination is unreachable.
        """
        key = (src_nic, dst_nic)
        if key not in self._paths:
            ends = self.host_links(src_nic, dst_nic)
            out: list[tuple[tuple[str, ...], float]] = []
            if ends is not None:
                src_leaf = self.fabric.nics[src_nic].leaf
                dst_leaf = self.fabric.nics[dst_nic].leaf
                for mid, share in self._walk(src_leaf, dst_leaf, 1.0, len(self.fabric.out_links)):
                    out.append(((ends[0], *mid, ends[1]), share))
            self._paths[key] = tuple(out)
        return self._paths[key]

    def _walk(self, at: str, dst_leaf: str, share: float, budget: int) -> list[tuple[tuple[str, ...], float]]:
        if at == dst_leaf:
            return [((), share)]
        hops = self.members(at, dst_leaf)
        if not hops or budget == 0:
            return []
        out = []
        for hop in hops:
            for rest, s in self._walk(hop.dst_node, dst_leaf, share / len(hops), budget - 1):
                out.append(((hop.id, *rest), s))
        return out

    def dst_ordinal(self, dst_nic: str) -> int:
        """Position of a NIC among the NICs of its leaf (natural order of NIC names): static pinning's key."""
        if self._ordinal is None:
            per_leaf: dict[str, list[str]] = {}
            for name, ref in self.fabric.nics.items():
                per_leaf.setdefault(ref.leaf, []).append(name)
            self._ordinal = {n: i for names in per_leaf.values()
                             for i, n in enumerate(sorted(names, key=natural_key))}
        return self._ordinal[dst_nic]

    @cached_property
    def groups(self) -> list[LiveGroup]:
        """Every ECMP group of the healthy fabric with its members still in service."""
        return [LiveGroup(g, tuple(self.index[m.id] for m in g.members if m.id not in self.down))
                for g in self.fabric.ecmp_groups.values()]
