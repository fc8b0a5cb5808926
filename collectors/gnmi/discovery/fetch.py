"""Read discovery's leaves from every target over gNMI Get (the I/O shell of discovery).

Channels, TLS and credentials are the collector's (``channel.connection_for``). One GetRequest per
path of ``facts.PATHS``, all targets at once; a path a switch does not serve (NOT_FOUND,
UNIMPLEMENTED, INVALID_ARGUMENT) is one warning and the rest still counts, while a switch that
cannot be reached at all fails discovery with one line naming it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2
from pygnmi.spec.v080.gnmi_pb2_grpc import gNMIStub

from flowtracer.collectors.gnmi.channel import connection_for
from flowtracer.collectors.gnmi.config import Encoding, Gnmi, Target
from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.collectors.gnmi.discovery.facts import PATHS, Elems, SwitchFacts, switch_facts

_ENCODINGS = {Encoding.PROTO: gnmi_pb2.Encoding.PROTO, Encoding.JSON_IETF: gnmi_pb2.Encoding.JSON_IETF,
              Encoding.JSON: gnmi_pb2.Encoding.JSON}
#: Status codes that mean "this switch does not serve that path": warn and go on.
_NOT_SERVED = {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INVALID_ARGUMENT}


class DiscoveryError(RuntimeError):
    """A target could not be read; ``str()`` is one line naming it."""


def _value(tv: gnmi_pb2.TypedValue) -> Any:
    kind = tv.WhichOneof("value")
    if kind in ("json_ietf_val", "json_val"):
        return json.loads(getattr(tv, kind))
    return getattr(tv, kind) if kind else None


def leaves(response: gnmi_pb2.GetResponse) -> list[tuple[Elems, Any]]:
    """(prefix + path elements, value) of every update of a GetResponse."""
    out: list[tuple[Elems, Any]] = []
    for n in response.notification:
        head = [(e.name, dict(e.key)) for e in n.prefix.elem]
        for u in n.update:
            out.append(([*head, *((e.name, dict(e.key)) for e in u.path.elem)], _value(u.val)))
    return out


async def _read(target: Target, gnmi: Gnmi, timeout_s: float) -> tuple[SwitchFacts, list[str]]:
    conn = await connection_for(target, gnmi)
    warnings: list[str] = []
    updates: list[tuple[Elems, Any]] = []
    async with conn.open() as channel:
        stub = gNMIStub(channel)
        for text in PATHS:
            req = gnmi_pb2.GetRequest(path=[parse_path(text)], type=gnmi_pb2.GetRequest.DataType.STATE,
                                      encoding=_ENCODINGS[gnmi.encoding])
            try:
                resp = await stub.Get(req, metadata=conn.metadata, timeout=timeout_s)
            except grpc.aio.AioRpcError as e:
                if e.code() in _NOT_SERVED:
                    warnings.append(f"{target.name}: {text}: {e.code().name}: {e.details()}")
                    continue
                raise DiscoveryError(f"target {target.name} ({target.address}:{target.port}): "
                                     f"{e.code().name}: {e.details()}") from None
            updates += leaves(resp)
    return switch_facts(target.name, updates), warnings


async def read_all(targets: Sequence[Target], gnmi: Gnmi, timeout_s: float = 10.0
                   ) -> tuple[list[SwitchFacts], list[str]]:
    """Every target's facts (in target order) and the warnings about paths it does not serve."""
    # Every read ends (and closes its channel) before the first failure is raised, in target order.
    results = await asyncio.gather(*(_read(t, gnmi, timeout_s) for t in targets), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    done = [r for r in results if not isinstance(r, BaseException)]
    return [f for f, _ in done], [w for _, ws in done for w in ws]
