"""Vendor path profiles: where each platform keeps the counters and state flowtracer reads (pure, no I/O but
reading the profile files once).

A profile (``fabric/profiles/<platform>.yaml``, data) maps *canonical leaves* to the platform's gNMI paths.
A canonical leaf (:data:`CANONICAL`) is one OpenConfig leaf the collector's decoder understands, named
``<kind>.<leaf>`` (``interface.in-octets`` is
``/interfaces/interface[name={interface}]/state/counters/in-octets``). A profile says, per canonical leaf it
has, the platform's *path template*, its origin, the value format and the public source it was read from:

* SR Linux: ``interface.in-octets: /interface[name={interface}]/statistics/in-octets``
* SONiC: ``interface.in-octets: /COUNTERS_DB/localhost/COUNTERS/{interface:Ethernet*}/SAI_PORT_STAT_IF_IN_OCTETS``
  (origin ``sonic-db``; ``{var}`` as a whole element is a name that *is* the value, ``:Ethernet*`` the wildcard a
  subscription uses for it).

Template syntax: ``/elem/elem[key={var}]/elem[key=literal]/{var}/leaf``. Variables (:data:`VARS`) are the keys
flowtracer needs: ``interface``, ``network_instance``, ``index`` (next hop), ``group``, ``neighbor``, ``queue``,
``priority``. Value formats (``platform_formats.FORMATS``) say how a state leaf is written when it is not as in
OpenConfig.

The collector maps a platform path to its canonical leaf once per path (it caches resolved paths); the
simulator serves the same rows under the platform's paths. Both use this module, so the mapping is one rule.

Why one module over 400 lines: the template language, the canonical leaves it maps onto and the file checks are
one contract; split, a change to one (a new variable, a new leaf) would have to be made in two places that must
agree. The value formats and their conversions are ``platform_formats``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from flowtracer.fabric.platform_formats import FORMATS
from flowtracer.plumbing.config_yaml import parse_yaml, read_text

PROFILE_DIR = Path(__file__).parent / "profiles"
"""Where the shipped profiles live, one ``<platform>.yaml`` each."""

DEFAULT_PLATFORM = "openconfig"

#: Template variable -> the list name the decoder keys it by (its ``keys`` dict).
VARS: dict[str, str] = {"interface": "interface", "network_instance": "network-instance", "index": "next-hop",
                        "group": "next-hop-group", "neighbor": "neighbor", "queue": "queue",
                        "priority": "pfc-priority"}
#: Variables whose values are unsigned integers.
UINT_VARS = frozenset({"index", "group", "priority"})

class ProfileError(ValueError):
    """A profile file or platform name that cannot be used; the message names the file, line and key."""


@dataclass(frozen=True)
class TElem:
    """One template element: a fixed name, or a name that is a variable's value (``name`` None), with at most
    one key, bound to a variable (``var``) or fixed (``fixed``)."""

    name: str | None
    var: str | None = None
    key: str | None = None
    fixed: str | None = None
    #: What a subscription path puts for a name variable ("*", or a glob such as "Ethernet*").
    glob: str = "*"


_ELEM = re.compile(r"^(?:\{(?P<nvar>[a-z_]+)(?::(?P<glob>[^{}\[\]/]+))?\}|(?P<name>[A-Za-z_][A-Za-z0-9_.:-]*)"
                   r"(?:\[(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)=(?:\{(?P<kvar>[a-z_]+)\}|(?P<fixed>[^\[\]{}]+))\])?)$")


@dataclass(frozen=True)
class Template:
    """A path template (see the module docstring) with its origin."""

    origin: str
    elems: tuple[TElem, ...]

    @property
    def vars(self) -> tuple[str, ...]:
        """Variables in path order."""
        return tuple(e.var for e in self.elems if e.var is not None)

    @property
    def text(self) -> str:
        parts = []
        for e in self.elems:
            if e.name is None:
                parts.append(f"{{{e.var}}}")
            elif e.key is None:
                parts.append(e.name)
            else:
                parts.append(f"{e.name}[{e.key}={{{e.var}}}]" if e.var else f"{e.name}[{e.key}={e.fixed}]")
        body = "/" + "/".join(parts)
        return f"{self.origin}:{body}" if self.origin else body

    def subscription_path(self, fixed: Mapping[str, str] | None = None) -> str:
        """The path that selects every entry (variables as wildcards), origin first: what a collector
        subscribes to. ``fixed`` pins variables (``network_instance``: ``default``)."""
        fixed = fixed or {}
        parts = []
        for e in self.elems:
            if e.name is None:
                parts.append(fixed.get(e.var or "", e.glob))
            elif e.key is None:
                parts.append(e.name)
            else:
                parts.append(f"{e.name}[{e.key}={fixed.get(e.var, '*') if e.var else e.fixed}]")
        body = "/" + "/".join(parts)
        return f"{self.origin}:{body}" if self.origin else body

    def match(self, elems: Sequence[tuple[str, Mapping[str, str]]]) -> dict[str, str] | None:
        """The variables' values if ``elems`` (name, keys) is this path exactly, else None."""
        if len(elems) != len(self.elems):
            return None
        out: dict[str, str] = {}
        for (name, keys), t in zip(elems, self.elems, strict=True):
            if t.name is None:
                if keys:
                    return None
                out[t.var or ""] = name
                continue
            if name != t.name:
                return None
            if t.key is None:
                if keys:
                    return None
                continue
            v = keys.get(t.key)
            if v is None and len(keys) == 1:
                v = next(iter(keys.values()))
            if v is None or (t.fixed is not None and v != t.fixed):
                return None
            if t.var is not None:
                out[t.var] = v
        return out

    def is_prefix(self, elems: Sequence[tuple[str, Mapping[str, str]]]) -> bool:
        """Whether ``elems`` is a proper prefix of this path (a container above the leaf)."""
        if len(elems) >= len(self.elems):
            return False
        return Template(self.origin, self.elems[:len(elems)]).match(elems) is not None

    def fill(self, values: Mapping[str, str]) -> list[tuple[str, dict[str, str]]]:
        """The concrete elements (name, keys) for the variables' ``values``."""
        out: list[tuple[str, dict[str, str]]] = []
        for e in self.elems:
            if e.name is None:
                out.append((values[e.var or ""], {}))
            elif e.key is None:
                out.append((e.name, {}))
            else:
                out.append((e.name, {e.key: values[e.var] if e.var else (e.fixed or "")}))
        return out


def parse_template(text: str, origin: str = "") -> Template:
    """``[origin:]/a/b[k={var}]/{var}/leaf`` -> Template; ValueError says what is wrong."""
    s = text.strip()
    m = re.match(r"^([A-Za-z_][A-Za-z0-9_-]*):(/.*)$", s)
    if m:
        origin, s = m.group(1), m.group(2)
    if not s.startswith("/") or s == "/":
        raise ValueError(f"path {text!r} must start with '/' and name at least one element")
    parts = _split(s[1:], text)
    elems = []
    seen: set[str] = set()
    for p in parts:
        em = _ELEM.match(p)
        if not em:
            raise ValueError(f"path {text!r}: element {p!r} is not name, name[key={{var}}], name[key=value] or {{var}}")
        var = em.group("nvar") or em.group("kvar")
        if var is not None:
            if var not in VARS:
                raise ValueError(f"path {text!r}: unknown variable {{{var}}}; known: {', '.join(VARS)}")
            if var in seen:
                raise ValueError(f"path {text!r}: variable {{{var}}} is used twice")
            seen.add(var)
        if em.group("nvar"):
            elems.append(TElem(None, var, glob=em.group("glob") or "*"))
        else:
            name = em.group("name").rsplit(":", 1)[-1]  # a YANG module prefix names no element
            elems.append(TElem(name, var, em.group("key"), em.group("fixed")))
    if elems[-1].name is None:
        raise ValueError(f"path {text!r}: the last element must be the leaf's name, not a variable")
    return Template(origin, tuple(elems))


def _split(body: str, text: str) -> list[str]:
    """Split on '/' outside brackets and braces (key values such as ``Ethernet1/1`` keep theirs)."""
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth < 0:
                raise ValueError(f"path {text!r}: unbalanced brackets")
        if ch == "/" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise ValueError(f"path {text!r}: unbalanced brackets")
    parts.append(cur)
    if any(not p for p in parts):
        raise ValueError(f"path {text!r} has an empty element")
    return parts


# -- the canonical leaves ----------------------------------------------------------------------


@dataclass(frozen=True)
class Canonical:
    """One leaf flowtracer reads, as OpenConfig has it; ``group`` is the collector subscription that reads it
    ("" = read by topology discovery only), ``counter`` whether it is a counter (sampled)."""

    template: Template
    group: str
    counter: bool


_AFT = "/network-instances/network-instance[name={network_instance}]/afts"
_IF = "/interfaces/interface[name={interface}]"
_LLDP = "/lldp/interfaces/interface[name={interface}]/neighbors/neighbor[id={neighbor}]/state"
_QUEUE = "/qos/interfaces/interface[interface-id={interface}]/output/queues/queue[name={queue}]/state"
_PFC = "/qos/interfaces/interface[interface-id={interface}]/pfc/statistics/pfc-priority[index={priority}]"
_IF_COUNTERS = ("in-octets", "out-octets", "in-pkts", "out-pkts", "in-unicast-pkts", "out-unicast-pkts",
                "in-discards", "out-discards", "in-errors", "out-errors")


def _canonical() -> dict[str, Canonical]:
    c: dict[str, Canonical] = {}

    def add(key: str, path: str, group: str, counter: bool = False) -> None:
        c[key] = Canonical(parse_template(path), group, counter)

    for leaf in _IF_COUNTERS:
        add(f"interface.{leaf}", f"{_IF}/state/counters/{leaf}", "interface-counters", True)
    add("interface.last-clear", f"{_IF}/state/counters/last-clear", "interface-counters")
    add("interface.oper-status", f"{_IF}/state/oper-status", "oper-status")
    add("interface.last-change", f"{_IF}/state/last-change", "last-change")
    add("interface.port-speed", f"{_IF}/ethernet/state/port-speed", "port-speed")
    add("next-hop.ip-address", f"{_AFT}/next-hops/next-hop[index={{index}}]/state/ip-address", "next-hop-ip")
    add("next-hop.interface", f"{_AFT}/next-hops/next-hop[index={{index}}]/interface-ref/state/interface",
        "next-hop-interface")
    for leaf in ("octets-forwarded", "packets-forwarded"):
        add(f"next-hop.{leaf}", f"{_AFT}/next-hops/next-hop[index={{index}}]/state/counters/{leaf}",
            "next-hop-counters", True)
    add("group.weight", f"{_AFT}/next-hop-groups/next-hop-group[id={{group}}]/next-hops/next-hop[index={{index}}]"
        "/state/weight", "next-hop-groups")
    for leaf in ("system-name", "chassis-id", "port-id", "port-description", "management-address"):
        add(f"lldp.{leaf}", f"{_LLDP}/{leaf}", "")
    for leaf in ("transmit-pkts", "transmit-octets", "dropped-pkts", "dropped-octets", "ecn-marked-pkts",
                 "ecn-marked-octets", "max-queue-len"):
        add(f"queue.{leaf}", f"{_QUEUE}/{leaf}", "queue-counters", True)
    for leaf in ("pfc-pause-frames-received", "pfc-pause-frames-generated"):
        add(f"pfc.{leaf}", f"{_PFC}/{leaf}", "pfc-counters", True)
    return c


CANONICAL: dict[str, Canonical] = _canonical()
"""Every leaf a profile may map, by ``<kind>.<leaf>``."""


# -- profiles ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileLeaf:
    """Where one canonical leaf is on a platform."""

    key: str
    template: Template
    format: str
    source: str


@dataclass(frozen=True)
class Profile:
    """One platform's paths. ``encoding``: what the collector asks for (proto, json_ietf, json);
    ``missing``: canonical leaf or group -> what flowtracer does without it (for docs and logs)."""

    platform: str
    description: str
    encoding: str
    leaves: dict[str, ProfileLeaf]
    missing: dict[str, str] = field(default_factory=dict)
    file: str = ""
    #: The platform sends a subscribed entry as one JSON object of its leaves (sonic-gnmi's DB paths).
    json_entries: bool = False
    #: (origin, namespace) when the DB paths may also come target-addressed: prefix target ``COUNTERS_DB`` and
    #: path ``COUNTERS/Ethernet9`` stand for ``<origin>:/COUNTERS_DB/<namespace>/COUNTERS/Ethernet9`` (SONiC).
    db_target: tuple[str, str] | None = None

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(leaf.template.origin for leaf in self.leaves.values())

    @property
    def is_openconfig(self) -> bool:
        """True when every leaf is where OpenConfig has it, written as OpenConfig writes it: nothing to map."""
        return all(leaf.format == "" and leaf.template.origin in ("", "openconfig")
                   and leaf.template.elems == CANONICAL[leaf.key].template.elems for leaf in self.leaves.values())

    def group_paths(self, group: str) -> list[str]:
        """Subscription paths (origin first, default network instance) for the canonical leaves of ``group``,
        one per distinct container: leaves that share all but their last element share one path."""
        out: list[str] = []
        for key, c in CANONICAL.items():
            leaf = self.leaves.get(key)
            if c.group != group or leaf is None:
                continue
            t = leaf.template
            path = Template(t.origin, t.elems[:-1]).subscription_path({"network_instance": "default"}) \
                if _shares_container(self, leaf) else t.subscription_path({"network_instance": "default"})
            if path not in out:
                out.append(path)
        return out


def _shares_container(p: Profile, leaf: ProfileLeaf) -> bool:
    """Whether every leaf under ``leaf``'s container is of the same group, so subscribing the container reads
    nothing of another group (SONiC's ``COUNTERS/Ethernet*`` is one JSON object per port, as sonic-gnmi sends it)."""
    parent = leaf.template.elems[:-1]
    if not parent:
        return False
    group = CANONICAL[leaf.key].group
    return all(CANONICAL[o.key].group == group for o in p.leaves.values()
               if o.template.origin == leaf.template.origin and o.template.elems[:-1] == parent)


_TOP_KEYS = {"platform", "description", "encoding", "origin", "sources", "leaves", "missing", "json_entries",
             "db_target_namespace"}
_LEAF_KEYS = {"path", "origin", "format", "source"}
_ENCODINGS = ("proto", "json_ietf", "json")


def parse_profile(text: str, source: str) -> Profile:
    """Parse and check one profile file; ProfileError names ``source:line: key: problem``."""
    data, lines = parse_yaml(text, source, ProfileError, column=False)

    def fail(loc: tuple[Any, ...], problem: str) -> ProfileError:
        where = lines.where(source, loc)
        place = ".".join(str(p) for p in loc) or "profile"
        return ProfileError(f"{where}: {place}: {problem}")

    if not isinstance(data, dict):
        raise fail((), "expected a mapping with platform, description, encoding, sources, leaves")
    for k in data:
        if k not in _TOP_KEYS:
            raise fail((k,), f"unknown key; known: {', '.join(sorted(_TOP_KEYS))}")
    for k in ("platform", "encoding", "leaves"):
        if k not in data:
            raise fail((), f"missing required key {k!r}")
    platform = data["platform"]
    if not isinstance(platform, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", platform):
        raise fail(("platform",), f"{platform!r} is not a platform name (lower case letters, digits, '_')")
    encoding = data["encoding"]
    if encoding not in _ENCODINGS:
        raise fail(("encoding",), f"{encoding!r} is not one of: {', '.join(_ENCODINGS)}")
    origin = data.get("origin", "") or ""
    if not isinstance(origin, str):
        raise fail(("origin",), "expected text")
    sources = data.get("sources") or {}
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        raise fail(("sources",), "expected a mapping of name -> URL or repository path")
    raw_leaves = data["leaves"]
    if not isinstance(raw_leaves, dict) or not raw_leaves:
        raise fail(("leaves",), "expected a mapping of canonical leaf -> {path, source}")
    leaves: dict[str, ProfileLeaf] = {}
    for key, spec in raw_leaves.items():
        loc: tuple[Any, ...] = ("leaves", key)
        if key not in CANONICAL:
            raise fail(loc, f"unknown canonical leaf; known: {', '.join(CANONICAL)}")
        if not isinstance(spec, dict):
            raise fail(loc, "expected {path, source[, origin, format]}")
        for k in spec:
            if k not in _LEAF_KEYS:
                raise fail((*loc, k), f"unknown key; known: {', '.join(sorted(_LEAF_KEYS))}")
        if "path" not in spec or "source" not in spec:
            raise fail(loc, "needs a path and a source (where the path was read)")
        try:
            t = parse_template(str(spec["path"]), str(spec.get("origin", origin) or ""))
        except ValueError as e:
            raise fail((*loc, "path"), str(e)) from None
        want = CANONICAL[key].template.vars
        if sorted(t.vars) != sorted(want) and sorted(t.vars) != sorted(v for v in want if v != "network_instance"):
            raise fail((*loc, "path"), f"has variables {list(t.vars)}; {key} needs {list(want)}")
        if [v for v in t.vars if v in want] != [v for v in want if v in t.vars]:
            raise fail((*loc, "path"), f"variables {list(t.vars)} are not in the order {list(want)}")
        fmt = spec.get("format", "") or ""
        if fmt not in FORMATS:
            raise fail((*loc, "format"), f"{fmt!r} is not one of: {', '.join(f or '(none)' for f in FORMATS)}")
        if fmt and CANONICAL[key].counter:
            raise fail((*loc, "format"), "counters are unsigned integers: no format")
        src = str(spec["source"])
        if src in sources:
            src = sources[src]
        elif not re.match(r"^(https?://|[\w.-]+/[\w.-]+[ :/])", src):
            raise fail((*loc, "source"), f"{src!r} is neither a key of sources nor a URL or owner/repo path")
        leaves[key] = ProfileLeaf(key, t, fmt, src)
    missing = data.get("missing") or {}
    if not isinstance(missing, dict) or not all(isinstance(v, str) for v in missing.values()):
        raise fail(("missing",), "expected a mapping of canonical leaf or group -> what flowtracer does without it")
    groups = {c.group for c in CANONICAL.values()} - {""}
    for k in missing:
        if k not in CANONICAL and k not in groups:
            raise fail(("missing", k), "neither a canonical leaf nor a subscription group")
    json_entries = data.get("json_entries", False)
    if not isinstance(json_entries, bool):
        raise fail(("json_entries",), "expected true or false")
    ns = data.get("db_target_namespace")
    if ns is not None and (not isinstance(ns, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", ns) or not origin):
        raise fail(("db_target_namespace",), "expected a namespace name (localhost), with a top-level origin")
    return Profile(platform, str(data.get("description", "")), encoding, leaves, dict(missing), source, json_entries,
                   (origin, ns) if ns else None)


def platforms() -> tuple[str, ...]:
    """Names of the shipped profiles."""
    return tuple(sorted(p.stem for p in PROFILE_DIR.glob("*.yaml")))


@cache
def load_profile(platform: str = DEFAULT_PLATFORM) -> Profile:
    """The shipped profile of ``platform``; ProfileError names the known platforms or the bad file."""
    check_platform(platform)
    path = PROFILE_DIR / f"{platform}.yaml"
    p = parse_profile(read_text(path, ProfileError), str(path))
    if p.platform != platform:
        raise ProfileError(f"{path}: platform: {p.platform!r} differs from the file's name {platform!r}")
    return p


def check_platform(platform: str) -> str:
    """``platform`` if a profile ships for it, else ValueError naming the known ones."""
    known = platforms()
    if platform not in known:
        raise ValueError(f"unknown platform {platform!r}; known: {', '.join(known)}")
    return platform
