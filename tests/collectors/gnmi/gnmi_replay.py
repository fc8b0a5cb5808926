"""A real in-process gNMI server that replays recorded SubscribeResponses (golden cases, faults).

Connection k (0-based) gets ``sessions[k]``: a list of steps, each a SubscribeResponse (dict in
protobuf JSON form or message), ``{"raw": bytes}`` (sent as they are: a malformed message),
``{"sleep": seconds}``, ``{"status": "UNAVAILABLE"}`` (end the
call with that code) or ``{"hold": true}`` (stay open and silent until cancelled). When a
session's steps run out the call is held open. Connections past the last session get the last
one's final status, or UNAVAILABLE. Every call's end is recorded in ``ended`` as
(connection index, "cancelled" | "completed" | code name).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import json_format
from pygnmi.spec.v080 import gnmi_pb2


def response(step: Any) -> gnmi_pb2.SubscribeResponse | bytes:
    if isinstance(step, dict) and "raw" in step:
        return bytes(step["raw"])
    if isinstance(step, gnmi_pb2.SubscribeResponse):
        return step
    return json_format.ParseDict(step, gnmi_pb2.SubscribeResponse())


def _serialize(m: gnmi_pb2.SubscribeResponse | bytes) -> bytes:
    return m if isinstance(m, bytes) else m.SerializeToString()


class ReplayServer:
    def __init__(self, sessions: Sequence[Sequence[Any]], *, credentials: tuple[str, str] | None = None) -> None:
        self.sessions = [list(s) for s in sessions]
        self.credentials = credentials
        self.connections = 0
        self.ended: list[tuple[int, str]] = []
        self.requests: list[gnmi_pb2.SubscribeRequest] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: grpc.aio.Server | None = None

    def start(self) -> int:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self.port

    async def _start(self) -> int:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("gnmi.gNMI", {
            "Capabilities": grpc.unary_unary_rpc_method_handler(
                self._caps, request_deserializer=gnmi_pb2.CapabilityRequest.FromString,
                response_serializer=gnmi_pb2.CapabilityResponse.SerializeToString),
            "Subscribe": grpc.stream_stream_rpc_method_handler(
                self._subscribe, request_deserializer=gnmi_pb2.SubscribeRequest.FromString,
                response_serializer=_serialize),
        }),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._server = server
        return port

    def stop(self) -> None:
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.stop(0.2), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> ReplayServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _check(self, context: grpc.aio.ServicerContext) -> None:
        if self.credentials is None:
            return
        md = dict(context.invocation_metadata() or ())
        if (md.get("username"), md.get("password")) != self.credentials:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad username or password")

    async def _caps(self, request: gnmi_pb2.CapabilityRequest, context: grpc.aio.ServicerContext
                    ) -> gnmi_pb2.CapabilityResponse:
        await self._check(context)
        return gnmi_pb2.CapabilityResponse(supported_encodings=[gnmi_pb2.PROTO, gnmi_pb2.JSON_IETF],
                                           gNMI_version="0.8.0")

    async def _subscribe(self, requests: Any, context: grpc.aio.ServicerContext) -> Any:
        await self._check(context)
        k = self.connections
        self.connections += 1
        outcome = "completed"
        try:
            self.requests.append(await anext(requests))
            steps = self.sessions[k] if k < len(self.sessions) else [{"status": "UNAVAILABLE"}]
            for step in steps:
                if isinstance(step, dict) and "sleep" in step:
                    await asyncio.sleep(step["sleep"])
                elif isinstance(step, dict) and "status" in step:
                    outcome = step["status"]
                    await context.abort(grpc.StatusCode[step["status"]], f"replay: {step['status']}")
                elif isinstance(step, dict) and "hold" in step:
                    break
                else:
                    await context.write(response(step))
            await asyncio.Event().wait()  # hold open, silent, until cancelled
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self.ended.append((k, outcome))
