"""A PathTrace -> the equal-cost path it pins, or why it pins none (pure).

A trace lists, per TTL, the switch that answered and the port the probe came in on (its ingress
port, fabric/addressing.py). The first hop is the source leaf's port facing the sending NIC, so its
(switch, port) names the NIC's uplink; every later hop's (switch, port) names the link the flow
crossed to reach that switch. A path as ``Placement`` and ``Fabric.equal_cost_paths`` spell it is
the tuple of directed link ids from the sending NIC to the receiving NIC, so hop ``k`` (TTL k+1)
must match the path's link ``k``; the last link (destination leaf -> NIC) is fixed by the receiver.

A trace pins a path when exactly one equal-cost path of (source NIC, destination NIC) agrees with
every hop that answered: a COMPLETE trace always does (or it is inconsistent with the topology), a
PARTIAL one does when the hops that answered leave one path (for example, only the leaf's answer was
lost). FAILED traces, and PARTIAL ones that fit two or more paths, pin none.

A trace whose hops each lie on some equal-cost path but on no one path together (TTL 2 entered spine01, TTL 3
came to the destination leaf from spine02) saw the probes of one 5-tuple go different ways: a switch on the way
spreads packets (sprays, or routes adaptively), so the flow has no one path. It pins none and says so
(``TracedPath.spread``), naming the switch where the probes parted (``spreader``: the last switch the paths they
took have in common).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from flowtracer.fabric.routing import Fabric
from flowtracer.schemas.v1 import traces_pb2

Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TracedPath:
    """What one trace says about its flow: the 5-tuple traced, when, and the path or why there is none."""

    src_nic: str
    dst_nic: str  # topology NIC with the trace's dst_ip; "" when unknown
    five_tuple: tuple[str, str, int, int]  # src_ip, dst_ip, udp_src_port, udp_dst_port
    finished_ns: int  # ns since the epoch
    path: Path | None
    why: str  # why ``path`` is None ("" when it is set)
    valid_until_ns: int = 0  # the agent's ``valid_until_ns`` (ns since the epoch); 0: not stamped (older agents)
    spread: bool = False  # its probes went different ways: the flow has no one path (see the module docstring)
    spreader: str = ""  # where they parted: the switch that dealt probes of one 5-tuple to different members

    def to_json(self) -> list[object]:
        return [self.src_nic, self.dst_nic, *self.five_tuple, self.finished_ns,
                list(self.path) if self.path is not None else None, self.why, self.valid_until_ns, self.spread]

    @classmethod
    def from_json(cls, v: list[object]) -> TracedPath:
        """From ``to_json``; a state saved before ``valid_until_ns`` existed (9 items) reads as not stamped, one
        before ``spread`` (10 items) as not spread."""
        src, dst, sip, dip, sport, dport, fin, path, why, *rest = v
        until = int(rest[0]) if rest else 0  # type: ignore[call-overload]
        return cls(str(src), str(dst), (str(sip), str(dip), int(sport), int(dport)),  # type: ignore[call-overload]
                   int(fin), tuple(path) if path is not None else None, str(why),  # type: ignore[arg-type, call-overload]
                   until, bool(rest[1]) if len(rest) > 1 else False)


def ingress_index(fabric: Fabric) -> dict[tuple[str, str], str]:
    """(switch, ingress port) -> the directed link id that enters the switch on that port."""
    return {(lk.dst_node, lk.dst_port): lid for lid, lk in fabric.links.items() if lk.dst_node in fabric.switch_names}


def parting_switch(fabric: Fabric, candidates: tuple[Path, ...], known: Mapping[int, str]) -> str:
    """The switch where probes whose hops (``known``: path position -> link) fit no one path went different ways:
    the end of the longest prefix shared by a path that fits the earlier hops and one that fits a later hop the
    earlier ones exclude; "" when none is found."""
    order = sorted(known)
    fits = list(candidates)
    for pos in order:
        rest = [p for p in fits if pos < len(p) - 1 and p[pos] == known[pos]]
        if not rest:
            later = [p for p in candidates if pos < len(p) - 1 and p[pos] == known[pos]]
            common, a = max(((next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), 0), a)
                             for a in fits for b in later), default=(0, ()))
            return fabric.links[a[common]].src_node if 0 < common < len(a) else ""
        fits = rest
    return ""


def traced_path(fabric: Fabric, ingress: Mapping[tuple[str, str], str], trace: traces_pb2.PathTrace,
                candidates: tuple[Path, ...] | None = None) -> TracedPath:
    """The path ``trace`` pins among the equal-cost paths of its NICs (``candidates``, when already known)."""
    src = fabric.nics.get(trace.src_nic)
    dst = fabric.nic_by_ip.get(trace.dst_ip)
    five = (trace.src_ip, trace.dst_ip, trace.udp_src_port, trace.udp_dst_port)

    def none(why: str) -> TracedPath:
        return TracedPath(trace.src_nic, dst.name if dst is not None else "", five, trace.finished_ns, None, why,
                          trace.valid_until_ns)

    if src is None or dst is None:
        return none(f"unknown NIC: src_nic {trace.src_nic!r} / dst_ip {trace.dst_ip!r} not in the topology")
    if trace.status == traces_pb2.TRACE_STATUS_FAILED:
        return none("failed trace")
    if trace.status not in (traces_pb2.TRACE_STATUS_COMPLETE, traces_pb2.TRACE_STATUS_PARTIAL):
        return none("trace without a status")
    if candidates is None:
        candidates = fabric.equal_cost_paths(src.name, dst.name)
    if not candidates:
        return none(f"no path from {src.name} to {dst.name}")
    known: dict[int, str] = {}
    for n, hop in enumerate(trace.hops):
        if not hop.switch or hop.address == trace.dst_ip:
            continue  # unanswered, or the destination itself (port unreachable): no switch hop
        pos = (hop.ttl or n + 1) - 1
        link = ingress.get((hop.switch, hop.port))
        if link is None:
            return none(f"inconsistent: hop ttl {pos + 1} ({hop.switch}, {hop.port}) is no link's ingress port")
        known[pos] = link
    fits = [p for p in candidates if all(pos < len(p) - 1 and p[pos] == lk for pos, lk in known.items())]
    if not fits and all(any(pos < len(p) - 1 and p[pos] == lk for p in candidates) for pos, lk in known.items()):
        return TracedPath(src.name, dst.name, five, trace.finished_ns, None,
                          "spread: its probes took different equal-cost paths", trace.valid_until_ns, True,
                          parting_switch(fabric, candidates, known))
    if not fits:
        return none(f"inconsistent: no equal-cost path from {src.name} to {dst.name} crosses the traced hops")
    if len(fits) > 1:
        return none(f"partial: {len(fits)} equal-cost paths fit the hops that answered")
    return TracedPath(src.name, dst.name, five, trace.finished_ns, fits[0], "", trace.valid_until_ns)
