"""Real gNMI servers (gRPC) for simulated switches: Capabilities, Get and Subscribe.

A :class:`GnmiServer` serves one or more :class:`~flowtracer.sim.switches.state.SwitchState` on one
loopback port. With one switch the gNMI ``target`` is only a label (echoed back, as switches do);
with several (one shared port) ``prefix.target`` selects the switch, or ``default_target`` does
when the client sets none. Run one server per switch for a port each, plus one over all of them
for the shared port: servers over the same state share its encoded notifications.

Design (see bench/bench_gnmi_server.py for numbers): every server of the process runs on one
asyncio loop in one thread, :mod:`flowtracer.sim.switches.feed` (grpc.aio: a stream costs a coroutine,
not a thread; measured ~2x less CPU per message than the thread-pool server). The engine's events
reach the loop through ``call_soon_threadsafe``; each stream then asks its
:class:`~flowtracer.sim.switches.subscription.Subscription` what to send, and the switch's
:class:`~flowtracer.sim.switches.encode.UpdateEncoder` encodes each tick once for all streams.
Responses are handed to grpc as ready bytes; requests arrive as bytes and are parsed here, so an
undecodable message is INVALID_ARGUMENT, not an internal error.

Status codes: malformed requests INVALID_ARGUMENT; unsupported encodings UNIMPLEMENTED; Get of a
path or entry that does not exist NOT_FOUND (a Subscribe to one stays open and silent, gNMI
3.5.1.3); a rebooting switch UNAVAILABLE (its streams end with it too); wrong or missing
credentials UNAUTHENTICATED. A silent switch (fault ``gnmi_silent``, ``SwitchState.silent``) ends nothing: its
streams stay open and get nothing, a new Subscribe is accepted and gets no initial sync until it resumes;
Capabilities and Get still answer (a hung telemetry agent, the management plane up).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.fabric.platform_profiles import DEFAULT_PLATFORM
from flowtracer.sim.switches import get as gnmi_get
from flowtracer.sim.switches.encode import ENCODINGS, SYNC_RESPONSE
from flowtracer.sim.switches.feed import Feed, LoopThread, Stream
from flowtracer.sim.switches.platform_tables import platform_view
from flowtracer.sim.switches.schema import MODELS
from flowtracer.sim.switches.state import SwitchState
from flowtracer.sim.switches.subscription import ONCE, POLL, STREAM, GnmiError, Subscription, plan_subscription

log = logging.getLogger(__name__)

GNMI_VERSION = "0.8.0"  # the gnmi.proto pygnmi ships (spec/v080)
_SERVICE = "gnmi.gNMI"


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of the server's certificate and key; with ``ca_file`` clients must present a
    certificate signed by it (mutual TLS)."""

    cert_file: Path
    key_file: Path
    ca_file: Path | None = None


# -- the gRPC server ----------------------------------------------------------------------------


def _parse(cls: type[Any], raw: bytes, what: str) -> Any:
    try:
        return cls.FromString(raw)
    except DecodeError as e:
        raise GnmiError("INVALID_ARGUMENT", f"cannot decode {what}: {e}") from None


def _capabilities_response() -> bytes:
    return gnmi_pb2.CapabilityResponse(
        supported_models=[gnmi_pb2.ModelData(name=n, organization=o, version=v) for n, o, v in MODELS],
        supported_encodings=list(ENCODINGS), gNMI_version=GNMI_VERSION,
    ).SerializeToString()


class GnmiServer:
    """gNMI server for ``states`` (switch name -> state) on ``host:port`` (0 = a free port).

    ``credentials`` (username, password) are checked on every RPC against the ``username`` and
    ``password`` metadata gNMI clients send. ``cancel_on_half_close`` ends a STREAM subscription
    (status OK) when the client closes its sending side, as pygnmi's ``close()`` does; otherwise
    the stream keeps going until cancelled, per gRPC semantics. ``max_workers`` caps concurrent
    RPCs (further ones get RESOURCE_EXHAUSTED); None = no cap. ``clock_offsets`` (switch name -> ns,
    > 0: ahead) skews the timestamps a switch sends, as a switch with a wrong clock would.
    ``serve_get=False`` answers Get with UNIMPLEMENTED, as boxes that only stream do.
    """

    def __init__(self, states: Mapping[str, SwitchState], host: str = "127.0.0.1", port: int = 0, *,
                 default_target: str | None = None, tls: TlsFiles | None = None,
                 credentials: tuple[str, str] | None = None, cancel_on_half_close: bool = False,
                 max_workers: int | None = None, clock_offsets: Mapping[str, int] | None = None,
                 serve_get: bool = True, platforms: Mapping[str, str] | None = None) -> None:
        if not states:
            raise ValueError("GnmiServer needs at least one switch state")
        if default_target is not None and default_target not in states:
            raise ValueError(f"default_target {default_target!r} is not one of the served switches {sorted(states)}")
        self.states = dict(states)
        self.host = host
        self.port = port
        self.default_target = default_target
        self.tls = tls
        self.cancel_on_half_close = cancel_on_half_close
        self.max_workers = max_workers
        self.clock_offsets = dict(clock_offsets or {})
        self.serve_get = serve_get
        #: Switch name -> the platform whose paths it serves (fabric/profiles); the rest serve OpenConfig.
        self.platforms = {name: platform_view(p).platform for name, p in (platforms or {}).items()}
        self._credentials = (credentials[0].encode(), credentials[1].encode()) if credentials else None
        self._loop: LoopThread | None = None
        self._server: grpc.aio.Server | None = None
        self._feeds: dict[str, Feed] = {}
        self._streams: set[Stream] = set()
        self._capabilities = _capabilities_response()
        self._state_lock = threading.Lock()
        self._stopped = False

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> int:
        """Bind, start serving and return the bound port. Raises OSError when the port is taken."""
        with self._state_lock:
            if self._server is not None or self._stopped:
                raise RuntimeError("GnmiServer.start() may be called once")
            tls = self._tls_credentials()
            self._loop = loop = LoopThread.acquire()
            self._feeds = {name: loop.feed(st, self.clock_offsets.get(name, 0)) for name, st in self.states.items()}
            try:
                self._server, self.port = loop.run(self._start(tls))
            except BaseException:
                self._release()
                raise
            log.info("gNMI server for %s on %s:%d", ", ".join(sorted(self.states)), self.host, self.port)
            return self.port

    def _tls_credentials(self) -> grpc.ServerCredentials | None:
        if self.tls is None:
            return None
        ca = Path(self.tls.ca_file).read_bytes() if self.tls.ca_file else None
        pair = (Path(self.tls.key_file).read_bytes(), Path(self.tls.cert_file).read_bytes())
        return grpc.ssl_server_credentials([pair], root_certificates=ca, require_client_auth=ca is not None)

    async def _start(self, tls: grpc.ServerCredentials | None) -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server(maximum_concurrent_rpcs=self.max_workers,
                                 options=[("grpc.so_reuseport", 0)])
        # No (de)serializers: requests arrive as bytes (parsed here) and responses leave as bytes.
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE, {
            "Capabilities": grpc.unary_unary_rpc_method_handler(self._rpc(self._capabilities_rpc)),
            "Get": grpc.unary_unary_rpc_method_handler(self._rpc(self._get_rpc)),
            "Set": grpc.unary_unary_rpc_method_handler(self._rpc(self._set_rpc)),
            "Subscribe": grpc.stream_stream_rpc_method_handler(self._rpc(self._subscribe_rpc)),
        }),))
        address = f"{self.host}:{self.port}"
        try:
            try:
                port = server.add_secure_port(address, tls) if tls else server.add_insecure_port(address)
            except RuntimeError as e:
                raise OSError(f"gNMI server cannot bind {address}: {e}") from None
            if port == 0:
                raise OSError(f"gNMI server cannot bind {address}")
            await server.start()
        except BaseException:
            await server.stop(None)
            raise
        return server, port

    def stop(self, grace: float = 0.5) -> None:
        """End every stream (UNAVAILABLE), stop serving within ``grace`` seconds. Safe to call twice."""
        with self._state_lock:
            if self._stopped:
                return
            self._stopped = True
            if self._server is None:
                return
            try:
                self._loop.run(self._stop(grace), timeout=grace + 10)  # type: ignore[union-attr]
            finally:
                self._release()

    async def _stop(self, grace: float) -> None:
        for s in list(self._streams):
            s.stop(GnmiError("UNAVAILABLE", "gNMI server stopping"))
        await self._server.stop(grace)  # type: ignore[union-attr]

    def _release(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        for st in self.states.values():
            loop.drop_feed(st)
        self._feeds = {}
        loop.release()

    def __enter__(self) -> GnmiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- shared RPC plumbing ----------------------------------------------------------------------

    def _rpc(self, handler: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
             ) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
        """Wrap a handler: credentials first, GnmiError -> its status, anything else -> INTERNAL."""
        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                self._authenticate(context)
                return await handler(request, context)
            except GnmiError as e:
                await context.abort(grpc.StatusCode[e.code], e.message)
            except (asyncio.CancelledError, grpc.aio.AbortError):
                raise
            except Exception:
                log.exception("gNMI %s failed", getattr(handler, "__name__", "rpc"))
                await context.abort(grpc.StatusCode.INTERNAL, "internal error in the simulated switch")
        return wrapped

    def _authenticate(self, context: grpc.aio.ServicerContext) -> None:
        if self._credentials is None:
            return
        md = dict(context.invocation_metadata() or ())
        user, password = md.get("username", ""), md.get("password", "")
        user_b = user.encode() if isinstance(user, str) else user
        pass_b = password.encode() if isinstance(password, str) else password
        # Compare both, always, in constant time: no hint about which one was wrong.
        ok = hmac.compare_digest(user_b, self._credentials[0]) & hmac.compare_digest(pass_b, self._credentials[1])
        if not ok:
            raise GnmiError("UNAUTHENTICATED", "missing or wrong username/password metadata")

    def _platform_of(self, target: str) -> str:
        """The platform of the switch a request names (as ``_feed_for`` picks it; OpenConfig when none)."""
        if target not in self.states:
            target = next(iter(self.states)) if len(self.states) == 1 else (self.default_target or "")
        return self.platforms.get(target, DEFAULT_PLATFORM)

    def _feed_for(self, target: str) -> Feed:
        """The switch a request is for: by ``prefix.target``, else ``default_target`` or the only one."""
        if target in self._feeds:
            feed = self._feeds[target]
        elif len(self._feeds) == 1:  # a switch's own port: the target is the client's label
            feed = next(iter(self._feeds.values()))
        elif target:
            raise GnmiError("NOT_FOUND",
                            f"unknown target {target!r}: this port serves {', '.join(sorted(self._feeds))}")
        elif self.default_target is not None:
            feed = self._feeds[self.default_target]
        else:
            raise GnmiError("INVALID_ARGUMENT", "this port serves several switches: set prefix.target to one of "
                                                f"{', '.join(sorted(self._feeds))}")
        if not feed.state.available:
            raise GnmiError("UNAVAILABLE", f"switch {feed.state.name} is not available (rebooting)")
        return feed

    # -- RPCs -------------------------------------------------------------------------------------

    async def _capabilities_rpc(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        _parse(gnmi_pb2.CapabilityRequest, raw, "CapabilityRequest")
        if len(self._feeds) == 1:  # a switch's own port goes quiet while it reboots (no target here)
            self._feed_for("")
        return self._capabilities

    async def _get_rpc(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        request = _parse(gnmi_pb2.GetRequest, raw, "GetRequest")
        if not self.serve_get:
            raise GnmiError("UNIMPLEMENTED", "this target does not serve Get: use Subscribe")
        feed = self._feed_for(request.prefix.target)
        return gnmi_get.get(request, feed.tick(), feed.encoder, time.time_ns() + feed.clock_offset_ns,
                            self._platform_of(feed.state.name))

    async def _set_rpc(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        _parse(gnmi_pb2.SetRequest, raw, "SetRequest")
        raise GnmiError("UNIMPLEMENTED", "the simulated switch is read-only: Set is not supported")

    async def _subscribe_rpc(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> None:
        try:
            first = _parse(gnmi_pb2.SubscribeRequest, await anext(requests), "SubscribeRequest")
        except StopAsyncIteration:
            raise GnmiError("INVALID_ARGUMENT",
                            "the client closed the stream before sending a SubscribeRequest") from None
        if not first.HasField("subscribe"):
            what = first.WhichOneof("request") or "nothing"
            raise GnmiError("INVALID_ARGUMENT", f"the first SubscribeRequest must carry a SubscriptionList, not {what}")
        plan = plan_subscription(first.subscribe, self._platform_of(first.subscribe.prefix.target))
        feed = self._feed_for(plan.target)
        stream = Stream()
        sub = Subscription(plan, feed.encoder, feed.state.boot_epoch)
        stream.wants_oper = sub.wants_oper_events
        feed.streams.add(stream)
        self._streams.add(stream)
        if self._stopped:
            stream.stop(GnmiError("UNAVAILABLE", "gNMI server stopping"))
        reader = asyncio.create_task(self._read_more(requests, stream, plan.mode))
        try:
            await self._serve(stream, feed, sub, context)
        finally:
            feed.streams.discard(stream)
            self._streams.discard(stream)
            reader.cancel()

    async def _read_more(self, requests: AsyncIterator[bytes], stream: Stream, mode: int) -> None:
        """Requests after the first: polls (POLL only) and the client's half-close."""
        try:
            async for raw in requests:
                try:
                    req = _parse(gnmi_pb2.SubscribeRequest, raw, "SubscribeRequest")
                except GnmiError as e:
                    stream.stop(e)
                    return
                kind = req.WhichOneof("request")
                if kind == "poll" and mode == POLL:
                    stream.polls += 1
                    stream.wake.set()
                    continue
                if kind == "poll":
                    mode_name = "STREAM" if mode == STREAM else "ONCE"
                    msg = f"a Poll on a {mode_name} subscription: only POLL subscriptions take polls"
                elif kind == "subscribe":
                    msg = "a second SubscriptionList on an existing stream: open a new Subscribe call"
                elif kind == "aliases":
                    msg = "client-defined aliases are not supported"
                else:
                    msg = "an empty SubscribeRequest"
                stream.stop(GnmiError("INVALID_ARGUMENT", msg))
                return
        except (asyncio.CancelledError, grpc.RpcError):
            return
        stream.half_closed = True
        stream.wake.set()

    async def _wait(self, stream: Stream) -> None:
        await stream.wake.wait()
        stream.wake.clear()
        if stream.end is not None:
            raise stream.end

    async def _serve(self, stream: Stream, feed: Feed, sub: Subscription,
                     context: grpc.aio.ServicerContext) -> None:
        plan = sub.plan
        write = context.write
        while feed.state.silent:  # a hung server (fault gnmi_silent) accepts the call and sends nothing
            await self._wait(stream)
        if plan.updates_only:
            sub.initial(feed.tick())  # the baseline; nothing is sent before sync_response
        else:
            tick = feed.tick()
            while tick.timestamp_ns == 0:  # no data before the engine's first tick: wait for it
                await self._wait(stream)
                tick = feed.tick()
            for b in sub.initial(tick) if plan.mode == STREAM else sub.poll(tick):
                await write(b)
        await write(SYNC_RESPONSE)
        if plan.mode == ONCE:
            return
        while True:
            if plan.mode == POLL:
                while stream.polls:
                    stream.polls -= 1
                    for b in sub.poll(feed.tick()):
                        await write(b)
                    await write(SYNC_RESPONSE)
                if stream.half_closed:
                    return  # no more polls can come
            else:
                while stream.opers:
                    for b in sub.on_oper(*stream.opers.popleft()):
                        await write(b)
                if stream.sample:
                    stream.sample = False
                    for b in sub.on_tick(feed.tick(), feed.tolerance_ns):
                        await write(b)
                if stream.half_closed and self.cancel_on_half_close:
                    return
            await self._wait(stream)
