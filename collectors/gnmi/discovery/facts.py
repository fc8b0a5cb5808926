"""What discovery reads from one switch, and how gNMI leaf updates become it (pure, no I/O).

Paths (openconfig/public, ``release/models``):

* ``interfaces/openconfig-interfaces.yang``, ``interfaces/openconfig-if-ethernet.yang``:
  ``/interfaces/interface[name]/ethernet/state/port-speed`` (identity ``SPEED_400GB``, or bit/s);
* ``interfaces/openconfig-if-ip.yang``: ``/interfaces/interface[name]/subinterfaces/subinterface[index]/ipv4/
  addresses/address[ip]/state/{ip,prefix-length}``;
* ``lldp/openconfig-lldp.yang``: ``/lldp/interfaces/interface[name]/neighbors/neighbor[id]/state/{system-name,
  port-id,port-description,chassis-id,management-address}``;
* ``aft/openconfig-aft-common.yang``, ``aft/openconfig-aft-ipv4.yang``, ``aft/openconfig-aft-network-instance.yang``
  under ``/network-instances/network-instance[name=default]/afts``: ``next-hops/next-hop[index]/state/ip-address``,
  ``next-hops/next-hop[index]/interface-ref/state/interface``,
  ``next-hop-groups/next-hop-group[id]/next-hops/next-hop[index]/state/weight`` and
  ``ipv4-unicast/ipv4-entry[prefix]/state/next-hop-group``.

Values are read leaf by leaf (PROTO scalars, or JSON / JSON_IETF leaf values); a JSON object for a
whole subtree is not unpacked.

A target of another platform is read through its profile (``fabric/profiles``): the paths its profile maps for
the canonical leaves in :data:`NEEDS`, given back as the OpenConfig leaves above. IPv4 addresses and
``ipv4-entry`` routes are no canonical leaves (no profile maps them), so they are read on OpenConfig targets only.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowtracer.fabric.platform_profiles import Profile
from flowtracer.schemas.openconfig import DEFAULT_AFT, LLDP_NEIGHBOR_STATE

AFT = DEFAULT_AFT
PATHS: tuple[str, ...] = (
    "/interfaces/interface[name=*]/ethernet/state/port-speed",
    "/interfaces/interface[name=*]/subinterfaces/subinterface[index=*]/ipv4/addresses/address[ip=*]/state",
    "/lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state",
    f"{AFT}/next-hops/next-hop[index=*]/state/ip-address",
    f"{AFT}/next-hops/next-hop[index=*]/interface-ref/state/interface",
    f"{AFT}/next-hop-groups/next-hop-group[id=*]/next-hops/next-hop[index=*]/state/weight",
    f"{AFT}/ipv4-unicast/ipv4-entry[prefix=*]/state/next-hop-group",
)
"""What one discovery Get asks each switch for (one request per path, so a missing subtree is one warning)."""

NEEDS: dict[str, tuple[str, ...]] = {
    "port speeds": ("interface.port-speed",),
    "LLDP": ("lldp.system-name", "lldp.port-id", "lldp.port-description", "lldp.chassis-id",
             "lldp.management-address"),
    "AFT next hops": ("next-hop.ip-address", "next-hop.interface"),
    "AFT next-hop groups": ("group.weight",),
}
"""Canonical leaves (``schemas/platform_profiles.CANONICAL``) discovery reads through a profile, by purpose."""
#: The leaf of each need without which that need is not met.
_ESSENTIAL = {"port speeds": "interface.port-speed", "LLDP": "lldp.system-name",
              "AFT next hops": "next-hop.ip-address", "AFT next-hop groups": "group.weight"}
#: Where a profile's ``missing`` notes say why (leaf or group names).
_NOTES = {"LLDP": ("lldp.system-name",), "AFT next hops": ("next-hop-ip", "next-hop.ip-address"),
          "AFT next-hop groups": ("next-hop-groups", "group.weight")}


def profile_paths(profile: Profile) -> tuple[str, ...]:
    """What to ask a target of ``profile``'s platform for: :data:`PATHS` on OpenConfig, else the profile's paths
    (origin first, default network instance) of the leaves in :data:`NEEDS` it maps."""
    if profile.is_openconfig:
        return PATHS
    out: list[str] = []
    for keys in NEEDS.values():
        for key in keys:
            leaf = profile.leaves.get(key)
            if leaf is not None and (path := leaf.template.subscription_path({"network_instance": "default"})) \
                    not in out:
                out.append(path)
    return tuple(out)


def lacking(switch: str, profile: Profile) -> str | None:
    """One line naming what ``profile`` cannot give discovery for ``switch`` and what discovery does instead,
    or None when it gives everything."""
    if profile.is_openconfig:
        return None
    gaps = [need for need, key in _ESSENTIAL.items() if key not in profile.leaves]
    gaps.append("IPv4 addresses and routes")  # no canonical leaves: never read through a profile
    notes = [profile.missing[k] for need in gaps for k in _NOTES.get(need, ()) if k in profile.missing][:1]
    does = ["its ECMP groups are derived from the learnt links (equal weights)"]
    if "LLDP" in gaps:
        does.insert(0, "its cables are learnt from its neighbors' LLDP and its hosts only from agent inventory")
    if "port speeds" in gaps:
        does.append("its port speeds are the fabric default")
    why = f" ({notes[0]})" if notes else ""
    return f"{switch} ({profile.platform}): its profile maps no {', '.join(gaps)}{why}: {'; '.join(does)}"


Elems = Sequence[tuple[str, dict[str, str]]]
"""A leaf's path: (element name, keys) pairs, module prefixes allowed."""


@dataclass(frozen=True)
class Neighbor:
    """An LLDP neighbor as a port hears it."""

    system_name: str = ""
    port_id: str = ""
    port_description: str = ""
    chassis_id: str = ""
    management_address: str = ""


@dataclass
class SwitchFacts:
    """Everything discovery learnt from one switch. Speeds in bit/s; next-hop weights as the AFT has them."""

    name: str
    port_speeds: dict[str, int] = field(default_factory=dict)
    #: port -> "ip/prefix-length" of its first IPv4 address
    addresses: dict[str, str] = field(default_factory=dict)
    neighbors: dict[str, Neighbor] = field(default_factory=dict)
    next_hop_ip: dict[int, str] = field(default_factory=dict)
    next_hop_port: dict[int, str] = field(default_factory=dict)
    #: group id -> next-hop index -> weight
    groups: dict[int, dict[int, int]] = field(default_factory=dict)
    #: IPv4 prefix -> group id
    routes: dict[str, int] = field(default_factory=dict)
    #: leaves that could not be read, one line each
    problems: list[str] = field(default_factory=list)
    #: False when the switch's platform cannot give its routes and groups (no AFT in its profile)
    aft: bool = True


_SPEED = re.compile(r"SPEED_(\d{1,6})(MB|GB|TB)$")
_UNIT = {"MB": 10**6, "GB": 10**9, "TB": 10**12}


def port_speed_bps(value: Any) -> int:
    """openconfig-if-ethernet ``ETHERNET_SPEED`` identity (optionally module-qualified) or bit/s -> bit/s.

    Raises ValueError for anything else (``SPEED_UNKNOWN`` included).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value)
    if text.isascii() and text.isdigit():
        return int(text)
    m = _SPEED.search(text)
    if not m:
        raise ValueError(f"unknown port speed {value!r}")
    return int(m.group(1)) * _UNIT[m.group(2)]


def _uint(value: Any, what: str) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
        raise ValueError(f"{what}: expected an unsigned integer, got {value!r}")
    return int(value)


#: LLDP state leaf -> Neighbor attribute, for the leaves a Neighbor keeps.
_LLDP_FIELDS = {leaf: leaf.replace("-", "_") for leaf in LLDP_NEIGHBOR_STATE
                if leaf.replace("-", "_") in Neighbor.__dataclass_fields__}


def _names(elems: Elems) -> tuple[tuple[str, ...], dict[str, str]]:
    """Element names without module prefixes, and the keys by list name."""
    names = tuple(n.rsplit(":", 1)[-1] for n, _ in elems)
    keys = {n.rsplit(":", 1)[-1]: next(iter(k.values())) for n, k in elems if k}
    return names, keys


def apply_update(facts: SwitchFacts, elems: Elems, value: Any) -> None:
    """Record one leaf. Leaves discovery does not use are ignored; a bad value is one line in ``problems``."""
    names, keys = _names(elems)
    text = "/" + "/".join(names)
    try:
        if names[:2] == ("interfaces", "interface"):
            port = keys["interface"]
            if names[2:] == ("ethernet", "state", "port-speed"):
                facts.port_speeds[port] = port_speed_bps(value)
            elif names[2:] == ("subinterfaces", "subinterface", "ipv4", "addresses", "address", "state",
                               "prefix-length") and port not in facts.addresses:
                # Checked here, so that building never meets an address it cannot parse.
                plen = _uint(value, "prefix-length")
                facts.addresses[port] = str(ipaddress.ip_interface(f"{keys['address']}/{plen}"))
        elif names[:3] == ("lldp", "interfaces", "interface") and names[-2] == "state":
            attr = _LLDP_FIELDS.get(names[-1])
            if attr is not None and names[3:5] == ("neighbors", "neighbor"):
                port = keys["interface"]
                old = facts.neighbors.get(port, Neighbor())
                facts.neighbors[port] = Neighbor(**{**old.__dict__, attr: str(value)})
        elif names[:3] == ("network-instances", "network-instance", "afts"):
            _aft(facts, names[3:], keys, value)
    except (ValueError, KeyError, TypeError) as e:
        facts.problems.append(f"{facts.name} {text}: {e}")


def _aft(facts: SwitchFacts, names: tuple[str, ...], keys: dict[str, str], value: Any) -> None:
    if names == ("next-hops", "next-hop", "state", "ip-address"):
        facts.next_hop_ip[_uint(keys["next-hop"], "next-hop index")] = str(value)
    elif names == ("next-hops", "next-hop", "interface-ref", "state", "interface"):
        facts.next_hop_port[_uint(keys["next-hop"], "next-hop index")] = str(value)
    elif names == ("next-hop-groups", "next-hop-group", "next-hops", "next-hop", "state", "weight"):
        gid = _uint(keys["next-hop-group"], "next-hop-group id")
        facts.groups.setdefault(gid, {})[_uint(keys["next-hop"], "next-hop index")] = _uint(value, "weight")
    elif names == ("ipv4-unicast", "ipv4-entry", "state", "next-hop-group"):
        facts.routes[keys["ipv4-entry"]] = _uint(value, "next-hop-group")


def switch_facts(name: str, updates: Iterable[tuple[Elems, Any]]) -> SwitchFacts:
    """All of one switch's leaves (path elements, decoded value) -> its facts."""
    facts = SwitchFacts(name)
    for elems, value in updates:
        apply_update(facts, elems, value)
    return facts
