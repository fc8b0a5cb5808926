"""Which switches' ECMP groups changed, from the processor's ecmp-groups records (pure).

The processor publishes each switch's live ECMP groups (``flowtracer.ecmp-groups.v1``, compacted, key switch;
docs/schemas.md, EcmpGroups) when they change, and once per switch after it starts. A record whose groups (ids,
member links, weights) differ from the switch's previous record means flows through that switch may have moved: the
agent re-traces them (``Tracer.link_changed``). The first record of a switch is a baseline (this agent's traces
started after it), and an unchanged record (a processor restart, or the group source going from the AFT to the
topology with the same members) is no change.
"""

from __future__ import annotations

from flowtracer.schemas.v1 import analytics_pb2

Signature = tuple[tuple[str, tuple[str, ...], tuple[int, ...]], ...]


def signature(rec: analytics_pb2.EcmpGroups) -> Signature:
    """What can move a flow in ``rec``: each group's id, member links and weights, groups sorted by id."""
    return tuple(sorted((g.group, tuple(g.links), tuple(g.weights)) for g in rec.groups))


class GroupChanges:
    """Each switch's last seen groups; ``offer`` says whether a record changes them."""

    def __init__(self) -> None:
        self.seen: dict[str, Signature] = {}
        self.changes = 0  # records that changed a switch's groups (cumulative)

    def offer(self, value: bytes) -> str | None:
        """Take one record's bytes; the switch whose groups it changed, or None (first seen, unchanged, or not an
        EcmpGroups record: undecodable records are ignored, the processor's own topic is not this reader's to judge).
        """
        try:
            rec = analytics_pb2.EcmpGroups.FromString(value)
        except Exception:
            return None
        if not rec.switch:
            return None
        sig = signature(rec)
        old = self.seen.get(rec.switch)
        self.seen[rec.switch] = sig
        if old is None or old == sig:
            return None
        self.changes += 1
        return rec.switch
