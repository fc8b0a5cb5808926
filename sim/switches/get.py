"""The gNMI Get RPC without I/O: a GetRequest and one tick in, GetResponse bytes out.

One Notification per requested path (gNMI 3.3.2), one Update per leaf with its full path; the
prefix carries origin ``openconfig`` and the request's target. A path this target does not serve,
or a fully keyed entry that does not exist, is NOT_FOUND; a wildcard that matches nothing yields
an empty Notification. All served leaves are state (``config false``): type CONFIG returns
Notifications without updates.
"""

from __future__ import annotations

from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.sim.switches.encode import UpdateEncoder, get_response, notification, prefix_field
from flowtracer.sim.switches.paths import PathError, request_elems, request_origin, resolve
from flowtracer.sim.switches.platform_tables import platform_view
from flowtracer.sim.switches.schema import Tick
from flowtracer.sim.switches.subscription import MAX_PATHS, GnmiError, check_encoding, matched_keys, prefix_origin

_TYPES = gnmi_pb2.GetRequest.DataType


def get(request: gnmi_pb2.GetRequest, tick: Tick, encoder: UpdateEncoder, now_ns: int,
        platform: str = "openconfig") -> bytes:
    """Serialized GetResponse; raises GnmiError (INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED).

    Notifications are stamped with the tick's ``timestamp_ns``, or ``now_ns`` (ns since the Unix
    epoch) before the engine's first tick.
    """
    check_encoding(request.encoding)
    if request.type not in _TYPES.values():
        raise GnmiError("INVALID_ARGUMENT", f"GetRequest.type {request.type} is not ALL, CONFIG, STATE or OPERATIONAL")
    prefix = request.prefix if request.HasField("prefix") else None
    paths = list(request.path) or [gnmi_pb2.Path()]  # no path: the prefix itself (or the root)
    if len(paths) > MAX_PATHS:
        raise GnmiError("INVALID_ARGUMENT", f"{len(paths)} paths in one GetRequest: at most {MAX_PATHS}")
    models = [m.name for m in request.use_models]
    ts = tick.timestamp_ns or now_ns
    target = prefix.target if prefix is not None else ""
    view = platform_view(platform)
    out = []
    for i, path in enumerate(paths):
        origin = request_origin(prefix, path)
        head = prefix_field(target, prefix_origin(platform, origin))
        try:
            selection = resolve(request_elems(prefix, path, view), models, platform, origin)
        except PathError as e:
            raise GnmiError("INVALID_ARGUMENT", f"path[{i}]: {e}") from None
        if not selection.selectors:
            raise GnmiError("NOT_FOUND", f"path[{i}] {selection.text}: this target has no such path")
        parts: list[bytes] = []
        if request.type != _TYPES.Value("CONFIG"):
            for sel in selection.selectors:
                rows = tick.rows[sel.table.source]
                parts += [encoder.entry_block(tick, sel, k, rows[k], request.encoding) for k in matched_keys(sel, rows)]
            if not parts and not selection.wildcard:
                raise GnmiError("NOT_FOUND", f"path[{i}] {selection.text}: no such entry")
        out.append(notification(ts, head, parts))
    return get_response(out)
