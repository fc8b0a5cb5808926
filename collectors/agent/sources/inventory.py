"""The topology's host inventory as the agent needs it: which leaf and address each NIC port has."""

from __future__ import annotations

from dataclasses import dataclass

from flowtracer.fabric.topology import Topology


@dataclass(frozen=True, slots=True)
class NicInfo:
    """One host NIC port from the topology."""

    host: str
    device: str
    port: int
    netdev: str
    ip: str
    leaf: str  # leaf switch name (the FlowBatch key)


class Inventory:
    """NIC ports by (host, device, port); empty when the agent runs without a topology."""

    def __init__(self, topology: Topology | None = None) -> None:
        self.nics: dict[tuple[str, str, int], NicInfo] = {}
        self.hosts: dict[str, list[NicInfo]] = {}
        if topology is None:
            return
        for h in topology.hosts:
            for n in h.nics:
                info = NicInfo(h.name, n.rdma_device, n.port, n.netdev, n.ip, n.leaf.split(":", 1)[0])
                self.nics[(h.name, n.rdma_device, n.port)] = info
                self.hosts.setdefault(h.name, []).append(info)

    def nic(self, host: str, device: str, port: int) -> NicInfo | None:
        return self.nics.get((host, device, port))

    def leaves(self, host: str) -> list[str]:
        """Leaves the host's NICs attach to, sorted, each once."""
        return sorted({n.leaf for n in self.hosts.get(host, ())})
