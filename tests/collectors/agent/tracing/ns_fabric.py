"""A tiny leaf-spine data plane of Linux network namespaces for the kernel-transport tests.

One namespace per switch and per host, named ``<run prefix>-<node>`` (a random prefix per run),
veth cables named after the topology's ports, addresses from ``flowtracer.fabric.addressing``,
multipath routes hashing the 5-tuple with a random hash seed per switch,
ICMP errors from the ingress port's address.

Hash policy: ``fib_multipath_hash_policy=1`` (L4) short-circuits to ``skb->hash`` when the packet
already carries an L4 hash, and a packet sent by a local socket carries the socket's random
``sk_txhash``, which a veth into the next namespace keeps: with policy 1 every switch would hash
the sending socket's random number, not the headers (probe and traffic of one 5-tuple would
part ways). Policy 3 (custom) with fields src/dst IP, protocol, src/dst port hashes the headers
themselves, as a switch ASIC does. ``hash_policy=1`` is kept for showing the difference. ``close()`` deletes exactly the namespaces it made.
"""

from __future__ import annotations

import random
import re
import secrets
import subprocess

from flowtracer.fabric.addressing import host_port_addresses, p2p_addresses
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import Topology


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


class NsFabric:
    def __init__(self, topology: Topology, icmp_ratelimit_ms: int = 0, icmp_msgs_burst: int = 10_000,
                 hash_policy: int = 3) -> None:
        self.topology = topology
        self.fabric = Fabric(topology)
        self.prefix = "ft" + secrets.token_hex(3)
        self.made: list[str] = []
        self.peer: dict[tuple[str, str], tuple[str, str]] = {}
        self.ratelimit = (icmp_ratelimit_ms, icmp_msgs_burst)
        self.hash_policy = hash_policy

    def ns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def build(self) -> NsFabric:
        topo = self.topology
        switches = [s.name for s in topo.switches]
        for node in switches + [h.name for h in topo.hosts]:
            sh("ip", "netns", "add", self.ns(node))
            self.made.append(self.ns(node))
            sh("ip", "-n", self.ns(node), "link", "set", "lo", "up")
        for sw in switches:
            self.sysctl(sw, {"net.ipv4.ip_forward": 1, "net.ipv4.fib_multipath_hash_policy": self.hash_policy,
                             "net.ipv4.fib_multipath_hash_fields": 0x37,
                             "net.ipv4.fib_multipath_hash_seed": random.getrandbits(32),
                             "net.ipv4.icmp_errors_use_inbound_ifaddr": 1, "net.ipv4.conf.all.rp_filter": 0,
                             "net.ipv4.conf.default.rp_filter": 0,
                             "net.ipv4.conf.all.ignore_routes_with_linkdown": 1,
                             "net.ipv4.conf.default.ignore_routes_with_linkdown": 1})
            self.set_icmp_limits(sw, *self.ratelimit)
        p2p = p2p_addresses(topo)
        for link in topo.links:
            a, b = (tuple(x.split(":", 1)) for x in (link.a, link.b))
            self.peer[a], self.peer[b] = b, a
            sh("ip", "-n", self.ns(a[0]), "link", "add", a[1], "type", "veth", "peer", "name", b[1], "netns",
               self.ns(b[0]))
            for n, p in (a, b):
                sh("ip", "-n", self.ns(n), "addr", "add", f"{p2p[(n, p)]}/31", "dev", p)
                sh("ip", "-n", self.ns(n), "link", "set", p, "up")
        gw = host_port_addresses(topo)
        for h in topo.hosts:
            for nic in h.nics:
                leaf, port = nic.leaf.split(":", 1)
                self.peer[(h.name, nic.netdev)], self.peer[(leaf, port)] = (leaf, port), (h.name, nic.netdev)
                sh("ip", "-n", self.ns(h.name), "link", "add", nic.netdev, "type", "veth", "peer", "name", port,
                   "netns", self.ns(leaf))
                sh("ip", "-n", self.ns(leaf), "addr", "add", f"{gw[(leaf, port)]}/32", "dev", port)
                sh("ip", "-n", self.ns(leaf), "link", "set", port, "up")
                sh("ip", "-n", self.ns(leaf), "route", "add", f"{nic.ip}/32", "dev", port)
                hn = self.ns(h.name)
                sh("ip", "-n", hn, "addr", "add", f"{nic.ip}/32", "dev", nic.netdev)
                sh("ip", "-n", hn, "link", "set", nic.netdev, "up")
                sh("ip", "-n", hn, "route", "add", f"{gw[(leaf, port)]}/32", "dev", nic.netdev)
                sh("ip", "-n", hn, "route", "add", "default", "via", gw[(leaf, port)], "dev", nic.netdev, "src",
                   nic.ip)
        for sw in switches:
            for ref in self.fabric.nics.values():
                if ref.leaf == sw:
                    continue
                hops = self.fabric.next_hops(sw, ref.leaf)
                cmd = ["ip", "-n", self.ns(sw), "route", "add", f"{ref.nic.ip}/32"]
                for hop in hops:
                    cmd += ["nexthop", "via", p2p[(hop.dst_node, hop.dst_port)], "dev", hop.src_port]
                sh(*cmd)
        return self

    def sysctl(self, node: str, values: dict[str, int]) -> None:
        sh("ip", "netns", "exec", self.ns(node), "sysctl", "-q", "-w", *(f"{k}={v}" for k, v in values.items()))

    def set_icmp_limits(self, sw: str, ratelimit_ms: int, burst: int) -> None:
        self.sysctl(sw, {"net.ipv4.icmp_ratelimit": ratelimit_ms, "net.ipv4.icmp_msgs_burst": burst,
                         "net.ipv4.icmp_msgs_per_sec": max(burst, 1000 if ratelimit_ms else 100_000)})

    def kernel_path(self, src_host: str, src_ip: str, dst_ip: str, sport: int,
                    dport: int = 4791) -> list[tuple[str, str]]:
        """``(switch, ingress port)`` per hop as the kernels choose (``ip route get`` at each switch)."""
        nic = next(n for h in self.topology.hosts if h.name == src_host for n in h.nics if n.ip == src_ip)
        at = self.peer[(src_host, nic.netdev)]
        out = []
        for _ in range(8):
            out.append(at)
            r = sh("ip", "-n", self.ns(at[0]), "route", "get", dst_ip, "from", src_ip, "iif", at[1], "ipproto", "udp",
                   "sport", str(sport), "dport", str(dport))
            dev = re.search(r"\bdev (\S+)", r)
            assert dev, r
            nxt = self.peer[(at[0], dev.group(1))]
            if nxt[0] not in self.fabric.switch_names:
                return out
            at = nxt
        raise AssertionError("no path")

    def close(self) -> None:
        for name in reversed(self.made):
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
        self.made.clear()
