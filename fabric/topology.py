"""The fabric topology file: its schema, and a loader that explains every mistake in one line.

A topology YAML names the switches (role, gNMI endpoint, TLS and credential references, ECMP
hash), the switch-to-switch links and the hosts with their RDMA NICs and where each attaches.
It is the one description of the fabric that simulator, collectors and processor share.
``load_topology`` returns a validated ``Topology``; ``schemas.fabric.Fabric`` answers routing
questions about it. Every problem raises ``TopologyError`` with ``file:line: place: problem``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from flowtracer.fabric.ecmp_hash import (
    DEFAULT_FIELDS,
    EcmpHash,
    HashAlgorithm,
    HashField,
    HashMode,
    MemberSelection,
    hash_for_mode,
)
from flowtracer.fabric.platform_profiles import DEFAULT_PLATFORM, check_platform
from flowtracer.fabric.speeds import format_speed, parse_speed
from flowtracer.plumbing.config_yaml import LineIndex, format_validation_error, located, parse_yaml, read_text
from flowtracer.plumbing.target_security import Credentials, TlsConfig

_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(\.{_LABEL})*")
MAX_NAME = 128
"""Longest switch, host, port or device name accepted (characters)."""
_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{MAX_NAME - 1}}}")
_PORT_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_./\-]{{0,{MAX_NAME - 1}}}")


class TopologyError(ValueError):
    """A topology file is unreadable or invalid; ``str()`` is one line naming file, place, problem."""


class Role(StrEnum):
    LEAF = "leaf"
    SPINE = "spine"
    SUPER_SPINE = "super-spine"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GnmiEndpoint(_Model):
    """Where a switch's gNMI server listens."""

    address: str
    port: int = Field(57400, ge=1, le=65535)
    tls: TlsConfig = TlsConfig()
    credentials: Credentials = Credentials()
    #: Which vendor profile (fabric/profiles/<platform>.yaml) the switch's gNMI paths follow.
    platform: str = DEFAULT_PLATFORM

    @field_validator("platform")
    @classmethod
    def _platform(cls, v: str) -> str:
        return check_platform(v)

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        try:
            ipaddress.ip_address(v)
            return v
        except ValueError:
            pass
        if re.fullmatch(r"[0-9.]+", v) or not _HOSTNAME.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid IP address or hostname")
        return v


class EcmpHashConfig(_Model):
    """ECMP hash of one switch: the header fields, algorithm, seed and member selection."""

    fields: tuple[HashField, ...] = DEFAULT_FIELDS
    algorithm: HashAlgorithm = HashAlgorithm.CRC16_CCITT
    seed: int = Field(0, ge=0, le=0xFFFFFFFF)
    selection: MemberSelection = MemberSelection.MODULO

    @field_validator("fields")
    @classmethod
    def _fields(cls, v: tuple[HashField, ...]) -> tuple[HashField, ...]:
        if not v:
            raise ValueError("at least one header field is needed")
        if len(set(v)) != len(v):
            raise ValueError("a header field is listed twice")
        return v

    def model(self) -> EcmpHash:
        return EcmpHash(tuple(self.fields), self.algorithm, self.seed, self.selection)


class Switch(_Model):
    name: str
    role: Role
    gnmi: GnmiEndpoint | None = None
    ecmp_hash: EcmpHashConfig | None = None
    #: How it spreads flows over a group's members (``HashMode``); None: ``defaults.hash_mode``.
    hash_mode: HashMode | None = None
    #: Declared port speeds (bit/s, or "400G"); links and NICs must match them.
    ports: dict[str, int] = {}

    @model_validator(mode="before")
    @classmethod
    def _hash_mode(cls, data: Any) -> Any:
        # Checked here, not by the enum, so the message names the switch as well as the bad value.
        if isinstance(data, dict):
            check_hash_mode(data.get("hash_mode"), f"switch {data.get('name', '?')}")
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid switch name (up to 128 letters, digits, '_', '.', '-')")
        return v

    @field_validator("ports", mode="before")
    @classmethod
    def _ports(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: parse_speed(s) for k, s in v.items()}
        return v


class Link(_Model):
    """A switch-to-switch cable: ``a`` and ``b`` are ``switch:port``."""

    a: str
    b: str
    speed: int | None = None

    @field_validator("speed", mode="before")
    @classmethod
    def _speed(cls, v: Any) -> Any:
        return None if v is None else parse_speed(v)


class Nic(_Model):
    """One RDMA NIC (one port) of a host and the leaf port it is cabled to."""

    rdma_device: str
    port: int = Field(1, ge=1)
    netdev: str
    ip: str
    rail: int = Field(0, ge=0)
    leaf: str
    speed: int = 400_000_000_000

    @field_validator("speed", mode="before")
    @classmethod
    def _speed(cls, v: Any) -> Any:
        return parse_speed(v)

    @field_validator("ip")
    @classmethod
    def _ip(cls, v: str) -> str:
        try:
            return str(ipaddress.ip_address(v))
        except ValueError:
            raise ValueError(f"{v!r} is not a valid IP address") from None


class Host(_Model):
    name: str
    nics: tuple[Nic, ...]

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid host name (up to 128 letters, digits, '_', '.', '-')")
        return v

    @field_validator("nics")
    @classmethod
    def _nics(cls, v: tuple[Nic, ...]) -> tuple[Nic, ...]:
        if not v:
            raise ValueError("a host needs at least one NIC")
        return v


class EcmpGroupSpec(_Model):
    """An ECMP group as a switch's forwarding table holds it (``topology discover`` writes these from the AFT).

    ``members``: egress port -> weight (share of flows in proportion to it); ``destinations``: the leaves whose
    hosts the group forwards to. Without any ``ecmp_groups`` the groups follow from the links (equal weights).
    """

    switch: str
    destinations: tuple[str, ...]
    members: dict[str, int]

    @field_validator("members")
    @classmethod
    def _members(cls, v: dict[str, int]) -> dict[str, int]:
        if not v:
            raise ValueError("a group needs at least one member port")
        for port, w in v.items():
            if w < 1:
                raise ValueError(f"weight of {port} is {w}: weights are integers >= 1")
        return v


class Defaults(_Model):
    """Values every switch gets unless it sets its own."""

    gnmi_port: int = Field(57400, ge=1, le=65535)
    tls: TlsConfig = TlsConfig()
    credentials: Credentials = Credentials()
    ecmp_hash: EcmpHashConfig = EcmpHashConfig()
    hash_mode: HashMode = HashMode.FIVE_TUPLE
    #: Speed of every port not declared in a switch's ``ports``, in bit/s (or "400G").
    port_speed: int | None = None

    @field_validator("port_speed", mode="before")
    @classmethod
    def _speed(cls, v: Any) -> Any:
        return None if v is None else parse_speed(v)

    @field_validator("hash_mode", mode="before")
    @classmethod
    def _hash_mode(cls, v: Any) -> Any:
        check_hash_mode(v, "")
        return v


def check_hash_mode(value: object, where: str) -> None:
    """Raise ValueError naming ``where`` (if given) unless ``value`` is None or a ``HashMode`` value."""
    if value is None or value in tuple(HashMode):
        return
    choices = ", ".join(m.value for m in HashMode)
    raise ValueError(f"{where + ': ' if where else ''}hash_mode {value!r} is not one of: {choices}")


class Topology(_Model):
    """A validated fabric description. Build with ``load_topology`` / ``parse_topology``."""

    name: str = "fabric"
    defaults: Defaults = Defaults()
    switches: tuple[Switch, ...]
    links: tuple[Link, ...] = ()
    hosts: tuple[Host, ...] = ()
    #: As learnt from the switches (optional); see ``EcmpGroupSpec``.
    ecmp_groups: tuple[EcmpGroupSpec, ...] = ()

    def switch(self, name: str) -> Switch:
        for s in self.switches:
            if s.name == name:
                return s
        raise KeyError(name)

    def hash_mode(self, switch: str) -> HashMode:
        """How a switch spreads flows (its own ``hash_mode``, else the defaults')."""
        return self.switch(switch).hash_mode or self.defaults.hash_mode

    def ecmp_hash(self, switch: str) -> EcmpHash:
        """The ECMP hash model a switch uses (its own, else the defaults), with its hash mode's fields."""
        cfg = self.switch(switch).ecmp_hash or self.defaults.ecmp_hash
        return hash_for_mode(cfg.model(), self.hash_mode(switch))

    def to_yaml(self) -> str:
        """Serialize back to YAML (speeds written as 400G, defaults left out)."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        for s in data.get("switches", []):
            if "ports" in s:
                s["ports"] = {p: format_speed(v) for p, v in s["ports"].items()}
        for link in data.get("links", []):
            if "speed" in link:
                link["speed"] = format_speed(link["speed"])
        for h in data.get("hosts", []):
            for n in h["nics"]:
                n["speed"] = format_speed(n.get("speed", 400_000_000_000))
        d = data.get("defaults", {})
        if "port_speed" in d:
            d["port_speed"] = format_speed(d["port_speed"])
        return yaml.safe_dump(data, sort_keys=False, width=120)


# ---------------------------------------------------------------------------------------------
# Loading: YAML -> pydantic -> cross-reference checks, every error located in the file.


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology file; raise ``TopologyError`` naming the place of any problem."""
    p = Path(path)
    return parse_topology(read_text(p, TopologyError), str(p))


def parse_topology(text: str, source: str = "<topology>") -> Topology:
    """Validate topology YAML text; ``source`` names it in error messages."""
    data, lines = parse_yaml(text, source, TopologyError)
    return validate_topology(data, source, lines)


def validate_topology(data: object, source: str, lines: LineIndex | None = None) -> Topology:
    """Validate already-parsed topology data (as from YAML); errors name ``source``."""
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: expected a mapping with 'switches', 'links' and 'hosts'")
    try:
        topo = Topology.model_validate(data)
    except ValidationError as e:
        raise TopologyError(format_validation_error(e, source, lines)) from None
    for loc, problem in _cross_check(topo):
        raise TopologyError(located(source, loc, problem, lines))
    return topo


def _split_port(ref: str) -> tuple[str, str] | None:
    node, sep, port = ref.partition(":")
    if not sep or not node or not port or not _PORT_NAME.fullmatch(port):
        return None
    return node, port


def _cross_check(topo: Topology) -> Iterable[tuple[tuple[Any, ...], str]]:
    """Yield (location, problem) for every inconsistency between switches, links and hosts."""
    switches: dict[str, Switch] = {}
    for i, s in enumerate(topo.switches):
        if s.name in switches:
            yield ("switches", i, "name"), f"switch {s.name!r} is defined twice"
        switches[s.name] = s
    if not switches:
        yield ("switches",), "a fabric needs at least one switch"
    known = ", ".join(sorted(switches)[:8]) + (", ..." if len(switches) > 8 else "")

    gnmi_seen: dict[tuple[str, int], str] = {}
    for i, s in enumerate(topo.switches):
        if s.gnmi is not None:
            ep = (s.gnmi.address, s.gnmi.port)
            if ep in gnmi_seen:
                yield ("switches", i, "gnmi"), (
                    f"gNMI endpoint {ep[0]}:{ep[1]} is already used by {gnmi_seen[ep]}")
            gnmi_seen[ep] = s.name

    used: dict[tuple[str, str], str] = {}

    def port_speed(sw: Switch, port: str) -> int | None:
        return sw.ports.get(port, topo.defaults.port_speed)

    uplinks: dict[str, int] = {}
    for i, link in enumerate(topo.links):
        ends = []
        for side in ("a", "b"):
            ref = getattr(link, side)
            parsed = _split_port(ref)
            if parsed is None:
                yield ("links", i, side), f"{ref!r} is not 'switch:port'"
                return
            node, port = parsed
            if node not in switches:
                hint = " (host NICs attach with hosts[].nics[].leaf)" if any(
                    h.name == node for h in topo.hosts) else ""
                yield ("links", i, side), f"unknown switch {node!r}{hint}; known: {known}"
                return
            if (node, port) in used:
                yield ("links", i, side), f"port {node}:{port} is already used by {used[(node, port)]}"
                return
            used[(node, port)] = f"links[{i}].{side}"
            ends.append((switches[node], port))
        (sa, pa), (sb, pb) = ends
        if sa.name == sb.name:
            yield ("links", i), f"link connects {sa.name} to itself"
            return
        speeds = {f"{sa.name}:{pa}": port_speed(sa, pa), f"{sb.name}:{pb}": port_speed(sb, pb)}
        if link.speed is not None:
            speeds["link"] = link.speed
        distinct = {v for v in speeds.values() if v is not None}
        if len(distinct) > 1:
            desc = ", ".join(f"{k} {format_speed(v)}" for k, v in speeds.items() if v is not None)
            yield ("links", i), f"mismatched link speeds: {desc}"
            return
        if not distinct:
            yield ("links", i), "no speed: give the link a speed, declare the ports, or set defaults.port_speed"
            return
        for s_, other in ((sa, sb), (sb, sa)):
            if s_.role is Role.LEAF and other.role is not Role.LEAF:
                uplinks[s_.name] = uplinks.get(s_.name, 0) + 1

    nic_ips: dict[str, str] = {}
    hosts_seen: dict[str, int] = {}
    for hi, h in enumerate(topo.hosts):
        if h.name in switches or h.name in hosts_seen:
            yield ("hosts", hi, "name"), f"name {h.name!r} is already used by another host or switch"
            return
        hosts_seen[h.name] = hi
        devs: set[tuple[str, int]] = set()
        for ni, nic in enumerate(h.nics):
            here = ("hosts", hi, "nics", ni)
            if (nic.rdma_device, nic.port) in devs:
                yield (*here, "rdma_device"), f"{nic.rdma_device} port {nic.port} is listed twice on {h.name}"
                return
            devs.add((nic.rdma_device, nic.port))
            if nic.ip in nic_ips:
                yield (*here, "ip"), f"duplicate IP {nic.ip}: already the IP of {nic_ips[nic.ip]}"
                return
            nic_ips[nic.ip] = f"{h.name}/{nic.rdma_device}"
            parsed = _split_port(nic.leaf)
            if parsed is None:
                yield (*here, "leaf"), f"{nic.leaf!r} is not 'leaf:port'"
                return
            node, port = parsed
            if node not in switches:
                yield (*here, "leaf"), f"unknown switch {node!r}; known: {known}"
                return
            if switches[node].role is not Role.LEAF:
                yield (*here, "leaf"), f"{node} is a {switches[node].role.value}; host NICs attach to leaves"
                return
            if (node, port) in used:
                yield (*here, "leaf"), f"port {node}:{port} is already used by {used[(node, port)]}"
                return
            used[(node, port)] = f"hosts[{hi}].nics[{ni}]"
            ps = port_speed(switches[node], port)
            if ps is not None and ps != nic.speed:
                yield (*here, "speed"), (
                    f"mismatched link speeds: NIC {format_speed(nic.speed)} but {node}:{port} is {format_speed(ps)}")
                return

    routed: dict[tuple[str, str], int] = {}
    for gi, g in enumerate(topo.ecmp_groups):
        here = ("ecmp_groups", gi)
        if g.switch not in switches:
            yield (*here, "switch"), f"unknown switch {g.switch!r}; known: {known}"
            return
        for port in g.members:
            if not used.get((g.switch, port), "").startswith("links"):
                yield (*here, "members"), f"{g.switch}:{port} is not the end of a link to another switch"
                return
        for dst in g.destinations:
            if dst not in switches or switches[dst].role is not Role.LEAF:
                yield (*here, "destinations"), f"{dst!r} is not a leaf of this fabric"
                return
            if (g.switch, dst) in routed:
                yield (*here, "destinations"), (
                    f"{g.switch} already reaches {dst} through ecmp_groups[{routed[(g.switch, dst)]}]")
                return
            routed[(g.switch, dst)] = gi

    has_spines = any(s.role is not Role.LEAF for s in topo.switches)
    for i, s in enumerate(topo.switches):
        if s.role is Role.LEAF and has_spines and not uplinks.get(s.name):
            yield ("switches", i), f"leaf {s.name} has no uplink to a spine"
