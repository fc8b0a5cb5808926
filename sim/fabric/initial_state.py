"""The engine's starting state, built from the topology and the workload: switch states, NIC ends and host
states with their QP number allocators, and the workload's host specs resolved against the topology (with the
workload error naming the field that was wrong)."""

from __future__ import annotations

import random
from collections.abc import Collection

from flowtracer.fabric.topology import Topology
from flowtracer.sim.fabric.counters import CounterBook
from flowtracer.sim.fabric.neighbors import lldp_neighbors, port_addresses
from flowtracer.sim.fabric.rdma import NicEnd, QpnAllocator
from flowtracer.sim.fabric.workload import Workload, WorkloadError
from flowtracer.sim.hosts.state import HostState, NicInfo, PortCounters
from flowtracer.sim.switches.state import SwitchState


def switch_states(topology: Topology, counters: CounterBook, counter32: bool | Collection[str],
                  start_ns: int) -> dict[str, SwitchState]:
    """Every switch's state at ``start_ns`` (ns): counters at their starting values, LLDP neighbours, addresses.
    ``counter32``: True (every switch) or the names of switches whose counters wrap at 2**32."""
    names32 = {s.name for s in topology.switches} if counter32 is True else set(counter32 or ())
    states: dict[str, SwitchState] = {}
    lldp, addresses = lldp_neighbors(topology), port_addresses(topology)
    for s in topology.switches:
        st = SwitchState(s.name, counter_bits=32 if s.name in names32 else 64)
        counters.init_state(st)
        st.lldp, st.addresses = lldp[s.name], addresses[s.name]
        st.timestamp_ns = st.last_clear_ns = start_ns
        for iface in st.interfaces.values():
            iface.last_change_ns = start_ns
        states[s.name] = st
    return states


def host_states(topology: Topology, rng: random.Random, qpn_reuse: bool, start_ns: int
                ) -> tuple[dict[str, NicEnd], dict[str, HostState], dict[str, QpnAllocator]]:
    """NIC ends (by ``host:rdma_device``), host states at ``start_ns`` (ns) and one QP number allocator per NIC,
    each starting at a number drawn from ``rng`` (in host, then NIC order: a seed gives the same numbers)."""
    nics: dict[str, NicEnd] = {}
    hosts: dict[str, HostState] = {}
    qpn: dict[str, QpnAllocator] = {}
    for h in topology.hosts:
        hs = HostState(h.name, timestamp_ns=start_ns)
        for nic in h.nics:
            end = NicEnd(h.name, nic.rdma_device, nic.port, nic.netdev, nic.ip)
            nics[end.name] = end
            hs.nics.append(NicInfo(nic.rdma_device, nic.port, nic.netdev, nic.ip, nic.speed, nic.leaf))
            hs.ports[(nic.rdma_device, nic.port)] = PortCounters(nic.rdma_device, nic.port, nic.netdev)
            qpn[end.name] = QpnAllocator(rng.randrange(0x100, 0x20000), reuse=qpn_reuse)
        hosts[h.name] = hs
    return nics, hosts, qpn


def hosts_of(topology: Topology, spec: object, where: str) -> list[str]:
    """The host names a workload field (``where``) gives: "all", the first N, or a tuple of names."""
    names = [h.name for h in topology.hosts]
    if spec == "all":
        return names
    if isinstance(spec, int):
        if spec < 1:
            raise WorkloadError(f"{where}: give at least 1 host, got {spec}")
        if spec > len(names):
            raise WorkloadError(f"{where}: {spec} hosts asked for, the topology has {len(names)}")
        return names[:spec]
    assert isinstance(spec, tuple)
    for h in spec:
        if h not in names:
            raise WorkloadError(f"{where}: unknown host {h!r}")
    return list(spec)


def node_group_limits(topology: Topology, workload: Workload) -> tuple[dict[str, float], dict[str, int]]:
    """Per host, the node groups' compute scale (the largest) and NIC rate cap in bit/s (the smallest)."""
    scale: dict[str, float] = {}
    nic_rate: dict[str, int] = {}
    for gi, g in enumerate(workload.node_groups):
        for h in hosts_of(topology, g.hosts, f"node_groups[{gi}].hosts"):
            scale[h] = max(scale.get(h, 1.0), g.compute_scale)
            if g.nic_rate is not None:
                nic_rate[h] = min(nic_rate.get(h, g.nic_rate), g.nic_rate)
    return scale, nic_rate


def job_nics(topology: Topology, workload: Workload, nics: dict[str, NicEnd]) -> list[list[list[NicEnd]]]:
    """Per job of the workload, its NICs: ``[node][rail]``, the first ``nics_per_node`` NICs of each host."""
    hosts_by_name = {h.name: h for h in topology.hosts}
    out = []
    for ji, spec in enumerate(workload.jobs):
        hosts = hosts_of(topology, spec.hosts, f"jobs[{ji}].hosts")
        have = min(len(hosts_by_name[h].nics) for h in hosts)
        rails = have if spec.nics_per_node == "all" else spec.nics_per_node
        if rails > have:
            raise WorkloadError(f"jobs[{ji}].nics_per_node: {rails} asked for, a host of the job has {have}")
        out.append([[nics[f"{h}:{hosts_by_name[h].nics[k].rdma_device}"] for k in range(rails)] for h in hosts])
    return out


def check_background(topology: Topology, workload: Workload) -> None:
    """Refuse background flows over fewer than two hosts (a flow needs NICs on two)."""
    for bi, bg in enumerate(workload.background):
        if len(hosts_of(topology, bg.hosts, f"background[{bi}].hosts")) < 2:
            raise WorkloadError(f"background[{bi}].hosts: background flows need NICs on two hosts")
