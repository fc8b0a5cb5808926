"""Kafka protocol framing for the test bed's SASL proxy (:mod:`.sasl_proxy`): request headers, the
SaslHandshake and SaslAuthenticate responses it answers itself, and the ApiVersions rewrite that makes a
broker advertise them. Pure: bytes in, bytes out; only what the proxy reads is parsed.

Layouts (Kafka protocol guide): a frame is a 4-byte big-endian size and the message; a request header
is api key, api version, correlation id, client id (int16-length string), plus tagged fields when the
request version is flexible (ApiVersions v3+, SaslAuthenticate v2+); a response header is the
correlation id, plus tagged fields when flexible, except ApiVersions, whose response header never has them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PRODUCE, API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 0, 18, 17, 36
#: Versions the proxy answers: SaslHandshake v0-v1, SaslAuthenticate v0-v2 (v2 is flexible).
SASL_VERSIONS = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
ERR_NONE, ERR_UNSUPPORTED_SASL_MECHANISM, ERR_ILLEGAL_SASL_STATE, ERR_SASL_AUTHENTICATION_FAILED = 0, 33, 34, 58
ERR_TOPIC_AUTHORIZATION_FAILED = 29


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
    """Whether a request of one of the keys read here uses header v2 (tagged fields): ApiVersions v3+,
    SaslAuthenticate v2+, Produce v9+."""
    return ((api_key == API_VERSIONS and version >= 3) or (api_key == SASL_AUTHENTICATE and version >= 2)
            or (api_key == PRODUCE and version >= 9))


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
    n, pos = _count(response, 6, flexible)
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


@dataclass(frozen=True)
class ProduceRequest:
    """What the proxy's ACL check reads of a Produce request (v3-v12): acks and each topic's partitions."""

    acks: int
    topics: list[tuple[str, list[int]]]


def _string(buf: bytes, pos: int, compact: bool) -> tuple[str | None, int]:
    """A (compact) nullable string at *pos*: (value or None, position after it)."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        (n,) = struct.unpack_from(">h", buf, pos)
        pos += 2
    if n < 0:
        return None, pos
    return buf[pos:pos + n].decode("utf-8", "replace"), pos + n


def _count(buf: bytes, pos: int, compact: bool) -> tuple[int, int]:
    """An array's (compact) count at *pos* (-1: null): (count, position after it)."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    (n,) = struct.unpack_from(">i", buf, pos)
    return n, pos + 4


def parse_produce(frame_: bytes, header: RequestHeader) -> ProduceRequest:
    """The acks and the (topic, partitions) of a Produce request frame, v3-v12 (v9+ flexible; v13 names
    topics by id and is refused: ValueError). Record batches are skipped, never read."""
    version, flexible = header.api_version, header.api_version >= 9
    if not 3 <= version <= 12:
        raise ValueError(f"Produce v{version} is not read here (v3-v12)")
    _, pos = _string(frame_, header.body_offset, flexible)  # transactional id
    acks, _timeout = struct.unpack_from(">hi", frame_, pos)
    pos += 6
    n_topics, pos = _count(frame_, pos, flexible)
    out = []
    for _ in range(max(n_topics, 0)):
        name, pos = _string(frame_, pos, flexible)
        n_parts, pos = _count(frame_, pos, flexible)
        parts = []
        for _ in range(max(n_parts, 0)):
            (index,) = struct.unpack_from(">i", frame_, pos)
            pos += 4
            size, pos = _count(frame_, pos, flexible)  # records: (compact) nullable bytes
            pos += max(size, 0)
            if flexible:
                pos = skip_tagged_fields(frame_, pos)
            parts.append(index)
        if flexible:
            pos = skip_tagged_fields(frame_, pos)
        out.append((name or "", parts))
    return ProduceRequest(acks, out)


def produce_error_response(header: RequestHeader, request: ProduceRequest, error: int) -> bytes:
    """A Produce response (v3-v12, the version asked) giving ``error`` for every partition of the request,
    as a broker answers a request its authorizer refused (offsets -1, no record errors, no message)."""
    version, flexible = header.api_version, header.api_version >= 9

    def string(s: str) -> bytes:
        b = s.encode("utf-8")
        return uvarint(len(b) + 1) + b if flexible else struct.pack(">h", len(b)) + b

    def count(n: int) -> bytes:
        return uvarint(n + 1) if flexible else struct.pack(">i", n)

    body = struct.pack(">i", header.correlation_id) + (b"\0" if flexible else b"") + count(len(request.topics))
    for name, parts in request.topics:
        body += string(name) + count(len(parts))
        for index in parts:
            body += struct.pack(">ihqq", index, error, -1, -1)  # base offset, log append time
            if version >= 5:
                body += struct.pack(">q", -1)  # log start offset
            if version >= 8:
                body += count(0) + (b"\0" if flexible else struct.pack(">h", -1))  # record errors, message
            if flexible:
                body += b"\0"
        if flexible:
            body += b"\0"
    body += struct.pack(">i", 0) + (b"\0" if flexible else b"")  # throttle time
    return frame(body)
