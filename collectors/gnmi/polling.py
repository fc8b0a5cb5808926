"""The reads the collector drives at a target's ``interval``: POLL, ONCE and Get.

Each driver runs on a channel the session opened (TLS, credentials, Capabilities checked) and hands every
message to the session's ``Reader``, so decoding, assembly, deltas, liveness and backoff stay the session's:

- POLL: one Subscribe (SubscriptionList mode POLL); the switch answers with a full sync; then every
  ``interval`` the collector writes ``SubscribeRequest(poll=Poll())`` and reads until the sync_response.
- ONCE: every ``interval`` a new Subscribe ONCE on the same channel, read until its sync_response, then
  cancelled (a switch ends it itself; some keep it open).
- Get: every ``interval`` one GetRequest for all paths; its Notifications are one sample instant.

Rounds start at ``start + k * interval`` on the monotonic clock (a slow round does not shift the next ones;
a round longer than the interval makes the next start at once). All counters are stamped by the switch, so
deltas are exact whatever the interval: it only sets how often one is taken.
"""

from __future__ import annotations

import time
from typing import Protocol

import grpc
from pygnmi.spec.v080.gnmi_pb2 import GetRequest, Poll, SubscribeRequest

from flowtracer.collectors.gnmi.config import TargetMode

SUBSCRIBE = "/gnmi.gNMI/Subscribe"
_GET = "/gnmi.gNMI/Get"
_POLL = SubscribeRequest(poll=Poll())


class Reader(Protocol):
    """What a driver needs from its session."""

    def on_message(self, raw: bytes) -> str | None:
        """Handle one serialized SubscribeResponse; its kind ("update", "sync_response", ...) or None."""

    def on_get(self, raw: bytes) -> None:
        """Handle one serialized GetResponse (one sample instant)."""

    def set_call(self, call: grpc.aio.Call | None) -> None:
        """The call in progress (the session's stop and watchdog cancel it)."""

    async def pause(self, seconds: float) -> bool:
        """Sleep; True when the session was stopped meanwhile."""


Metadata = tuple[tuple[str, str], ...] | None
"""gRPC call metadata (username/password), or None."""


def open_subscribe(channel: grpc.aio.Channel, metadata: Metadata) -> grpc.aio.StreamStreamCall:
    """A Subscribe call whose responses arrive as bytes (the fast decoder reads known layouts unparsed)."""
    return channel.stream_stream(SUBSCRIBE, request_serializer=SubscribeRequest.SerializeToString,
                                 response_deserializer=None)(metadata=metadata)


async def _until_sync(call: grpc.aio.StreamStreamCall, r: Reader) -> None:
    """Read until a sync_response; EOF before it is the switch ending the stream (ConnectionError)."""
    while True:
        raw = await call.read()
        if raw is grpc.aio.EOF:
            raise ConnectionError("the switch ended the stream before its sync_response")
        if r.on_message(raw) == "sync_response":
            return


async def _next_round(start: float, k: int, interval: float, r: Reader) -> bool:
    """Wait for round ``k``; True when stopped."""
    return await r.pause(max(0.0, start + k * interval - time.monotonic()))


async def drive(mode: TargetMode, channel: grpc.aio.Channel, metadata: Metadata,
                request: SubscribeRequest | GetRequest, interval: float, timeout: float, r: Reader) -> None:
    """Read ``mode`` (POLL, ONCE or GET) every ``interval`` seconds until stopped; gRPC errors propagate.
    ``timeout`` bounds one Get (seconds)."""
    start = time.monotonic()
    k = 0
    if mode is TargetMode.POLL:
        call = open_subscribe(channel, metadata)
        r.set_call(call)
        await call.write(request)
        while True:
            await _until_sync(call, r)
            k += 1
            if await _next_round(start, k, interval, r):
                return
            await call.write(_POLL)
    while True:
        if mode is TargetMode.ONCE:
            call = open_subscribe(channel, metadata)
            r.set_call(call)
            await call.write(request)
            await _until_sync(call, r)
            call.cancel()
        elif mode is TargetMode.GET:
            get = channel.unary_unary(_GET, request_serializer=GetRequest.SerializeToString,
                                      response_deserializer=None)(request, metadata=metadata, timeout=timeout)
            r.set_call(get)
            r.on_get(await get)
        else:
            raise ValueError(f"mode {mode.value} is not driven by the collector")
        r.set_call(None)
        k += 1
        if await _next_round(start, k, interval, r):
            return
