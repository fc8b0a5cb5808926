"""SubscribeResponse -> typed samples: the pure decoding core (gnmic's ResponseToEventMsgs). It is over 500 lines
because the leaf table and the ``Decoder`` that walks it are one rule set (which OpenConfig or platform leaf goes
where, with which conversion); splitting the table from its walker would put one decision in two places. The
typed-value conversions are ``leaf_values``, the output ``samples``.

One ``gnmi.Notification`` becomes one ``Samples``: interface counters, interface state, next-hop
counters (both AFT counter trees), next-hop attributes (IP, interface-ref) and next-hop-group
membership, egress-queue counters and watermarks (openconfig-qos) and per-priority PFC pause
frames, plus deletes and per-update decode errors. Nothing here does I/O or keeps state.

What it understands:

* ``prefix + path``, with or without origin (``openconfig`` or none; other origins are not
  OpenConfig and are ignored); YANG module prefixes in element names
  (``openconfig-interfaces:interfaces``) are stripped.
* Through a vendor profile (``profile_map.py``): the platform's own paths. A profile with
  ``db_target_namespace`` (SONiC) also reads the target-addressed form of its DB paths: prefix target
  ``COUNTERS_DB``, path ``COUNTERS/Ethernet9`` is ``sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet9``
  (sonic-net/SONiC ``doc/system-telemetry/grpc_telemetry.md``). A wildcard element in a response
  (``COUNTERS/Ethernet*``) has its JSON value keyed by what it matched.
* What is not read is counted, never dropped silently: ``Samples.ignored`` and, by the path's *shape*
  (keys and digit runs as ``*``: ``/state/port[port-id=*]/statistics/in-octets``),
  ``Samples.ignored_shapes``.
* PROTO typed values (``uint_val``, ``int_val``, ``string_val``, ...) and JSON / JSON_IETF values,
  where 64-bit integers arrive as strings (RFC 7951) and a subscription to a container yields
  one JSON object per update, flattened here (list entries keyed by their YANG list key).
* Timestamps as ns since the epoch; a device that sends s, ms or us is recognised by magnitude.
* Keys from the path elements: ``interface[name]``, ``network-instance[name]``,
  ``next-hop[index]``, ``next-hop-group[id]``; under ``/qos``: ``interface[interface-id]``,
  ``queue[name]``, ``pfc-priority[index]``. A wildcard (``*``) key in a response is an error.

Why not pygnmi's ``telemetryParser``: it builds dicts of strings for every update, drops the
origin and turns timestamp 0 into None; measured ~10x slower than this module (bench/).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import Any

from pygnmi.spec.v080.gnmi_pb2 import Notification, Path

from flowtracer.collectors.gnmi.counters.leaf_values import (
    DecodeError,
    as_oper_status,
    as_port_speed,
    as_timeticks,
    as_uint,
    is_decimal,
    normalize_timestamp,
    typed_scalar,
)
from flowtracer.collectors.gnmi.counters.profile_map import Elems, PathMapper
from flowtracer.collectors.gnmi.counters.samples import (
    LAST_CHANGE_NS,
    LAST_CLEAR_NS,
    NH_INTERFACE,
    NH_IP,
    OPER_STATUS,
    SPEED_BPS,
    Samples,
)
from flowtracer.collectors.gnmi.counters.shapes import count_shape, names_shape, path_shape, shape_text
from flowtracer.fabric.platform_formats import from_platform
from flowtracer.fabric.platform_profiles import Profile
from flowtracer.schemas.openconfig import (
    INTERFACE_COUNTERS,
    NEXT_HOP_COUNTERS,
    PFC_COUNTERS,
    QUEUE_COUNTERS,
    QUEUE_WATERMARK,
)

#: YANG list key leaf per list name, to flatten JSON lists and to read path keys.
LIST_KEYS = {"interface": "name", "network-instance": "name", "next-hop": "index", "next-hop-group": "id",
             "subinterface": "index", "queue": "name", "pfc-priority": "index"}
#: Lists whose key leaf has another name in another model: openconfig-qos keys its interfaces by interface-id.
ALT_LIST_KEYS = {"interface": "interface-id"}
_OC_ORIGINS = frozenset({"", "openconfig"})


# -- the leaf table ----------------------------------------------------------------------------
# Handlers get (samples, keys, value); keys maps list name -> key value along the path.

Handler = Callable[[Samples, dict[str, str], Any], None]
_IF = ("interfaces", "interface")
_AFT = ("network-instances", "network-instance", "afts")


def key_value(keys: dict[str, str], name: str) -> str:
    v = keys.get(name)
    if v is None or v == "" or v == "*":
        raise DecodeError(f"missing or wildcard key {name}[{LIST_KEYS[name]}]")
    return v


def _index(keys: dict[str, str], name: str) -> int:
    v = key_value(keys, name)
    if not is_decimal(v, 20):
        raise DecodeError(f"{name} index {v!r} is not an unsigned integer")
    return int(v)


def _if_counter(i: int) -> Handler:
    def h(s: Samples, keys: dict[str, str], v: Any) -> None:
        s.if_counters.append((key_value(keys, "interface"), i, as_uint(v)))
    return h


def _if_state(fld: str, conv: Callable[[Any], int]) -> Handler:
    def h(s: Samples, keys: dict[str, str], v: Any) -> None:
        s.if_state.append((key_value(keys, "interface"), fld, conv(v)))
    return h


def _nh_counter(i: int, newer: bool) -> Handler:
    def h(s: Samples, keys: dict[str, str], v: Any) -> None:
        s.nh_counters.append((key_value(keys, "network-instance"), _index(keys, "next-hop"), i, as_uint(v), newer))
    return h


def _nh_info(fld: str) -> Handler:
    def h(s: Samples, keys: dict[str, str], v: Any) -> None:
        s.nh_info.append((key_value(keys, "network-instance"), _index(keys, "next-hop"), fld, str(v)))
    return h


def _nhg_member(s: Samples, keys: dict[str, str], v: Any) -> None:
    s.nhg_members.append((key_value(keys, "network-instance"), key_value(keys, "next-hop-group"),
                          _index(keys, "next-hop"), as_uint(v) or 1))


def _nhg_index(s: Samples, keys: dict[str, str], v: Any) -> None:
    # A member listed by its index leaf only: weight 1 unless a weight leaf says otherwise.
    s.nhg_members.append((key_value(keys, "network-instance"), key_value(keys, "next-hop-group"), as_uint(v), 0))


def _queue_counter(i: int) -> Handler:
    def h(s: Samples, keys: dict[str, str], v: Any) -> None:
        s.queue_counters.append((key_value(keys, "interface"), key_value(keys, "queue"), i, as_uint(v)))
    return h


def _queue_watermark(s: Samples, keys: dict[str, str], v: Any) -> None:
    s.queue_watermarks.append((key_value(keys, "interface"), key_value(keys, "queue"), as_uint(v)))


def _pfc_counter(i: int) -> Handler:
    def h(s: Samples, keys: dict[str, str], v: Any) -> None:
        prio = _index(keys, "pfc-priority")
        if prio > 7:
            raise DecodeError(f"PFC priority {prio} is not 0-7")
        s.pfc_counters.append((key_value(keys, "interface"), prio, i, as_uint(v)))
    return h


#: Interface state leaves that are device timestamps (uint64 time ticks, scaled by normalize_timestamp).
IF_TIMETICKS: dict[tuple[str, ...], str] = {
    (*_IF, "state", "counters", "last-clear"): LAST_CLEAR_NS,
    (*_IF, "state", "last-change"): LAST_CHANGE_NS,
}


def _build_table() -> dict[tuple[str, ...], Handler]:
    t: dict[tuple[str, ...], Handler] = {}
    for i, c in enumerate(INTERFACE_COUNTERS):
        t[(*_IF, "state", "counters", c)] = _if_counter(i)
    for leaf, fld in IF_TIMETICKS.items():
        t[leaf] = _if_state(fld, as_timeticks)
    t[(*_IF, "state", "oper-status")] = _if_state(OPER_STATUS, as_oper_status)
    t[(*_IF, "ethernet", "state", "port-speed")] = _if_state(SPEED_BPS, as_port_speed)
    t[(*_IF, "ethernet", "state", "negotiated-port-speed")] = _if_state(SPEED_BPS, as_port_speed)
    for i, c in enumerate(NEXT_HOP_COUNTERS):
        t[(*_AFT, "next-hops", "next-hop", "state", "counters", c)] = _nh_counter(i, False)
        t[(*_AFT, "counters", "next-hops", "next-hop", "state", c)] = _nh_counter(i, True)
        t[(*_AFT, "counters", "next-hops", "next-hop", "state", "counters", c)] = _nh_counter(i, True)
    t[(*_AFT, "next-hops", "next-hop", "state", "ip-address")] = _nh_info(NH_IP)
    t[(*_AFT, "next-hops", "next-hop", "interface-ref", "state", "interface")] = _nh_info(NH_INTERFACE)
    member = (*_AFT, "next-hop-groups", "next-hop-group", "next-hops", "next-hop")
    t[(*member, "state", "weight")] = _nhg_member
    t[(*member, "state", "index")] = _nhg_index
    queue = ("qos", "interfaces", "interface", "output", "queues", "queue", "state")
    for i, c in enumerate(QUEUE_COUNTERS):
        t[(*queue, c)] = _queue_counter(i)
    t[(*queue, QUEUE_WATERMARK)] = _queue_watermark
    for i, c in enumerate(PFC_COUNTERS):
        t[("qos", "interfaces", "interface", "pfc", "statistics", "pfc-priority", c)] = _pfc_counter(i)
    return t


LEAVES: dict[tuple[str, ...], Handler] = _build_table()
_DELETES: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {
    _IF: ("interface", ("interface",)),
    (*_AFT, "next-hops", "next-hop"): ("next-hop", ("network-instance", "next-hop")),
    (*_AFT, "next-hop-groups", "next-hop-group"): ("group", ("network-instance", "next-hop-group")),
    (*_AFT, "next-hop-groups", "next-hop-group", "next-hops", "next-hop"):
        ("member", ("network-instance", "next-hop-group", "next-hop")),
}
#: Every path (as element names) that leads to a leaf we use; containers above are walked in JSON.
_PREFIXES = frozenset(p[:i] for p in LEAVES for i in range(1, len(p)))


# -- paths -------------------------------------------------------------------------------------


def _walk(path: Path, names: list[str], keys: dict[str, str]) -> None:
    """Append ``path``'s element names (module prefix stripped) and its list keys."""
    for e in path.elem:
        name = e.name
        if ":" in name:
            name = name.rsplit(":", 1)[1]
        names.append(name)
        if e.key:
            k = LIST_KEYS.get(name)
            v = e.key.get(k) if k else None
            if v is None:
                v = next(iter(e.key.values()))
            keys[name] = v


def _flatten(s: Samples, names: tuple[str, ...], keys: dict[str, str], obj: dict[str, Any]) -> None:
    """Emit the leaves of a JSON container value (RFC 7951), list entries keyed by LIST_KEYS."""
    for raw_k, v in obj.items():
        k = raw_k.rsplit(":", 1)[-1]
        sub = (*names, k)
        if isinstance(v, dict):
            if sub in _PREFIXES:
                _flatten(s, sub, keys, v)
            else:
                count_ignored(s, names_shape(sub))
        elif isinstance(v, list) and k in LIST_KEYS:
            if sub not in _PREFIXES:
                count_ignored(s, names_shape(sub))
                continue
            for item in v:
                kname = LIST_KEYS[k] if not isinstance(item, dict) or LIST_KEYS[k] in item else ALT_LIST_KEYS.get(k, "")
                if isinstance(item, dict) and kname in item:
                    _flatten(s, sub, {**keys, k: str(item[kname])}, item)
                else:
                    s.errors.append(f"/{'/'.join(sub)}: list entry without key {LIST_KEYS[k]!r}")
        else:
            _leaf(s, sub, keys, v)


def _leaf(s: Samples, names: tuple[str, ...], keys: dict[str, str], v: Any) -> None:
    h = LEAVES.get(names)
    if h is None:
        count_ignored(s, names_shape(names))
        return
    try:
        h(s, keys, v)
    except DecodeError as e:
        s.errors.append(f"/{'/'.join(names)}{_keys_text(keys)}: {e}")


def _keys_text(keys: dict[str, str]) -> str:
    return "".join(f"[{k}={v}]" for k, v in keys.items())


# -- the entry point ---------------------------------------------------------------------------

# Resolved paths, cached by their serialized bytes: (code, args...). Resolving walks the path
# elements (slow in Python); a switch repeats the same few thousand paths every sample.
# (RES_IF_COUNTER, interface, counter index) | (RES_NH_COUNTER, ni, next-hop index, counter index,
# newer tree) | (RES_LEAF, handler, keys, names) | (RES_CONTAINER, names, keys) | (RES_ERROR, message)
# | (RES_IGNORE, shape of the path)
# | (RES_QUEUE_COUNTER, interface, queue, counter index) | (RES_QUEUE_WATERMARK, interface, queue)
# | (RES_PFC_COUNTER, interface, priority, counter index)
RES_IGNORE, RES_IF_COUNTER, RES_NH_COUNTER, RES_LEAF, RES_CONTAINER, RES_ERROR = range(6)
RES_QUEUE_COUNTER, RES_QUEUE_WATERMARK, RES_PFC_COUNTER = range(6, 9)
#: (RES_PCONTAINER, origin, platform elements): above a profile's leaves (a JSON object there is unpacked).
RES_PCONTAINER = 9
#: The codes whose value is one uint64 counter (read by the fast paths).
COUNTER_CODES = frozenset({RES_IF_COUNTER, RES_NH_COUNTER, RES_QUEUE_COUNTER, RES_QUEUE_WATERMARK, RES_PFC_COUNTER})
_QUEUE_STATE = ("qos", "interfaces", "interface", "output", "queues", "queue", "state")
_PFC_PRIORITY = ("qos", "interfaces", "interface", "pfc", "statistics", "pfc-priority")
_Resolved = tuple[Any, ...]


class Decoder:
    """Notification -> Samples, with a bounded cache of resolved paths.

    Resolution depends only on the path bytes, so one Decoder can serve every target of a
    process (switches of one fabric repeat the same paths). ``max_cache``: resolved (prefix,
    path) pairs kept; the cache is emptied when it is full. Not thread-safe (one event loop).
    """

    def __init__(self, max_cache: int = 200_000, profile: Profile | None = None) -> None:
        self.max_cache = max_cache
        #: Platform paths -> canonical leaves (None: OpenConfig, read as it comes).
        self.mapper = PathMapper(profile) if profile is not None and not profile.is_openconfig else None
        self._cache: dict[bytes, dict[bytes, _Resolved]] = {}
        self._size = 0

    def _resolve(self, prefix: Path | None, path: Path) -> _Resolved:
        r = self._resolve_path(prefix, path)
        return (RES_IGNORE, path_shape(prefix, path)) if r[0] == RES_IGNORE else r

    def _resolve_path(self, prefix: Path | None, path: Path) -> _Resolved:
        origin = path.origin or (prefix.origin if prefix is not None else "")
        if self.mapper is not None:
            return self._resolve_platform(origin, prefix, path)
        if origin not in _OC_ORIGINS:
            return (RES_IGNORE,)
        names: list[str] = []
        keys: dict[str, str] = {}
        if prefix is not None:
            _walk(prefix, names, keys)
        _walk(path, names, keys)
        return self._resolve_names(tuple(names), keys)

    def _resolve_platform(self, origin: str, prefix: Path | None, path: Path) -> _Resolved:
        """A platform path through the profile: its canonical leaf, resolved as OpenConfig's would be."""
        assert self.mapper is not None
        elems = platform_elems(prefix, path)
        target = prefix.target if prefix is not None else ""
        db = self.mapper.profile.db_target
        if db is not None and not origin and _DB_TARGET.match(target):
            # SONiC's target-addressed form: prefix target COUNTERS_DB + COUNTERS/Ethernet9 is the DB path
            # /COUNTERS_DB/<namespace>/COUNTERS/Ethernet9 of the profile's origin (sonic-db).
            origin = db[0]
            elems = ((target, {}), (db[1], {}), *elems)
        if origin not in self.mapper.origins and not (origin in _OC_ORIGINS and "" in self.mapper.origins):
            return (RES_IGNORE,)
        if any("*" in name for name, _ in elems):  # a wildcard answer: its JSON is keyed by what matched
            return (RES_PCONTAINER, origin, elems)
        m = self.mapper.translate(origin, elems)
        if m is None:
            return (RES_PCONTAINER, origin, elems) if (not elems or self.mapper.is_container(origin, elems)) \
                else (RES_IGNORE,)
        names, keys, fmt = m
        r = self._resolve_names(names, keys)
        if fmt and r[0] == RES_LEAF:  # a state leaf written another way: convert, then the canonical handler
            return (RES_LEAF, _converting(r[1], fmt), r[2], r[3])
        return r

    def _resolve_names(self, t: tuple[str, ...], keys: dict[str, str]) -> _Resolved:
        """What the canonical (OpenConfig) leaf or container ``t`` with ``keys`` is."""
        h = LEAVES.get(t)
        if h is None:
            return (RES_CONTAINER, t, keys) if (t in _PREFIXES or not t) else (RES_IGNORE,)
        try:  # the hot leaves get their keys resolved once, here
            if t[-1] in INTERFACE_COUNTERS and t[:4] == (*_IF, "state", "counters"):
                return (RES_IF_COUNTER, key_value(keys, "interface"), INTERFACE_COUNTERS.index(t[-1]))
            if t[-1] in NEXT_HOP_COUNTERS and t[:3] == _AFT:
                return (RES_NH_COUNTER, key_value(keys, "network-instance"), _index(keys, "next-hop"),
                        NEXT_HOP_COUNTERS.index(t[-1]), t[3] == "counters")
            if t[:7] == _QUEUE_STATE:
                where = (key_value(keys, "interface"), key_value(keys, "queue"))
                if t[-1] == QUEUE_WATERMARK:
                    return (RES_QUEUE_WATERMARK, *where)
                return (RES_QUEUE_COUNTER, *where, QUEUE_COUNTERS.index(t[-1]))
            if t[:6] == _PFC_PRIORITY:
                prio = _index(keys, "pfc-priority")
                if prio > 7:
                    raise DecodeError(f"PFC priority {prio} is not 0-7")
                return (RES_PFC_COUNTER, key_value(keys, "interface"), prio, PFC_COUNTERS.index(t[-1]))
        except DecodeError as e:
            return (RES_ERROR, f"/{'/'.join(t)}{_keys_text(keys)}: {e}")
        return (RES_LEAF, h, keys, t)

    def resolve(self, prefix: Path | None, path: Path) -> _Resolved:
        """What ``prefix + path`` is (a ``RES_*`` tuple, see above), from the cache."""
        pkey = prefix.SerializeToString() if prefix is not None else b""
        pb = path.SerializeToString()
        r = self._cache.get(pkey, {}).get(pb)
        return r if r is not None else self._miss(pkey, prefix, path, pb)

    def _miss(self, pkey: bytes, prefix: Path | None, path: Path, pb: bytes) -> _Resolved:
        """Resolve a path that is not cached and cache it (the cache is emptied when full)."""
        if self._size >= self.max_cache:
            self._cache.clear()
            self._size = 0
        r = self._cache.setdefault(pkey, {})[pb] = self._resolve(prefix, path)
        self._size += 1
        return r

    def decode(self, n: Notification) -> Samples:
        """Decode one Notification (prefix + updates + deletes) into ``Samples``."""
        s = Samples(normalize_timestamp(n.timestamp))
        prefix = n.prefix if n.HasField("prefix") else None
        pkey = prefix.SerializeToString() if prefix is not None else b""
        cache = self._cache.get(pkey)
        if cache is None:
            cache = self._cache[pkey] = {}
        if_counters, nh_counters = s.if_counters, s.nh_counters
        for u in n.update:
            p = u.path
            pb = p.SerializeToString()
            r = cache.get(pb)
            if r is None:
                r = self._miss(pkey, prefix, p, pb)
                cache = self._cache[pkey]  # a new dict if the cache was emptied
            code = r[0]
            tv = u.val
            if code in COUNTER_CODES:
                v = tv.uint_val
                if not v and tv.WhichOneof("value") != "uint_val":  # JSON, string, int_val, ...
                    try:
                        v = as_uint(typed_scalar(tv))
                    except DecodeError as e:
                        s.errors.append(f"{format_key(prefix, p)}: {e}")
                        continue
                if code == RES_IF_COUNTER:
                    if_counters.append((r[1], r[2], v))
                elif code == RES_NH_COUNTER:
                    nh_counters.append((r[1], r[2], r[3], v, r[4]))
                elif code == RES_QUEUE_COUNTER:
                    s.queue_counters.append((r[1], r[2], r[3], v))
                elif code == RES_PFC_COUNTER:
                    s.pfc_counters.append((r[1], r[2], r[3], v))
                else:
                    s.queue_watermarks.append((r[1], r[2], v))
            elif code == RES_IGNORE:  # count_ignored, inlined: a switch may send thousands of leaves we skip
                s.ignored += 1
                shapes, shape = s.ignored_shapes, r[1]
                if shape in shapes:
                    shapes[shape] += 1
                else:
                    count_shape(shapes, shape)
            elif code == RES_ERROR:
                s.errors.append(r[1])
            else:
                try:
                    val = typed_scalar(tv)
                except DecodeError as e:
                    s.errors.append(f"{format_key(prefix, p)}: {e}")
                    continue
                if code == RES_LEAF:
                    try:
                        r[1](s, r[2], val)
                    except DecodeError as e:
                        s.errors.append(f"/{'/'.join(r[3])}{_keys_text(r[2])}: {e}")
                elif code == RES_PCONTAINER and isinstance(val, dict):
                    self._flatten_platform(s, r[1], list(r[2]), val)
                elif code == RES_CONTAINER and isinstance(val, dict):
                    _flatten(s, r[1], r[2], val)
                else:
                    count_ignored(s, path_shape(prefix, p))
        for p in n.delete:
            self._delete(s, prefix, p)
        return s

    def _flatten_platform(self, s: Samples, origin: str, elems: list[tuple[str, dict[str, str]]],
                          obj: dict[str, Any]) -> None:
        """Emit the leaves of a JSON object on a platform path (e.g. a SONiC port's COUNTERS blob)."""
        assert self.mapper is not None
        glob = next((i for i, (name, keys) in enumerate(elems) if "*" in name and not keys), None)
        if glob is not None:  # COUNTERS/Ethernet*[/leaf] answers {"Ethernet0": {...}, ...}: one entry per match
            for k, v in obj.items():
                if isinstance(v, dict) and fnmatch.fnmatchcase(k, elems[glob][0]):
                    self._flatten_platform(s, origin, [*elems[:glob], (k, {})], v)
                else:
                    count_ignored(s, shape_text(origin, "", [*elems[:glob], (k, {})]))
            return
        for raw_k, v in obj.items():
            k = raw_k.rsplit(":", 1)[-1]
            sub = [*elems, (k, {})]
            if isinstance(v, dict):
                if self.mapper.is_container(origin, sub):
                    self._flatten_platform(s, origin, sub, v)
                else:
                    count_ignored(s, shape_text(origin, "", sub))
            elif isinstance(v, list) and k in self.mapper.list_keys:
                kname = self.mapper.list_keys[k]
                for item in v:
                    if isinstance(item, dict) and kname in item:
                        self._flatten_platform(s, origin, [*elems, (k, {kname: str(item[kname])})], item)
                    else:
                        s.errors.append(f"{_elems_text(sub)}: list entry without key {kname!r}")
            else:
                m = self.mapper.translate(origin, sub)
                if m is None:
                    count_ignored(s, shape_text(origin, "", sub))
                    continue
                names, keys, fmt = m
                try:
                    _leaf(s, names, keys, from_platform(fmt, v) if fmt else v)
                except ValueError as e:
                    s.errors.append(f"{_elems_text(sub)}: {e}")

    def _delete(self, s: Samples, prefix: Path | None, p: Path) -> None:
        names: list[str] = []
        keys: dict[str, str] = {}
        if self.mapper is not None:  # a platform's entry: its canonical entry (SR Linux /interface[name=e1])
            entity = self.mapper.entity(p.origin or (prefix.origin if prefix is not None else ""),
                                        platform_elems(prefix, p))
            if entity is None:
                return
            names, keys = list(entity[0]), entity[1]
        else:
            if prefix is not None:
                _walk(prefix, names, keys)
            _walk(p, names, keys)
        what = _DELETES.get(tuple(names))
        if what is None:
            return  # a leaf went away: the next sample says what it is now
        kind, key_names = what
        try:
            ident: tuple[Any, ...] = tuple(
                _index(keys, k) if k == "next-hop" else key_value(keys, k) for k in key_names)
        except DecodeError as e:
            s.errors.append(f"delete /{'/'.join(names)}: {e}")
            return
        s.deletes.append((kind, *ident))


def platform_elems(prefix: Path | None, path: Path) -> Elems:
    """``prefix + path`` as (element name, keys) pairs, YANG module prefixes stripped."""
    out = []
    for p in (prefix, path):
        if p is not None:
            out += [(e.name.rsplit(":", 1)[-1], dict(e.key)) for e in p.elem]
    return tuple(out)


_DB_TARGET = re.compile(r"^[A-Z][A-Z0-9_]*_DB$")
"""A SONiC database name as a prefix target (``COUNTERS_DB``, ``APPL_DB``, ``STATE_DB``)."""


def count_ignored(s: Samples, shape: str) -> None:
    """Count one update that is not read, by its shape."""
    s.ignored += 1
    count_shape(s.ignored_shapes, shape)


def _elems_text(elems: Elems) -> str:
    return "/" + "/".join(n + "".join(f"[{k}={v}]" for k, v in keys.items()) for n, keys in elems)


def _converting(h: Handler, fmt: str) -> Handler:
    """``h`` after converting the value from the platform's format (``fabric/platform_formats.py``)."""
    def conv(s: Samples, keys: dict[str, str], v: Any) -> None:
        try:
            v = from_platform(fmt, v)
        except ValueError as e:
            raise DecodeError(str(e)) from None
        h(s, keys, v)
    return conv


def format_key(prefix: Path | None, path: Path) -> str:
    """Readable ``/a/b[k=v]`` of prefix + path for error messages."""
    names: list[str] = []
    keys: dict[str, str] = {}
    if prefix is not None:
        _walk(prefix, names, keys)
    _walk(path, names, keys)
    return f"/{'/'.join(names)}{_keys_text(keys)}"


def decode_notification(n: Notification) -> Samples:
    """Decode one Notification without a shared cache (tests, one-off use)."""
    return Decoder().decode(n)

