"""A spread flow's share of each equal-cost path, estimated from the counters (pure).

A switch that sprays or routes adaptively deals one flow's packets over a group's members; no trace can say how
many went where (each probe sees one member), and a flow record says nothing about it either. The counters do:
where a switch spreads, its members' bytes are the sum of what it dealt. So a spread flow is given, at each hop
where its equal-cost paths branch, each branch's share of the bytes the counters measured on the branches (the
``residual``: what flows placed on one path do not explain), and a path's share is the product of its branches'
shares. Round robin makes the members' shares equal and so does this estimate; least-loaded spreading balances
the members' total bytes, which the estimate follows. What the counters cannot give is one flow's split apart
from the other spread flows' through the same switch: the estimate gives every one of them the aggregate's split.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Path = tuple[str, ...]


def spread_shares(paths: Sequence[Path], residual: Mapping[str, float]) -> tuple[float, ...]:
    """Share (0..1, summing to 1) of a spread flow's bytes on each of ``paths`` (its equal-cost paths, directed
    link ids from NIC to NIC). At each branching hop the branches share by their ``residual`` bytes (bytes per
    link in the window); where a branch's link is not measured, or none carried bytes, equally."""
    if not paths:
        return ()
    shares = [1.0] * len(paths)

    def split(members: list[int], pos: int) -> None:
        by_link: dict[str, list[int]] = {}
        for i in members:
            if pos < len(paths[i]) - 1:
                by_link.setdefault(paths[i][pos], []).append(i)
        if not by_link:
            return
        if len(by_link) > 1:
            measured = [residual.get(lid) for lid in by_link]
            total = sum(m for m in measured if m is not None)
            for (_lid, idx), m in zip(by_link.items(), measured, strict=True):
                f = (max(0.0, m) / total) if total > 0 and all(v is not None for v in measured) else 1 / len(by_link)
                for i in idx:
                    shares[i] *= f
        for idx in by_link.values():
            split(idx, pos + 1)

    split(list(range(len(paths))), 1)
    return tuple(shares)
