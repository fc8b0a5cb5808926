"""The ``hash`` resolver: apply each switch's ECMP hash model from the topology, hop by hop, and doubt it when
the counters disagree.

The model is deterministic, so on a fabric whose hash configuration the topology states correctly every
placement is certain. When the configuration is wrong (a real ASIC whose function or seed is not published, a
kernel switch with its own random seed) the model still answers, and the answers are wrong. Nothing in one
flow says so, but a leaf's uplink counters do: every byte on a leaf's uplinks comes from flows whose sending NIC
is cabled to that leaf, which are all in this partition, so the model's predicted bytes per uplink can be checked
window by window. Each leaf group's *mismatch* (sum over members of |predicted - measured| / sum measured) is
smoothed over windows, and a placement's confidence is lowered by the mismatch of the groups it crosses, so a
wrong model shows up as low confidence and unexplained bytes instead of confident wrong paths (and the collision
rule, which needs confident placements, stays quiet).

The groups it hashes over are the live ones of the partition's leaves (``observe_groups``, from the AFT state in the
leaves' CounterBatches, which co-partitioning brings to this stage in the same window as the flows): a withdrawn
next hop leaves the group and the flows rehash over the remaining members, and a weighted group hashes over its
members replicated by weight (``Fabric.hash_path``, the simulator's rule). A switch that streams no AFT groups
keeps the topology's. Only leaves are followed: a spine's AFT is in another partition, so on a fabric with
multi-member groups past the first hop (three tiers) those hops still hash over the topology's members.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import Role
from flowtracer.stream.analytics.aft_groups import Forwarding, aft_forwarding
from flowtracer.stream.resolvers.contract import HASH_METHOD, FlowObs, Placement

MISMATCH_TOLERANCE = 0.1
"""Mismatch a correct model still shows (host and switch windows are not aligned to the byte, frame headers):
below it placements keep confidence 1."""
SMOOTHING = 0.3
"""Weight of the newest window in a group's smoothed mismatch (an exponential moving average)."""
MIN_GROUP_BYTES = 1_000_000
"""Windows in which a group's members measured fewer bytes say nothing about the model (bytes)."""


def group_mismatch(predicted: Mapping[str, float], measured: Mapping[str, int], members: Sequence[str]) -> float | None:
    """sum |predicted - measured| / sum measured over ``members`` (link ids), or None when they measured too little.

    0 when the model predicts every member's bytes; 2 at most (all bytes predicted on other members)."""
    total = sum(measured.get(m, 0) for m in members)
    if total < MIN_GROUP_BYTES or any(m not in measured for m in members):
        return None
    return sum(abs(predicted.get(m, 0.0) - measured[m]) for m in members) / total


def confidence_from_mismatch(mismatch: float) -> float:
    """1 up to the tolerance, then falling linearly to 0 at a mismatch of 1 (half the bytes misplaced)."""
    if mismatch <= MISMATCH_TOLERANCE:
        return 1.0
    return max(0.0, round(1.0 - (mismatch - MISMATCH_TOLERANCE) / (1.0 - MISMATCH_TOLERANCE), 4))


class HashResolver:
    """Predicts each flow's path as the switches would hash it, if the topology's hash models are right, with a
    confidence that falls when the leaf uplink counters contradict the predictions (module docstring).

    Paths are cached per 5-tuple (training flows live for hours), so a window costs one dict lookup per flow plus
    one pass over the leaf groups.
    """

    name: ClassVar[str] = "hash"

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self._cache: dict[tuple[str, str, str, str, int, int, int], tuple[str, ...] | None] = {}
        leaves = {s.name for s in fabric.topology.switches if s.role == Role.LEAF}
        # Leaf uplink groups: link id -> group id, and group id -> member link ids (those the check can judge).
        self.group_of_link: dict[str, str] = {}
        self.group_members: dict[str, tuple[str, ...]] = {}
        for gid, group in fabric.ecmp_groups.items():
            if group.switch in leaves:
                self.group_members[gid] = tuple(m.id for m in group.members)
                self.group_of_link.update(dict.fromkeys(self.group_members[gid], gid))
        self.mismatch: dict[str, float] = {}
        """Smoothed mismatch per leaf group id (absent: no evidence yet, trusted)."""
        self._placements: dict[tuple[tuple[str, ...], float], Placement] = {}
        self.leaves = leaves
        #: Each leaf's forwarding as its newest AFT said (absent: the topology's), and their union for hash_path.
        self.forwarding: dict[str, Forwarding] = {}
        self._down: frozenset[str] = frozenset()
        self._weights: dict[str, int] = {}

    def observe_groups(self, switch: str, groups: Sequence[Mapping[str, int]], at_ns: int = 0) -> None:
        """Follow a leaf's AFT groups (egress port -> weight, per group; ``at_ns``, the sample's time, is not needed
        here); paths are re-hashed when they change."""
        if switch not in self.leaves:
            return  # the first hop is the one this partition owns (module docstring)
        fwd = aft_forwarding(switch, groups, self.fabric)
        if self.forwarding.get(switch) == fwd:
            return
        self.forwarding[switch] = fwd
        self._down = frozenset().union(*(f.withdrawn for f in self.forwarding.values()))
        self._weights = {lid: w for f in self.forwarding.values() for lid, w in f.weights.items()}
        self._cache.clear()

    def _path(self, f: FlowObs) -> tuple[str, ...] | None:
        k = (f.src_nic, f.dst_nic, f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, f.rqpn)
        cache = self._cache
        if k not in cache:
            if len(cache) > 1_000_000:  # bound memory on churning QPs; hot flows come back at once
                cache.clear()
            headers = HeaderFields(f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, dst_qpn=f.rqpn)
            cache[k] = self.fabric.hash_path(headers, f.src_nic, f.dst_nic, down=self._down, weights=self._weights)
        return cache[k]

    def _learn(self, paths: Sequence[tuple[str, ...] | None], flows: Sequence[FlowObs],
               measured: Mapping[str, int]) -> None:
        """Fold this window's predicted-vs-measured bytes of each leaf group into its smoothed mismatch."""
        if not measured:
            return
        predicted: dict[str, float] = {}
        groups_of = self.group_of_link
        for path, f in zip(paths, flows, strict=True):
            if path is None:
                continue
            for link in path:
                if link in groups_of:
                    predicted[link] = predicted.get(link, 0.0) + f.bytes
        for gid, members in self.group_members.items():
            m = group_mismatch(predicted, measured, members)
            if m is None:
                continue
            old = self.mismatch.get(gid)
            self.mismatch[gid] = m if old is None else (1 - SMOOTHING) * old + SMOOTHING * m

    def _placement(self, path: tuple[str, ...]) -> Placement:
        groups_of, mismatch = self.group_of_link, self.mismatch
        worst = max((mismatch.get(groups_of[link], 0.0) for link in path if link in groups_of), default=0.0)
        key = (path, confidence_from_mismatch(worst))
        hit = self._placements.get(key)
        if hit is None:
            if len(self._placements) > 1_000_000:
                self._placements.clear()
            hit = self._placements[key] = Placement.single(path, key[1], HASH_METHOD)
        return hit

    def resolve(self, window_end_ns: int, flows: Sequence[FlowObs],
                measured: Mapping[str, int]) -> list[Placement | None]:
        paths = [self._path(f) for f in flows]
        self._learn(paths, flows, measured)
        if confidence_from_mismatch(max(self.mismatch.values(), default=0.0)) == 1.0:
            # The model holds on every group (the usual case): the confidence falls with the mismatch, so no path's
            # worst group lowers it, and each placement is one lookup instead of a pass over its links.
            placements, new = self._placements, self._placement
            return [placements.get((p, 1.0)) or new(p) if p is not None else None for p in paths]
        return [self._placement(p) if p is not None else None for p in paths]

    def state(self) -> dict[str, Any]:
        return {"mismatch": dict(self.mismatch)}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.mismatch = {str(k): float(v) for k, v in dict(state.get("mismatch", {})).items()
                         if str(k) in self.group_members}
