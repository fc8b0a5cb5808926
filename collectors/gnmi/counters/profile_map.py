"""Platform paths -> canonical OpenConfig leaves, by a vendor profile (pure).

The decoder asks once per distinct path (it caches what a path resolves to), so the per-update cost of a profile
is nil: a SR Linux ``/interface[name=e1]/statistics/in-octets`` resolves, the first time it is seen, to the same
``RES_IF_COUNTER`` an OpenConfig ``.../state/counters/in-octets`` does. The mapping rule itself (templates, value
formats) is ``fabric/platform_profiles.py``, shared with the simulator that serves the same paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from flowtracer.fabric.platform_profiles import CANONICAL, VARS, Profile, Template

Elems = Sequence[tuple[str, Mapping[str, str]]]
_OC = frozenset({"", "openconfig"})


def origin_key(origin: str) -> str:
    """Origins compared as one: none and ``openconfig`` are the same tree."""
    return "" if origin in _OC else origin


class PathMapper:
    """Matches received paths (element names and keys, module prefixes stripped) against a profile's templates."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.origins = frozenset(origin_key(leaf.template.origin) for leaf in profile.leaves.values())
        #: (origin, leaf name) -> [(template, canonical key, format)]
        self._by_leaf: dict[tuple[str, str], list[tuple[Template, str, str]]] = {}
        for leaf in profile.leaves.values():
            t = leaf.template
            name = t.elems[-1].name or ""
            self._by_leaf.setdefault((origin_key(t.origin), name), []).append((t, leaf.key, leaf.format))
        #: (origin, template, canonical key) of every mapped leaf
        self._entries = [(origin_key(leaf.template.origin), leaf.template, leaf.key)
                         for leaf in profile.leaves.values()]
        self._templates = [(o, t) for o, t, _ in self._entries]
        #: list element name -> its key name, to unpack JSON lists (``interface`` -> ``name``)
        self.list_keys: dict[str, str] = {e.name: e.key for _, t in self._templates for e in t.elems
                                          if e.name is not None and e.key is not None}

    def translate(self, origin: str, elems: Elems) -> tuple[tuple[str, ...], dict[str, str], str] | None:
        """(canonical element names, keys by list name, value format) of a platform leaf, or None."""
        if not elems:
            return None
        for t, key, fmt in self._by_leaf.get((origin_key(origin), elems[-1][0]), ()):
            values = t.match(elems)
            if values is None:
                continue
            canon = CANONICAL[key].template
            keys = {VARS[var]: v for var, v in values.items()}
            if "network_instance" in canon.vars:
                keys.setdefault(VARS["network_instance"], "default")
            return tuple(e.name or "" for e in canon.elems), keys, fmt
        return None

    def entity(self, origin: str, elems: Elems) -> tuple[tuple[str, ...], dict[str, str]] | None:
        """The canonical entry (element names up to its list, keys) a platform entry path names, for deletes:
        ``/interface[name=e1]`` on SR Linux is ``/interfaces/interface[name=e1]``; None if it names none."""
        o = origin_key(origin)
        for to, t, key in self._entries:
            if to != o or len(elems) > len(t.elems) or t.elems[len(elems) - 1].var is None:
                continue
            values = Template(t.origin, t.elems[:len(elems)]).match(elems)
            if values is None:
                continue
            canon = CANONICAL[key].template
            last = t.elems[len(elems) - 1].var
            end = next(i for i, e in enumerate(canon.elems) if e.var == last) + 1
            keys = {VARS[var]: v for var, v in values.items()}
            if "network_instance" in canon.vars:
                keys.setdefault(VARS["network_instance"], "default")
            return tuple(e.name or "" for e in canon.elems[:end]), keys
        return None

    def is_container(self, origin: str, elems: Elems) -> bool:
        """Whether ``elems`` lies above some mapped leaf (a JSON object there is unpacked)."""
        o = origin_key(origin)
        return any(to == o and t.is_prefix(elems) for to, t in self._templates)
