"""What the kernel fabric consists of, computed from a topology without touching the system (pure).

One network namespace per switch and per host, named ``<prefix>-<node>``; one veth pair per cable
(switch-switch and NIC-leaf). Inside a namespace a veth is named after its topology port (a host's
after the NIC's netdev) when that is a valid Linux interface name of at most 15 characters, else
``p<n>``; ``Plan.ifname`` keeps the mapping both ways.

Addressing follows ``flowtracer.fabric.addressing``: each switch-switch cable end gets its /31; a
leaf port facing a NIC gets its host-port-plan address as /32 and a /32 route to the NIC's address;
the NIC gets its topology address as /32, an onlink /32 route to its gateway (the leaf port) and a
default route via it (per-NIC policy table on multi-NIC hosts). MAC addresses are fixed per veth end
and every neighbor entry is permanent, so no ARP and (IPv6 is disabled) no ND/MLD frame ever moves
a counter: only the traffic the data plane sends crosses the veths.

Routes: on every switch, one route per destination NIC address (/32): a ``nexthop via <neighbor's
/31 address> dev <port>`` per equal-cost next hop of ``Fabric.next_hops(switch, dst_leaf, down)``,
``blackhole`` when there is none; the destination leaf routes the /32 to its host port.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from flowtracer.fabric.addressing import host_port_addresses, p2p_addresses
from flowtracer.fabric.ecmp_hash import HashMode
from flowtracer.fabric.routing import Fabric, natural_key
from flowtracer.fabric.topology import Topology

#: Linux IFNAMSIZ - 1.
IFNAME_MAX = 15
_IFNAME_OK = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")
#: Jumbo veths: a RoCEv2 frame of a 4096-byte MTU (4158 bytes) fits, as on a real RoCE fabric.
VETH_MTU = 9000
#: First table number of the per-NIC policy routing tables on multi-NIC hosts.
NIC_TABLE_BASE = 100


class PlanError(ValueError):
    """The topology cannot be built as a kernel fabric; ``str()`` is one line."""


@dataclass(frozen=True)
class VethEnd:
    """One end of a veth pair: the node and topology port it stands for, its name and MAC inside the node's netns."""

    node: str
    port: str
    ifname: str
    mac: str


@dataclass(frozen=True)
class Cable:
    """One veth pair. ``a``/``b`` follow the topology link (for a NIC: a = host, b = leaf)."""

    a: VethEnd
    b: VethEnd
    link_ids: tuple[str, str]  # directed link ids a->b, b->a (flowtracer.fabric.routing)


@dataclass
class Plan:
    """Namespaces, cables, interface names and addresses of one kernel fabric."""

    prefix: str
    topology: Topology
    fabric: Fabric
    namespaces: dict[str, str] = field(default_factory=dict)  # node -> netns name
    cables: list[Cable] = field(default_factory=list)
    ifname: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, port) -> ifname
    port_of: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, ifname) -> port
    addresses: dict[tuple[str, str], str] = field(default_factory=dict)  # (switch, port) -> IPv4
    cable_of: dict[str, Cable] = field(default_factory=dict)  # directed link id -> cable

    @property
    def switches(self) -> list[str]:
        return [s.name for s in self.topology.switches]

    @property
    def hosts(self) -> list[str]:
        return [h.name for h in self.topology.hosts]


def make_plan(topology: Topology, prefix: str) -> Plan:
    """Lay out namespaces, veths and addresses; raises PlanError (one line) on what Linux cannot hold."""
    fabric = Fabric(topology)
    plan = Plan(prefix, topology, fabric)
    for node in [*plan.switches, *plan.hosts]:
        plan.namespaces[node] = f"{prefix}-{node}"
    for s in topology.switches:
        mode = topology.hash_mode(s.name)
        if mode is not HashMode.FIVE_TUPLE:
            # Linux hashes L3/L4 headers only (fib_multipath_hash_policy): it cannot reach the BTH inside the UDP
            # payload, nor spread one flow's packets; forwarding 5-tuple instead would make the truth silently wrong.
            raise PlanError(f"switch {s.name}: hash_mode {mode.value} is not available on the kernel data plane "
                            "(Linux multipath hashes the 5-tuple only); use the model data plane or hash_mode 5tuple")
    for h in topology.hosts:
        for nic in h.nics:
            if ipaddress.ip_address(nic.ip).version != 4:
                raise PlanError(f"host {h.name} NIC {nic.rdma_device}: {nic.ip} is not IPv4 (the kernel data plane "
                                "is IPv4 only)")
    ports: dict[str, list[str]] = {}
    for dl in fabric.links.values():
        node, port = dl.src_node, dl.src_port
        ports.setdefault(node, []).append(port)
    nic_dev = {(h.name, n.rdma_device): n.netdev for h in topology.hosts for n in h.nics}
    for node, plist in ports.items():
        taken: set[str] = set()
        wanted = {p: nic_dev.get((node, p), p) for p in plist}
        for p in sorted(plist, key=natural_key):
            if _IFNAME_OK.match(wanted[p]) and wanted[p] not in taken:
                taken.add(wanted[p])
                plan.ifname[(node, p)] = wanted[p]
        n = 0
        for p in sorted(plist, key=natural_key):
            if (node, p) in plan.ifname:
                continue
            while f"p{n}" in taken or f"p{n}" in wanted.values():
                n += 1
            plan.ifname[(node, p)] = f"p{n}"
            taken.add(f"p{n}")
    plan.port_of = {(node, ifn): port for (node, port), ifn in plan.ifname.items()}
    plan.addresses = {**p2p_addresses(topology), **host_port_addresses(topology)}
    seen: set[str] = set()
    mac_n = 0
    for dl in fabric.links.values():
        if dl.id in seen:
            continue
        seen.update((dl.id, dl.reverse_id))
        ends = []
        for node, port in ((dl.src_node, dl.src_port), (dl.dst_node, dl.dst_port)):
            mac_n += 1
            ends.append(VethEnd(node, port, plan.ifname[(node, port)], _mac(mac_n)))
        cable = Cable(ends[0], ends[1], (dl.id, dl.reverse_id))
        plan.cables.append(cable)
        plan.cable_of[dl.id] = plan.cable_of[dl.reverse_id] = cable
    return plan


def _mac(n: int) -> str:
    """A locally administered unicast MAC numbered ``n`` (02:66:74 = "ft")."""
    return f"02:66:74:{(n >> 16) & 0xFF:02x}:{(n >> 8) & 0xFF:02x}:{n & 0xFF:02x}"


# -- ip -batch lines ------------------------------------------------------------------------------

def netns_add_lines(plan: Plan) -> list[str]:
    """``ip -batch`` lines (root namespace) that create every namespace."""
    return [f"netns add {ns}" for ns in plan.namespaces.values()]


def veth_lines(plan: Plan) -> list[str]:
    """``ip -batch`` lines (root namespace) that create every veth pair directly inside its two namespaces."""
    out = []
    for c in plan.cables:
        out.append(f"link add {c.a.ifname} netns {plan.namespaces[c.a.node]} address {c.a.mac} mtu {VETH_MTU} "
                   f"type veth peer name {c.b.ifname} netns {plan.namespaces[c.b.node]} address {c.b.mac} "
                   f"mtu {VETH_MTU}")
    return out


def sysctls(plan: Plan, node: str, seed: int | None, icmp: dict[str, int]) -> dict[str, str]:
    """Sysctls of one namespace (set before its interfaces exist, so ``default`` reaches them).

    Switches forward with a multipath hash of the five-tuple (policy 3, fields 0x37) and a private ``seed``,
    answer errors from the ingress port's address and skip next hops whose link is down; hosts do not forward. ``icmp``:
    icmp_ratelimit (ms), icmp_msgs_per_sec, icmp_msgs_burst.
    """
    out = {
        "net/ipv6/conf/all/disable_ipv6": "1",
        "net/ipv6/conf/default/disable_ipv6": "1",
        "net/ipv4/conf/all/rp_filter": "0",
        "net/ipv4/conf/default/rp_filter": "0",
        "net/ipv4/ip_forward": "0",
    }
    if node in plan.fabric.switch_names:
        out.update({
            "net/ipv4/ip_forward": "1",
            # Policy 3 (custom fields) hashes the headers of every packet. Policy 1 would reuse a locally
            # sent packet's socket hash (skb->hash, random per socket, kept across veths), so two sockets of
            # one 5-tuple (traffic and a path probe) could take different members: no switch ASIC does that.
            "net/ipv4/fib_multipath_hash_policy": "3",
            "net/ipv4/fib_multipath_hash_fields": "0x0037",  # src/dst IP, IP protocol, src/dst L4 port
            "net/ipv4/fib_multipath_hash_seed": str(seed or 0),
            "net/ipv4/icmp_errors_use_inbound_ifaddr": "1",
            "net/ipv4/conf/all/ignore_routes_with_linkdown": "1",
            "net/ipv4/conf/default/ignore_routes_with_linkdown": "1",
            "net/ipv4/icmp_ratelimit": str(icmp["icmp_ratelimit"]),
            "net/ipv4/icmp_msgs_per_sec": str(icmp["icmp_msgs_per_sec"]),
            "net/ipv4/icmp_msgs_burst": str(icmp["icmp_msgs_burst"]),
        })
    return out


def node_lines(plan: Plan, node: str) -> list[str]:
    """``ip -batch`` lines run inside ``node``'s namespace: addresses, links up, permanent neighbors,
    host routes (switch routes come from ``route_lines``)."""
    out = ["link set lo up"]
    is_switch = node in plan.fabric.switch_names
    for c in plan.cables:
        for me, peer in ((c.a, c.b), (c.b, c.a)):
            if me.node != node:
                continue
            alias = f"{plan.prefix} {me.node}:{me.port}"
            out.append(f'link set dev {me.ifname} alias "{alias}" up')
            if is_switch and peer.node in plan.fabric.switch_names:  # switch-switch /31
                mine, theirs = plan.addresses[(me.node, me.port)], plan.addresses[(peer.node, peer.port)]
                out.append(f"addr add {mine}/31 dev {me.ifname}")
                out.append(f"neigh replace {theirs} lladdr {peer.mac} dev {me.ifname} nud permanent")
            elif is_switch:  # leaf port facing a NIC
                gw = plan.addresses[(me.node, me.port)]
                nic_ip = plan.fabric.nics[f"{peer.node}:{peer.port}"].nic.ip
                out.append(f"addr add {gw}/32 dev {me.ifname}")
                out.append(f"neigh replace {nic_ip} lladdr {peer.mac} dev {me.ifname} nud permanent")
            else:  # host NIC
                ref = plan.fabric.nics[f"{me.node}:{me.port}"]
                gw = plan.addresses[(peer.node, peer.port)]
                out.append(f"addr add {ref.nic.ip}/32 dev {me.ifname}")
                out.append(f"route add {gw}/32 dev {me.ifname} scope link")
                out.append(f"neigh replace {gw} lladdr {peer.mac} dev {me.ifname} nud permanent")
    if not is_switch:
        host = next(h for h in plan.topology.hosts if h.name == node)
        for i, nic in enumerate(host.nics):
            ref = plan.fabric.nics[f"{node}:{nic.rdma_device}"]
            dev = plan.ifname[(node, nic.rdma_device)]
            gw = plan.addresses[(ref.leaf, ref.leaf_port)]
            table = NIC_TABLE_BASE + i
            if i == 0:
                out.append(f"route add default via {gw} dev {dev} onlink")
            out.append(f"route add default via {gw} dev {dev} onlink table {table}")
            out.append(f"rule add from {nic.ip} lookup {table} pref {1000 + i}")
    return out


def route_lines(plan: Plan, switch: str, down: frozenset[str] = frozenset(), verb: str = "add") -> list[str]:
    """Routes of one switch to every NIC address (``verb``: add, or replace after a link change)."""
    out = []
    fabric = plan.fabric
    for ref in fabric.nics.values():
        if ref.leaf == switch:
            dev = plan.ifname[(switch, ref.leaf_port)]
            out.append(f"route {verb} {ref.nic.ip}/32 dev {dev} scope link")
            continue
        hops = fabric.next_hops(switch, ref.leaf, down)
        if not hops:
            out.append(f"route {verb} blackhole {ref.nic.ip}/32")
            continue
        nh = " ".join(f"nexthop via {plan.addresses[(h.dst_node, h.dst_port)]} dev {plan.ifname[(switch, h.src_port)]}"
                      for h in hops)
        out.append(f"route {verb} {ref.nic.ip}/32 {nh}")
    return out
