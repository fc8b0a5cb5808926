"""Routing facts of a (src NIC, dst NIC) pair for the ``infer`` resolver: its ECMP group, and the full
paths behind each member, turned into placements (cached)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from flowtracer.stream.resolvers.contract import Placement

Path = tuple[str, ...]


@dataclass(frozen=True)
class PairRoutes:
    """Routing facts of a (src NIC, dst NIC) pair: its group and the full paths behind each member."""

    gid: str | None
    members: tuple[str, ...]  # the group's member link ids, in member order
    member_paths: tuple[tuple[Path, ...], ...]  # per member index (empty tuple when no group)
    fixed: Placement | None  # the placement when no group decides (same leaf, single next hop)
    cache: dict[tuple[int, float], Placement] = field(default_factory=dict, compare=False)

    def place(self, weights: Sequence[float], confidence: float) -> Placement | None:
        """Spread member weights over the full paths behind each member (evenly over continuations).

        ``confidence`` is the member-level confidence; the placement's is that of its heaviest path.
        """
        ws = [w if ps else 0.0 for w, ps in zip(weights, self.member_paths, strict=True)]
        total = sum(ws)
        if total <= 0:
            return None
        paths: list[tuple[Path, float]] = []
        for w, ps in zip(ws, self.member_paths, strict=True):
            if w > 0:
                share = w / total / len(ps)
                paths.extend((p, share) for p in ps)
        top = max(range(len(ws)), key=ws.__getitem__)
        return Placement(tuple(paths), round(confidence / len(self.member_paths[top]), 4), "infer")

    def place_anywhere(self) -> Placement | None:
        """Evenly over every member: what a flow without evidence gets; cached."""
        key = (-1, 0.0)
        if key not in self.cache:
            m = len(self.member_paths)
            placed = self.place([1.0 / m] * m, 1.0 / m)
            if placed is None:
                return None
            self.cache[key] = placed
        return self.cache[key]

    def place_on(self, member: int, confidence: float) -> Placement | None:
        """All weight on one member; cached, since settled flows repeat it every window."""
        key = (member, round(confidence, 2))
        hit = self.cache.get(key)
        if hit is None:
            ps = self.member_paths[member]
            if not ps:
                return None
            share = 1.0 / len(ps)
            if len(self.cache) > 4 * len(self.member_paths) * 101:
                self.cache.clear()
            hit = self.cache[key] = Placement(tuple((p, share) for p in ps), round(key[1] * share, 4), "infer")
        return hit
