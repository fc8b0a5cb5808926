"""Read discovery's leaves from every target over gNMI Get or Subscribe ONCE (the I/O shell of discovery).

Channels, TLS and credentials are the collector's (``channel.connection_for``). Each target is read through
its platform profile (``Target.platform``, ``fabric/profiles``): an OpenConfig target is asked for
``facts.PATHS``; another platform for the paths its profile maps to the canonical leaves discovery reads
(``facts.NEEDS``), translated back to OpenConfig by the collector's ``PathMapper``; what the profile does not
map is one warning per target (``facts.lacking``). With Get: one GetRequest per path, all targets at once;
a path a switch does not serve (NOT_FOUND, INVALID_ARGUMENT) is one warning and the rest still counts. A
switch that answers Get with UNIMPLEMENTED is asked again with one Subscribe ONCE for all paths (a warning
says so), as is every switch with ``rpc="once"``. The encoding is ``gnmi.encoding`` when set, else the
profile's. A switch that cannot be read at all fails discovery with one line naming it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2
from pygnmi.spec.v080.gnmi_pb2_grpc import gNMIStub

from flowtracer.collectors.gnmi.channel import connection_for
from flowtracer.collectors.gnmi.config import Encoding, Gnmi, Target
from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.collectors.gnmi.counters.profile_map import PathMapper
from flowtracer.collectors.gnmi.discovery.facts import Elems, SwitchFacts, lacking, profile_paths, switch_facts
from flowtracer.fabric.platform_formats import from_platform
from flowtracer.fabric.platform_profiles import Profile, load_profile

_ENCODINGS = {Encoding.PROTO: gnmi_pb2.Encoding.PROTO, Encoding.JSON_IETF: gnmi_pb2.Encoding.JSON_IETF,
              Encoding.JSON: gnmi_pb2.Encoding.JSON}
#: Status codes that mean "this switch does not serve that path": warn and go on.
_NOT_SERVED = {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT}


class DiscoveryError(RuntimeError):
    """A target could not be read; ``str()`` is one line naming it."""


def _value(tv: gnmi_pb2.TypedValue) -> Any:
    kind = tv.WhichOneof("value")
    if kind in ("json_ietf_val", "json_val"):
        return json.loads(getattr(tv, kind))
    return getattr(tv, kind) if kind else None


def leaves(notifications: Iterable[gnmi_pb2.Notification], profile: Profile | None = None
           ) -> list[tuple[Elems, Any]]:
    """(prefix + path elements, value) of every update of some notifications; with a platform ``profile``,
    a leaf it maps is given as its canonical OpenConfig leaf and value (others are kept as they came)."""
    mapper = PathMapper(profile) if profile is not None and not profile.is_openconfig else None
    out: list[tuple[Elems, Any]] = []
    for n in notifications:
        head = [(e.name, dict(e.key)) for e in n.prefix.elem]
        for u in n.update:
            elems: Elems = [*head, *((e.name, dict(e.key)) for e in u.path.elem)]
            value = _value(u.val)
            found = mapper.translate(u.path.origin or n.prefix.origin, elems) if mapper else None
            if found is not None:
                names, keys, fmt = found
                elems = [(name, {"k": keys[name]} if name in keys else {}) for name in names]
                value = from_platform(fmt, value) if fmt else value
            out.append((elems, value))
    return out


def _encoding(gnmi: Gnmi, profile: Profile) -> int:
    """The encoding set in ``gnmi`` (``--encoding``), else the one the target's profile asks for."""
    return _ENCODINGS[gnmi.encoding if "encoding" in gnmi.model_fields_set else Encoding(profile.encoding)]


def _failed(target: Target, e: grpc.aio.AioRpcError) -> DiscoveryError:
    return DiscoveryError(f"target {target.name} ({target.address}:{target.port}): {e.code().name}: {e.details()}")


async def _once(stub: gNMIStub, metadata: Any, gnmi: Gnmi, timeout_s: float, profile: Profile
                ) -> list[tuple[Elems, Any]]:
    """Every path in one Subscribe ONCE: the notifications up to ``sync_response``."""
    req = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(
        mode=gnmi_pb2.SubscriptionList.Mode.ONCE, encoding=_encoding(gnmi, profile),
        subscription=[gnmi_pb2.Subscription(path=parse_path(text)) for text in profile_paths(profile)]))
    notifications = []
    async for resp in stub.Subscribe(iter([req]), metadata=metadata, timeout=timeout_s):
        if resp.sync_response:
            break
        if resp.HasField("update"):
            notifications.append(resp.update)
    return leaves(notifications, profile)


async def _read(target: Target, gnmi: Gnmi, timeout_s: float, rpc: str) -> tuple[SwitchFacts, list[str]]:
    conn = await connection_for(target, gnmi)
    profile = load_profile(target.platform)
    warnings: list[str] = [line] if (line := lacking(target.name, profile)) else []
    updates: list[tuple[Elems, Any]] = []
    async with conn.open() as channel:
        stub = gNMIStub(channel)
        try:
            for text in profile_paths(profile) if rpc == "get" else ():
                req = gnmi_pb2.GetRequest(path=[parse_path(text)], type=gnmi_pb2.GetRequest.DataType.STATE,
                                          encoding=_encoding(gnmi, profile))
                try:
                    resp = await stub.Get(req, metadata=conn.metadata, timeout=timeout_s)
                except grpc.aio.AioRpcError as e:
                    if e.code() is grpc.StatusCode.UNIMPLEMENTED:
                        warnings.append(f"{target.name}: Get is not implemented: read with Subscribe ONCE")
                        rpc, updates = "once", []
                        break
                    if e.code() not in _NOT_SERVED:
                        raise
                    warnings.append(f"{target.name}: {text}: {e.code().name}: {e.details()}")
                    continue
                updates += leaves(resp.notification, profile)
            if rpc == "once":
                updates = await _once(stub, conn.metadata, gnmi, timeout_s, profile)
        except grpc.aio.AioRpcError as e:
            raise _failed(target, e) from None
    facts = switch_facts(target.name, updates)
    facts.aft = profile.is_openconfig  # no profile maps ipv4-entry routes (facts.py)
    return facts, warnings


async def read_all(targets: Sequence[Target], gnmi: Gnmi, timeout_s: float = 10.0, rpc: str = "get"
                   ) -> tuple[list[SwitchFacts], list[str]]:
    """Every target's facts (in target order) and the warnings about paths it does not serve.

    ``rpc``: "get" (Subscribe ONCE for a target without Get) or "once" (Subscribe ONCE for all).
    """
    # Every read ends (and closes its channel) before the first failure is raised, in target order.
    results = await asyncio.gather(*(_read(t, gnmi, t.timeout or timeout_s, rpc) for t in targets),
                                   return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    done = [r for r in results if not isinstance(r, BaseException)]
    return [f for f, _ in done], [w for _, ws in done for w in ws]
