"""The served tables as a platform has them: the same rows under a vendor profile's paths (pure).

A simulated switch serves OpenConfig (``schema.TABLES``) by default. As another platform
(``fabric/profiles/<platform>.yaml``) it serves, for every leaf the profile maps, the same row column under the
platform's path, origin and value format, and nothing the profile does not map (SR Linux has no AFT counters:
neither has the simulated SR Linux). Each OpenConfig table becomes one platform table per distinct entity path:
SONiC's interface leaves live in two (``COUNTERS_DB/.../COUNTERS/{port}`` and ``APPL_DB/.../PORT_TABLE/{port}``),
both read from the ``interface`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from flowtracer.fabric.platform_profiles import CANONICAL, UINT_VARS, load_profile
from flowtracer.sim.switches.schema import MODELS, TABLES, EntityElem, Leaf, LeafType, Table

#: Origins of the OpenConfig tree: none, "openconfig", or a served module's name (pygnmi turns
#: "openconfig-interfaces:interfaces/..." into origin "openconfig-interfaces").
OC_ORIGINS = frozenset({"", "openconfig", *(name for name, _, _ in MODELS)})

_FORMAT_TYPE = {"lower": LeafType.ENUM}


@dataclass(frozen=True)
class PlatformView:
    """What a switch serves as ``platform``: its tables and the origins its paths may carry."""

    platform: str
    tables: tuple[Table, ...]
    origins: frozenset[str]

    def origin_ok(self, table: Table, origin: str) -> bool:
        """Whether a request with ``origin`` may select ``table``'s leaves."""
        if not table.origin:
            return origin in OC_ORIGINS
        return origin == table.origin


def _canonical_keys() -> dict[tuple[str, tuple[str, ...]], str]:
    """(OpenConfig table, leaf path) -> canonical leaf key, matched on element names."""
    by_names = {tuple(e.name for e in c.template.elems): key for key, c in CANONICAL.items()}
    out = {}
    for t in TABLES:
        head = tuple(e.name for e in t.entity)
        for leaf in t.leaves:
            key = by_names.get(head + leaf.path)
            if key is not None:
                out[(t.name, leaf.path)] = key
    return out


@cache
def platform_view(platform: str) -> PlatformView:
    """The tables ``platform`` serves (OpenConfig's own for ``openconfig``)."""
    profile = load_profile(platform)
    if profile.is_openconfig:
        return PlatformView(platform, TABLES, OC_ORIGINS)
    canonical = _canonical_keys()
    tables: list[Table] = []
    for t in TABLES:
        groups: dict[tuple[str, tuple[EntityElem, ...]], list[Leaf]] = {}
        uints: set[str] = set()
        for leaf in t.leaves:
            key = canonical.get((t.name, leaf.path))
            pl = profile.leaves.get(key) if key else None
            if pl is None:
                continue
            elems = pl.template.elems
            last = max(i for i, e in enumerate(elems) if e.var is not None or e.key is not None)
            entity = []
            for e in elems[:last + 1]:
                if e.var == "network_instance":
                    entity.append(EntityElem(e.name or "", e.key, fixed="default"))
                elif e.var is not None:
                    key_name = e.key if e.name is not None else e.var
                    entity.append(EntityElem(e.name or "", key_name))
                    if e.var in UINT_VARS:
                        uints.add(key_name or "")
                else:
                    entity.append(EntityElem(e.name or "", e.key, e.fixed))
            tail = tuple(e.name or "" for e in elems[last + 1:])
            served = replace(leaf, path=tail, models=(platform,), format=pl.format,
                             type=_FORMAT_TYPE.get(pl.format, LeafType.STRING) if pl.format else leaf.type)
            groups.setdefault((pl.template.origin, tuple(entity)), []).append(served)
        for i, ((origin, entity), leaves) in enumerate(groups.items()):
            tables.append(Table(f"{t.name}@{platform}/{i}", t.source, entity, tuple(leaves),
                                frozenset(uints), origin="" if origin == "openconfig" else origin,
                                json_entries=profile.json_entries))
    origins = frozenset(t.origin for t in tables) | (OC_ORIGINS if any(not t.origin for t in tables) else frozenset())
    return PlatformView(platform, tuple(tables), origins)
