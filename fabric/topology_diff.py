"""Every difference between two topologies, one line each (``flowtracer topology diff``).

What is compared is the fabric, not how it is reached: switches and their roles, cables and their
speeds, hosts and their NICs (device, netdev, IP, rail, leaf port, speed), and the ECMP routes:
for each switch and destination leaf, the egress ports and their weights. gNMI endpoints, TLS,
credentials and ECMP hash settings are not compared (discovery cannot see the hash).

ECMP routes come from a file's ``ecmp_groups`` when it has any (what discovery read from the AFT),
else from its links (shortest paths, every member weight 1). A route with a single next hop is not
an ECMP group: one that only one side lists is not a difference (a derived topology lists the
single-path routes a discovered one leaves out), but a group that shrank to one member is.
Lines are sorted; a recabled port is one line naming both far ends, not a removal and an addition.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from flowtracer.fabric.routing import Fabric, natural_key
from flowtracer.fabric.speeds import format_speed
from flowtracer.fabric.topology import Nic, Topology

Route = dict[str, int]
"""Egress port -> weight of one switch toward one destination leaf."""


def ecmp_routes(topology: Topology) -> dict[tuple[str, str], Route]:
    """(switch, destination leaf) -> its egress ports and weights, as explained in the module docstring."""
    if topology.ecmp_groups:
        return {(g.switch, dst): dict(g.members) for g in topology.ecmp_groups for dst in g.destinations}
    fabric = Fabric(topology)
    out: dict[tuple[str, str], Route] = {}
    for sw in sorted(fabric.switch_names, key=natural_key):
        for dst in fabric.leaves:
            if dst != sw:
                members = fabric.next_hops(sw, dst)
                if members:
                    out[(sw, dst)] = {m.src_port: 1 for m in members}
    return out


def _cables(topology: Topology) -> dict[frozenset[str], int]:
    """Each switch-to-switch cable (its two ``switch:port`` ends) -> speed in bit/s."""
    fabric = Fabric(topology)
    return {frozenset((f"{d.src_node}:{d.src_port}", f"{d.dst_node}:{d.dst_port}")): d.speed_bps
            for d in fabric.switch_links()}


def _name(cable: frozenset[str]) -> str:
    return " - ".join(sorted(cable, key=natural_key))


def _link_lines(a: Topology, b: Topology) -> Iterable[str]:
    ca, cb = _cables(a), _cables(b)
    gone = [c for c in ca if c not in cb]
    new = [c for c in cb if c not in ca]
    paired: set[frozenset[str]] = set()
    for c in gone:
        for d in new:
            common = c & d
            if len(common) == 1 and d not in paired:
                (end,) = common
                (was,) = c - common
                (now,) = d - common
                yield f"link {end}: cabled to {was} in A, to {now} in B"
                paired.update((c, d))
                break
    for c in gone:
        if c not in paired:
            yield f"link {_name(c)}: only in A"
    for d in new:
        if d not in paired:
            yield f"link {_name(d)}: only in B"
    for c in ca.keys() & cb.keys():
        if ca[c] != cb[c]:
            yield f"link {_name(c)}: speed {format_speed(ca[c])} in A, {format_speed(cb[c])} in B"


def _nic_fields(nic: Nic) -> dict[str, str]:
    return {"netdev": nic.netdev, "ip": nic.ip, "rail": str(nic.rail), "leaf": nic.leaf,
            "speed": format_speed(nic.speed)}


def _host_lines(a: Topology, b: Topology) -> Iterable[str]:
    ha, hb = {h.name: h for h in a.hosts}, {h.name: h for h in b.hosts}
    for name in ha.keys() - hb.keys():
        yield f"host {name}: only in A"
    for name in hb.keys() - ha.keys():
        yield f"host {name}: only in B"
    for name in ha.keys() & hb.keys():
        na = {(n.rdma_device, n.port): n for n in ha[name].nics}
        nb = {(n.rdma_device, n.port): n for n in hb[name].nics}
        for key in na.keys() - nb.keys():
            yield f"host {name} NIC {key[0]} port {key[1]}: only in A"
        for key in nb.keys() - na.keys():
            yield f"host {name} NIC {key[0]} port {key[1]}: only in B"
        for key in na.keys() & nb.keys():
            fa, fb = _nic_fields(na[key]), _nic_fields(nb[key])
            for f in fa:
                if fa[f] != fb[f]:
                    yield f"host {name} NIC {key[0]} port {key[1]}: {f} {fa[f]} in A, {fb[f]} in B"


def _ecmp_lines(a: Topology, b: Topology) -> Iterable[str]:
    ra, rb = ecmp_routes(a), ecmp_routes(b)
    # (switch, what differs) -> destination leaves, so a change that hits many destinations is one line.
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for key in sorted(ra.keys() | rb.keys(), key=lambda k: (natural_key(k[0]), natural_key(k[1]))):
        sw, dst = key
        ma, mb = ra.get(key), rb.get(key)
        if ma is None or mb is None:
            only = mb if ma is None else ma
            if only is not None and len(only) > 1:
                side = "B" if ma is None else "A"
                found[(sw, f"group of {', '.join(sorted(only, key=natural_key))} only in {side}")].append(dst)
            continue
        for port in sorted(ma.keys() | mb.keys(), key=natural_key):
            if port not in mb:
                found[(sw, f"next hop {port} only in A")].append(dst)
            elif port not in ma:
                found[(sw, f"next hop {port} only in B")].append(dst)
            elif ma[port] != mb[port]:
                found[(sw, f"next hop {port} weight {ma[port]} in A, {mb[port]} in B")].append(dst)
    for (sw, what), dsts in found.items():
        yield f"ecmp {sw} toward {', '.join(dsts)}: {what}"


def diff_topologies(a: Topology, b: Topology) -> list[str]:
    """Every difference between ``a`` and ``b`` (A and B in the lines), sorted; empty when they agree."""
    lines: list[str] = []
    sa, sb = {s.name: s for s in a.switches}, {s.name: s for s in b.switches}
    lines += [f"switch {n}: only in A" for n in sa.keys() - sb.keys()]
    lines += [f"switch {n}: only in B" for n in sb.keys() - sa.keys()]
    lines += [f"switch {n}: role {sa[n].role.value} in A, {sb[n].role.value} in B"
              for n in sa.keys() & sb.keys() if sa[n].role is not sb[n].role]
    lines += _link_lines(a, b)
    lines += _host_lines(a, b)
    lines += _ecmp_lines(a, b)
    return sorted(lines, key=natural_key)
