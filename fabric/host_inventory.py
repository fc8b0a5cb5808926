"""A host's own inventory: what its agent knows about its RDMA NICs (the file ``flowtracer agent
--inventory-out`` writes and ``flowtracer topology discover --inventory`` reads; pure, no I/O but reading files).

One JSON object per host::

    {"host": "host05", "nics": [{"rdma_device": "mlx5_0", "port": 1, "netdev": "ens1f0np0",
                                 "ip": "10.0.0.5", "switch_port": "leaf02:Ethernet1"}]}

``ip`` is the NIC's RoCE v2 address (its IPv4-mapped GID); ``switch_port`` is the switch and port the NIC
hears over LLDP (``lldpctl -f json`` of an lldpd that only receives, ``lldpd -r``), empty when unknown.
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from flowtracer.plumbing.config_yaml import format_validation_error, read_text


class InventoryError(ValueError):
    """An inventory file that cannot be used; the message is one line naming the file and the place."""


class InventoryNic(BaseModel):
    """One NIC port as its host sees it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rdma_device: str
    port: int = 1
    netdev: str
    ip: str
    #: ``switch:port`` heard over LLDP on this NIC, "" when the host hears none.
    switch_port: str = ""

    @field_validator("ip")
    @classmethod
    def _ip(cls, v: str) -> str:
        return str(ipaddress.ip_address(v))


class HostInventory(BaseModel):
    """One host's NICs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str
    nics: tuple[InventoryNic, ...]


def load_inventory(path: Path) -> HostInventory:
    """Read one inventory file; InventoryError is one line naming it."""
    text = read_text(path, InventoryError)
    try:
        return HostInventory.model_validate(json.loads(text))
    except ValueError as e:  # JSONDecodeError is one
        if isinstance(e, ValidationError):
            raise InventoryError(format_validation_error(e, str(path), None)) from None
        raise InventoryError(f"{path}: not valid JSON: {e}") from None


def inventory_json(inventory: HostInventory) -> str:
    """The file's text: one JSON object and a newline."""
    return json.dumps(inventory.model_dump(mode="json")) + "\n"
