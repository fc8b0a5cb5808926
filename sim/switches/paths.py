"""gNMI request paths: validation and matching against the served OpenConfig leaves (pure, no I/O).

A request path is checked (:func:`request_elems`: :class:`PathError` means INVALID_ARGUMENT) and
then matched against every served leaf (:func:`resolve`), following the gNMI path conventions:

* a path selects its node and everything below it (``/interfaces`` is every interface leaf);
* a list element without keys, or with the key value ``*``, matches every entry;
* an element named ``*`` matches one level, ``...`` any number of levels (including none);
* an element name may carry a YANG module prefix (``openconfig-interfaces:interfaces``);
* origin ``openconfig`` (or none; pygnmi also puts a module name there) is the only schema.

The result is a tuple of :class:`Selector`: one table, the key values it is pinned to, and the
leaves asked for. An empty tuple means the path names nothing this target serves: Get answers
NOT_FOUND, Subscribe keeps the stream open without data (gNMI spec 3.5.1.3).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from flowtracer.sim.switches.platform_tables import OC_ORIGINS, PlatformView, platform_view
from flowtracer.sim.switches.schema import Leaf, RowKey, Table

#: Origins accepted for the OpenConfig tree: none, "openconfig", or a served module's name
#: (pygnmi turns "openconfig-interfaces:interfaces/..." into origin "openconfig-interfaces").
ORIGINS = OC_ORIGINS

MAX_ELEMS = 32
MAX_MULTI_WILDCARDS = 4

_IDENT = r"[A-Za-z_][A-Za-z0-9_.-]*"
_NODE_NAME = re.compile(rf"^(?:{_IDENT}:)?{_IDENT}$")
#: A name with wildcards in it (sonic-gnmi's ``COUNTERS/Ethernet*``): matches every name, as ``*`` does.
_NAME_GLOB = re.compile(r"^[A-Za-z0-9_.-]*\*[A-Za-z0-9_.*-]*$")
_KEY_NAME = re.compile(rf"^{_IDENT}$")


class PathError(ValueError):
    """A path that cannot be interpreted (gNMI: INVALID_ARGUMENT). The message names the element."""


@dataclass(frozen=True)
class ReqElem:
    """One validated request path element; ``keys`` sorted by key name."""

    name: str
    keys: tuple[tuple[str, str], ...] = ()


def request_origin(prefix: object | None, path: object) -> str:
    """The origin of ``prefix`` + ``path`` (either may carry it; :func:`request_elems` checks they agree)."""
    return getattr(path, "origin", "") or (getattr(prefix, "origin", "") if prefix is not None else "")


def request_elems(prefix: object | None, path: object, view: PlatformView | None = None) -> tuple[ReqElem, ...]:
    """Validate ``prefix`` + ``path`` (``gnmi_pb2.Path`` messages) and return the joined elements.

    Raises :class:`PathError` for: the deprecated string ``element`` field, ``target`` outside
    the prefix, conflicting or unsupported origins, element or key names that are not YANG
    identifiers (or ``*`` / ``...``), more than MAX_ELEMS elements or MAX_MULTI_WILDCARDS ``...``
    (bounds that keep matching cheap whatever a client sends). A module prefix on an element name
    is dropped; consecutive ``...`` collapse into one.
    """
    parts = [("prefix", prefix), ("path", path)] if prefix is not None else [("path", path)]
    origins = {getattr(p, "origin", "") for _, p in parts} - {""}
    if len(origins) > 1:
        raise PathError(f"prefix origin and path origin differ: {sorted(origins)}")
    origin = origins.pop() if origins else ""
    origins = view.origins if view is not None else ORIGINS
    if origin not in origins:
        served = ", ".join(repr(o) for o in sorted(origins - (OC_ORIGINS - {"openconfig"})) if o) or "'openconfig'"
        raise PathError(f"unsupported origin {origin!r}: this target serves {served}")
    if path.target:  # type: ignore[attr-defined]
        raise PathError(f"path: 'target' ({path.target!r}) is only allowed in the prefix")  # type: ignore[attr-defined]
    out: list[ReqElem] = []
    multi = 0
    for where, p in parts:
        if p.element:  # type: ignore[attr-defined]
            raise PathError(f"{where}: the deprecated string 'element' field is not supported, use 'elem'")
        for i, e in enumerate(p.elem):  # type: ignore[attr-defined]
            name = e.name
            if name not in ("*", "...") and not _NODE_NAME.match(name) and not _NAME_GLOB.match(name):
                raise PathError(f"{where} element {i}: {name!r} is not a valid node name")
            if name == "..." and e.key:
                raise PathError(f"{where} element {i}: '...' cannot carry keys")
            for k in e.key:
                if not _KEY_NAME.match(k):
                    raise PathError(f"{where} element {i} ({name}): {k!r} is not a valid key name")
            if name == "...":
                if out and out[-1].name == "...":
                    continue  # '.../...' is '...'
                multi += 1
            if "*" in name and name not in ("*", "..."):
                name = "*"  # a glob names every entry here: what is served is what the switch has
            out.append(ReqElem(name.rsplit(":", 1)[-1], tuple(sorted(e.key.items()))))
    # The served tree is at most 10 levels deep: no matchable path has more than 21 elements after
    # collapsing, and more than 4 '...' is contrived; each '...' multiplies the backtracking.
    if len(out) > MAX_ELEMS:
        raise PathError(f"path has {len(out)} elements: more than {MAX_ELEMS} never match anything here")
    if multi > MAX_MULTI_WILDCARDS:
        raise PathError(f"path has {multi} '...' wildcards: at most {MAX_MULTI_WILDCARDS} are accepted")
    return tuple(out)


def path_str(elems: Iterable[ReqElem]) -> str:
    """Human-readable form for messages: ``/interfaces/interface[name=*]/state``."""
    parts = [e.name + "".join(f"[{k}={v}]" for k, v in e.keys) for e in elems]
    return "/" + "/".join(parts)


@dataclass(frozen=True)
class Selector:
    """Leaves of one table, for the entries whose keys equal ``binds`` (None = any value)."""

    table: Table
    binds: tuple[str | None, ...]  # aligned with table.key_names
    leaves: tuple[Leaf, ...]  # in the table's leaf order

    def matches(self, key: RowKey) -> bool:
        return all(b is None or b == k for b, k in zip(self.binds, key, strict=True))

    @cached_property
    def signature(self) -> tuple[str, tuple[int, ...]]:
        """What the encoded updates of one entry depend on besides the entry: table and leaves."""
        return self.table.name, tuple(leaf.column for leaf in self.leaves)


@dataclass(frozen=True)
class Selection:
    """A resolved request path. Empty ``selectors``: the path names nothing this target serves."""

    text: str
    selectors: tuple[Selector, ...]
    #: True when the path may match several entries (wildcards, keys left out): an empty match is
    #: then an empty result, not NOT_FOUND.
    wildcard: bool


_Tmpl = tuple[tuple[str, str | None, str | None], ...]  # (name, key, fixed value) per element


@lru_cache(maxsize=256)
def _templates(table: Table) -> list[tuple[Leaf, _Tmpl]]:
    head = tuple((e.name, e.key, e.fixed) for e in table.entity)
    return [(leaf, head + tuple((n, None, None) for n in leaf.path)) for leaf in table.leaves]


def _canonical(table: Table, key: str, value: str) -> str | None:
    """A key value as rows hold it ("007" -> "7" for integer keys); None if it can never match."""
    if key in table.uint_keys:
        return str(int(value)) if value.isascii() and value.isdigit() else None
    return value


def _match(req: Sequence[ReqElem], tmpl: _Tmpl, table: Table, i: int, j: int,
           binds: dict[str, str], out: list[dict[str, str]]) -> None:
    if i == len(req):  # the request path ended: it selects this node and all below
        out.append(dict(binds))
        return
    r = req[i]
    if r.name == "...":
        for k in range(j, len(tmpl) + 1):
            _match(req, tmpl, table, i + 1, k, binds, out)
        return
    if j == len(tmpl):
        return
    name, key, fixed = tmpl[j]
    added = None
    if not name:  # the element's name is the key's value (SONiC's COUNTERS/Ethernet0)
        if r.keys:
            return
        if r.name != "*":
            canon = _canonical(table, key or "", r.name)
            if canon is None:
                return
            binds[key or ""] = added = canon
        _match(req, tmpl, table, i + 1, j + 1, binds, out)
        if added is not None:
            del binds[key or ""]
        return
    if r.name != "*" and r.name != name:
        return
    if r.keys:
        if key is None or len(r.keys) != 1 or r.keys[0][0] != key:
            return
        value = r.keys[0][1]
        if value != "*":
            if fixed is not None:
                if value != fixed:
                    return
            else:
                canon = _canonical(table, key, value)
                if canon is None:
                    return
                binds[key] = added = canon
    _match(req, tmpl, table, i + 1, j + 1, binds, out)
    if added is not None:
        del binds[key]  # type: ignore[arg-type]


def resolve(elems: Sequence[ReqElem], use_models: Iterable[str] = (), platform: str = "openconfig",
            origin: str = "") -> Selection:
    """Every (table, key binding) the path selects, with the leaves it selects there.

    ``use_models`` (module names) keeps only leaves defined by those modules (gNMI spec 2.6);
    ``platform`` picks the served tables (``platform_tables.py``), ``origin`` those of that origin.
    Results are cached: a collector sends the same few paths to every switch.
    """
    return _resolve(tuple(elems), frozenset(use_models), platform, origin)


@lru_cache(maxsize=4096)
def _resolve(elems: tuple[ReqElem, ...], models: frozenset[str], platform: str, origin: str) -> Selection:
    found: dict[tuple[str, tuple[str | None, ...]], tuple[Table, list[Leaf]]] = {}
    view = platform_view(platform)
    for table in view.tables:
        if not view.origin_ok(table, origin):
            continue
        for leaf, tmpl in _templates(table):
            if models and not models.intersection(leaf.models):
                continue
            matches: list[dict[str, str]] = []
            _match(elems, tmpl, table, 0, 0, {}, matches)
            for binds in matches:
                b = tuple(binds.get(k) for k in table.key_names)
                entry = found.setdefault((table.name, b), (table, []))
                if leaf not in entry[1]:
                    entry[1].append(leaf)
    selectors = tuple(Selector(t, b, tuple(sorted(leaves, key=t.leaves.index)))
                      for (_, b), (t, leaves) in found.items())
    # Wildcard: the path has one, or leaves out the key of a list at or right below its end ("/interfaces"). Lists
    # deeper do not count: "/interfaces/interface[name=E1]" names one entry, subinterfaces and all.
    wildcard = (any(e.name in ("*", "...") or any(v == "*" for _, v in e.keys) for e in elems)
                or any(b is None and _depth(s.table, k) <= len(elems)
                       for s in selectors for b, k in zip(s.binds, s.table.key_names, strict=True)))
    return Selection(path_str(elems), selectors, wildcard)


def _depth(table: Table, key: str) -> int:
    """Position in the table's entity path of the list keyed by ``key``."""
    return next(i for i, e in enumerate(table.entity) if e.key == key and e.fixed is None)


def entity_elems(table: Table, key: RowKey) -> list[tuple[str, dict[str, str]]]:
    """The concrete path elements of one table entry: ``[("interfaces", {}), ("interface", {"name": "Ethernet1"})]``."""
    values = iter(key)
    out: list[tuple[str, dict[str, str]]] = []
    for e in table.entity:
        if e.key is None:
            out.append((e.name, {}))
        elif not e.name:
            out.append((next(values), {}))
        else:
            out.append((e.name, {e.key: e.fixed if e.fixed is not None else next(values)}))
    return out
