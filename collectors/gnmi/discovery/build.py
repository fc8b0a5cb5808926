"""Discovered switch facts -> a topology file (pure: no I/O).

Rules, for a 2-tier leaf-spine fabric:

* **Switches** are the gNMI targets. An LLDP neighbor whose system name is a target (or whose first
  DNS label is) is a switch; any other neighbor is a host NIC.
* **Roles**: a switch that hears a host is a leaf; one cabled to a leaf is a spine; one cabled only
  to spines is a leaf without hosts.
* **Links**: one per cable seen from either end, ``a`` the end with the lower IPv4 address (so the
  order of the address plan in ``fabric/addressing.py`` is kept), else natural name order.
* **Speeds**: ``defaults.port_speed`` is the most common speed of switch-to-switch ports; any other
  port speed is declared under the switch's ``ports``.
* **Hosts** come from LLDP neighbors of leaf ports: system name = host, port id = netdev, port
  description = RDMA device (the netdev when empty), management address = NIC IP; and from the host
  agents' inventories (``flowtracer agent --inventory-out``): a NIC the leaf hears whose netdev or RDMA
  device the host's inventory names takes its names and address from the inventory (hosts' LLDP rarely
  carries a management address); an inventory NIC no switch hears is placed on the switch port it hears
  over LLDP itself (``switch_port``). A NIC placed by neither is left out with a warning; rail = rank
  of the NIC's leaf among the host's leaves (natural order), which is how rail-optimized fabrics are
  cabled.
* **ECMP groups** come from the AFT: each IPv4 entry's next-hop group, its next hops' egress
  ports (``interface-ref``, else the port whose subnet holds the next-hop address) and weights;
  destinations are the leaves of the host NICs the entry's prefix covers. Entries covering no NIC
  and a switch's own leaf are left out. A switch whose platform cannot give its AFT routes (``aft``
  False: any non-OpenConfig profile, since none maps ``ipv4-entry``) gets the groups its learnt links
  imply (equal weights, the rule of a topology without ``ecmp_groups``, ``fabric/routing.py``);
  ``Discovered.derived`` names those switches.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowtracer.collectors.gnmi.discovery.facts import Neighbor, SwitchFacts
from flowtracer.fabric.host_inventory import HostInventory, InventoryNic
from flowtracer.fabric.routing import Fabric, natural_key
from flowtracer.fabric.topology import Topology, validate_topology


@dataclass(frozen=True)
class Discovered:
    """The built topology and what could not be explained, one line each."""

    topology: Topology
    warnings: tuple[str, ...]
    #: Switches whose ECMP groups were derived from the links, not read from their AFT.
    derived: tuple[str, ...] = ()


def _nat(s: str) -> tuple[object, ...]:
    return natural_key(s)


def _ip_key(addr: str | None) -> tuple[int, int]:
    """Sort key by IPv4 address (no address sorts last)."""
    if not addr:
        return (1, 0)
    return (0, int(ipaddress.ip_interface(addr).ip))


def build_topology(facts: Sequence[SwitchFacts], endpoints: Mapping[str, Mapping[str, Any]],
                   name: str = "fabric", inventories: Sequence[HostInventory] = ()) -> Discovered:
    """Build and validate the topology of ``facts``; ``endpoints``: switch -> its ``gnmi`` mapping;
    ``inventories``: the host agents' own (``fabric/host_inventory.py``)."""
    warnings: list[str] = [p for f in facts for p in f.problems]
    by_name = {f.name: f for f in facts}
    labels = {n.split(".", 1)[0]: n for n in by_name}

    def switch_of(system_name: str) -> str | None:
        if system_name in by_name:
            return system_name
        return labels.get(system_name.split(".", 1)[0])

    # -- cables and hosts as heard over LLDP ------------------------------------------------------
    cables: dict[frozenset[tuple[str, str]], None] = {}
    host_ports: list[tuple[str, str, Any]] = []  # (leaf, port, neighbor)
    for f in facts:
        for port, nb in sorted(f.neighbors.items(), key=lambda kv: _nat(kv[0])):
            peer = switch_of(nb.system_name)
            if peer is not None:
                if not nb.port_id:
                    warnings.append(f"{f.name}:{port}: LLDP neighbor {peer} sends no port id: cable left out")
                    continue
                cables[frozenset(((f.name, port), (peer, nb.port_id)))] = None
            elif nb.system_name:
                host_ports.append((f.name, port, nb))
    placed = _place_nics(host_ports, inventories, by_name, {e for c in cables for e in c}, warnings)
    leaves = {leaf for leaf, _, _, _ in placed}
    neighbors: dict[str, set[str]] = {f.name: set() for f in facts}
    for c in cables:
        (s1, _), (s2, _) = sorted(c)
        neighbors.setdefault(s1, set()).add(s2)
        neighbors.setdefault(s2, set()).add(s1)
    roles = {n: "leaf" if n in leaves or not (neighbors.get(n, set()) & leaves) else "spine" for n in by_name}

    def addr(sw: str, port: str) -> str | None:
        f = by_name.get(sw)
        return f.addresses.get(port) if f else None

    def speed(sw: str, port: str) -> int | None:
        f = by_name.get(sw)
        return f.port_speeds.get(port) if f else None

    links = []
    for c in sorted(cables, key=lambda c: min((_ip_key(addr(*e)), _nat(e[0]), _nat(e[1])) for e in c)):
        a, b = sorted(c, key=lambda e: (_ip_key(addr(*e)), _nat(e[0]), _nat(e[1])))
        links.append({"a": f"{a[0]}:{a[1]}", "b": f"{b[0]}:{b[1]}"})

    fabric_speeds = Counter(s for c in cables for e in c if (s := speed(*e)))
    default_speed = fabric_speeds.most_common(1)[0][0] if fabric_speeds else None

    # -- hosts ------------------------------------------------------------------------------------
    nics: dict[str, list[dict[str, Any]]] = {}
    for leaf, port, host, fields in sorted(placed, key=lambda h: (_ip_key(addr(h[0], h[1])), _ip_key(h[3]["ip"]),
                                                                  _nat(h[0]), _nat(h[1]))):
        nic: dict[str, Any] = {**fields, "leaf": f"{leaf}:{port}"}
        s = speed(leaf, port) or default_speed
        if s:
            nic["speed"] = s
        nics.setdefault(host, []).append(nic)
    hosts = []
    for host, host_nics in nics.items():
        host_leaves = sorted({n["leaf"].split(":", 1)[0] for n in host_nics}, key=_nat)
        for n in host_nics:
            n["rail"] = host_leaves.index(n["leaf"].split(":", 1)[0])
        hosts.append({"name": host, "nics": host_nics})

    # -- switches ---------------------------------------------------------------------------------
    switches = []
    used_ports = {e for c in cables for e in c} | {(leaf, port) for leaf, port, _, _ in placed}
    for n in sorted(by_name, key=lambda n: (roles[n] != "leaf", _nat(n))):
        sw: dict[str, Any] = {"name": n, "role": roles[n]}
        if n in endpoints:
            sw["gnmi"] = dict(endpoints[n])
        ports = {p: s for (s_name, p) in sorted(used_ports, key=lambda e: _nat(e[1])) if s_name == n
                 and (s := speed(n, p)) and s != default_speed}
        if ports:
            sw["ports"] = ports
        switches.append(sw)

    data: dict[str, Any] = {"name": name, "switches": switches, "links": links, "hosts": hosts}
    if default_speed:
        data["defaults"] = {"port_speed": default_speed}
    groups = _groups(facts, hosts, warnings)
    derived = tuple(f.name for f in sorted(facts, key=lambda f: _nat(f.name)) if not f.aft)
    if derived:
        groups = sorted(groups + _derived_groups(data, set(derived)), key=lambda g: _nat(g["switch"]))
    if groups:
        data["ecmp_groups"] = groups
    return Discovered(validate_topology(data, "discovered topology"), tuple(warnings), derived)


def _derived_groups(data: dict[str, Any], switches: set[str]) -> list[dict[str, Any]]:
    """The groups of ``switches`` as the links imply them (equal weights), for switches without AFT routes."""
    fabric = Fabric(validate_topology(data, "discovered topology"))
    return [{"switch": g.switch, "destinations": list(g.destinations),
             "members": {m.src_port: 1 for m in g.members}}
            for g in fabric.ecmp_groups.values() if g.switch in switches]


def _place_nics(host_ports: Sequence[tuple[str, str, Neighbor]], inventories: Sequence[HostInventory],
                switches: Mapping[str, SwitchFacts], cabled: set[tuple[str, str]], warnings: list[str]
                ) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(leaf, port, host, NIC fields) of every NIC placed, per the module docstring."""
    inv = {h.host: h for h in inventories}
    placed: list[tuple[str, str, str, dict[str, Any]]] = []
    taken: set[tuple[str, str, int]] = set()  # (host, rdma device, port) placed over the switch's LLDP
    for leaf, port, nb in host_ports:
        own = inv.get(nb.system_name)
        match = next((n for n in own.nics if nb.port_id in (n.netdev, n.rdma_device)
                      or (nb.port_description and nb.port_description == n.rdma_device)), None) if own else None
        if match is not None:
            taken.add((nb.system_name, match.rdma_device, match.port))
            placed.append((leaf, port, nb.system_name, _nic_fields(match)))
            continue
        try:
            ip = str(ipaddress.ip_address(nb.management_address))
        except ValueError:
            warnings.append(f"{leaf}:{port}: host {nb.system_name} advertises no usable management address "
                            f"({nb.management_address!r}) and no inventory names this NIC: NIC left out")
            continue
        placed.append((leaf, port, nb.system_name, {"rdma_device": nb.port_description or nb.port_id,
                                                    "netdev": nb.port_id or port, "ip": ip}))
    heard = {(leaf, port): nb.system_name for leaf, port, nb in host_ports}
    for h in sorted(inventories, key=lambda h: _nat(h.host)):
        for n in h.nics:
            if (h.host, n.rdma_device, n.port) in taken:
                continue
            what = f"host {h.host} {n.rdma_device} port {n.port} ({n.ip})"
            switch, _, port = n.switch_port.partition(":")
            if not port:
                warnings.append(f"{what}: no switch heard it over LLDP and it heard none: NIC left out")
            elif switch not in switches or (switch, port) in cabled:
                warnings.append(f"{what}: hears {n.switch_port}, which is not a host port of a target: NIC left out")
            elif (switch, port) in heard:
                warnings.append(f"{what}: hears {n.switch_port}, where the switch hears {heard[(switch, port)]}: "
                                "NIC left out")
            else:
                placed.append((switch, port, h.host, _nic_fields(n)))
    return placed


def _nic_fields(n: InventoryNic) -> dict[str, Any]:
    """A topology NIC's names and address as the host's agent knows them (port 1 is the topology's default)."""
    out: dict[str, Any] = {"rdma_device": n.rdma_device, "netdev": n.netdev, "ip": n.ip}
    if n.port != 1:
        out["port"] = n.port
    return out


def _groups(facts: Sequence[SwitchFacts], hosts: list[dict[str, Any]], warnings: list[str]) -> list[dict[str, Any]]:
    """ECMP groups from every switch's AFT, per the module docstring."""
    nic_leaf = {ipaddress.ip_address(n["ip"]): n["leaf"].split(":", 1)[0] for h in hosts for n in h["nics"]}
    out: list[dict[str, Any]] = []
    for f in sorted(facts, key=lambda f: _nat(f.name)):
        subnets = {ipaddress.ip_interface(a).network: p for p, a in f.addresses.items()}
        # group id -> destination leaves, in natural order
        dests: dict[int, set[str]] = {}
        for prefix, gid in f.routes.items():
            try:
                net = ipaddress.ip_network(prefix, strict=False)
            except ValueError:
                warnings.append(f"{f.name}: ipv4-entry {prefix!r} is not an IPv4 prefix")
                continue
            reached = {leaf for ip, leaf in nic_leaf.items() if ip in net} - {f.name}
            dests.setdefault(gid, set()).update(reached)
        seen: dict[str, int] = {}
        for gid in sorted(dests, key=lambda g: sorted(dests[g], key=_nat)):
            if not dests[gid]:
                continue
            members: dict[str, int] = {}
            for idx, weight in sorted(f.groups.get(gid, {}).items()):
                port = f.next_hop_port.get(idx) or _port_by_subnet(f.next_hop_ip.get(idx), subnets)
                if port is None:
                    warnings.append(f"{f.name}: next hop {idx} of group {gid} has no interface-ref and its address "
                                    f"{f.next_hop_ip.get(idx)!r} is on no port: left out")
                    continue
                members[port] = members.get(port, 0) + weight
            if not members:
                warnings.append(f"{f.name}: next-hop group {gid} has no usable member: left out")
                continue
            keep = []
            for d in sorted(dests[gid], key=_nat):
                if d in seen:
                    warnings.append(f"{f.name}: {d} is reached through groups {seen[d]} and {gid}: kept {seen[d]}")
                else:
                    seen[d] = gid
                    keep.append(d)
            if keep:
                out.append({"switch": f.name, "destinations": keep,
                            "members": dict(sorted(members.items(), key=lambda kv: _nat(kv[0])))})
    return out


def _port_by_subnet(ip: str | None, subnets: Mapping[Any, str]) -> str | None:
    if not ip:
        return None
    try:
        a = ipaddress.ip_address(ip)
    except ValueError:
        return None
    return next((p for net, p in subnets.items() if a in net), None)
