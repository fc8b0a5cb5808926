"""Generate 2-tier leaf-spine fabrics, plain or rail-optimized, of any size.

Plain: every NIC of a host is cabled to the same leaf; hosts fill leaves in order.
Rail-optimized (the usual GPU cluster build): NIC k of every host is on rail k; each rail has its
own leaves (``leaves`` must be a multiple of ``rails``), so a ring that stays on a rail crosses
one leaf or one leaf-spine-leaf hop. Every leaf connects to every spine with ``parallel_links``
cables. Port names: leaves ``Ethernet1..`` down to hosts then up to spines; spines
``Ethernet1..`` in leaf order. NIC k is ``mlx5_k`` / ``ens{k+1}f0np0`` with IP
``10.<k>.<host // 250>.<host % 250 + 1>``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowtracer.fabric.ecmp_hash import HashAlgorithm
from flowtracer.fabric.topology import Topology, TopologyError, validate_topology


@dataclass(frozen=True)
class FabricSpec:
    """What to build. Speeds in bit/s."""

    hosts: int
    nics_per_host: int = 1
    leaves: int = 2
    spines: int = 2
    parallel_links: int = 1
    rails: int = 1
    link_speed_bps: int = 400_000_000_000
    host_speed_bps: int = 400_000_000_000
    name: str = "fabric"
    gnmi_address: str = "127.0.0.1"
    gnmi_base_port: int = 57400
    hash_algorithm: HashAlgorithm = HashAlgorithm.CRC16_CCITT
    hash_seed: int = 0

    def check(self) -> None:
        """Raise ``TopologyError`` naming the first parameter that cannot build a fabric."""
        for name in ("hosts", "nics_per_host", "leaves", "spines", "parallel_links", "rails"):
            if getattr(self, name) < 1:
                raise TopologyError(f"--{name.replace('_', '-')} must be at least 1")
        if self.rails > 1 and self.nics_per_host % self.rails:
            raise TopologyError(
                f"--nics-per-host {self.nics_per_host} is not a multiple of --rails {self.rails}")
        if self.leaves % self.rails:
            raise TopologyError(f"--leaves {self.leaves} is not a multiple of --rails {self.rails}")
        if self.hosts > 250 * 256:
            raise TopologyError(f"--hosts {self.hosts}: at most {250 * 256} hosts fit the address plan")
        if self.gnmi_base_port + self.leaves + self.spines > 65535:
            raise TopologyError("--gnmi-base-port too high for this many switches")


def generate(spec: FabricSpec) -> Topology:
    """Build and validate the topology described by ``spec``."""
    spec.check()
    leaves_per_rail = spec.leaves // spec.rails
    hosts_per_leaf = math.ceil(spec.hosts / leaves_per_rail)
    nics_per_rail = spec.nics_per_host // spec.rails
    width = max(2, len(str(spec.leaves)), len(str(spec.spines)))
    leaf_names = [f"leaf{i + 1:0{width}d}" for i in range(spec.leaves)]
    spine_names = [f"spine{i + 1:0{width}d}" for i in range(spec.spines)]
    hwidth = max(2, len(str(spec.hosts)))

    switches = []
    port = spec.gnmi_base_port
    for name, role in [(n, "leaf") for n in leaf_names] + [(n, "spine") for n in spine_names]:
        switches.append({"name": name, "role": role, "gnmi": {"address": spec.gnmi_address, "port": port}})
        port += 1

    next_port = {n: 1 for n in leaf_names + spine_names}

    def take(switch: str) -> str:
        p = next_port[switch]
        next_port[switch] = p + 1
        return f"Ethernet{p}"

    hosts = []
    for h in range(spec.hosts):
        nics = []
        for k in range(spec.nics_per_host):
            rail = k // nics_per_rail if spec.rails > 1 else 0
            leaf = leaf_names[rail * leaves_per_rail + h // hosts_per_leaf]
            nics.append({
                "rdma_device": f"mlx5_{k}", "netdev": f"ens{k + 1}f0np0",
                "ip": f"10.{k}.{h // 250}.{h % 250 + 1}",
                "rail": rail, "leaf": f"{leaf}:{take(leaf)}", "speed": spec.host_speed_bps,
            })
        hosts.append({"name": f"host{h + 1:0{hwidth}d}", "nics": nics})

    links = []
    for leaf in leaf_names:
        for spine in spine_names:
            for _ in range(spec.parallel_links):
                links.append({"a": f"{leaf}:{take(leaf)}", "b": f"{spine}:{take(spine)}"})

    data = {
        "name": spec.name,
        "defaults": {
            "port_speed": spec.link_speed_bps,
            "ecmp_hash": {"algorithm": spec.hash_algorithm.value, "seed": spec.hash_seed},
        },
        "switches": switches,
        "links": links,
        "hosts": hosts,
    }
    # Host ports run at host speed; declare them so the loader checks NIC speeds against them.
    if spec.host_speed_bps != spec.link_speed_bps:
        ports: dict[str, dict[str, int]] = {}
        for h in hosts:
            for n in h["nics"]:
                leaf, p = n["leaf"].split(":")
                ports.setdefault(leaf, {})[p] = spec.host_speed_bps
        for s in switches:
            if s["name"] in ports:
                s["ports"] = ports[s["name"]]
    return validate_topology(data, f"generated fabric {spec.name!r}")
