"""Which host produced a record: per-host keys, the record signature agents add and the processor checks.

Why a signature and not the Kafka principal: a Kafka broker authenticates each connection (SASL) and
its ACLs say which *topics* a principal may write, never which *records*: every agent may write the
flows topic, so under ACLs alone a compromised host can still write a FlowBatch naming another host.
Apache Kafka does not hand the producing principal to consumers either (no broker-stamped header). So
each host agent signs every record it sends with a key only that host holds, and the processor
refuses a record whose named host is not the signer (docs/operations.md, Security: "Record identity").

Keys: ``host_key(master, host)`` = HMAC-SHA256(master, ``"flowtracer host key v1\\0" + host``). The
operator keeps the master key (the processor's Secret) and gives each node only its own derived key
(``flowtracer-host-keys``); a host's key reveals neither the master nor another host's key (HMAC is a
PRF), so the processor needs one secret for any number of hosts and no key list to keep in sync.

Signature: two record headers, ``flowtracer-host`` (the signer, UTF-8) and ``flowtracer-sig``
(32 bytes) = HMAC-SHA256(host key, length-prefixed ``topic``, ``host``, key and value; a tombstone's
value is marked as absent). The topic is signed so a record cannot be replayed onto another topic; the
key so a path-trace tombstone cannot be moved to another flow. Replaying a host's *own* earlier record
is not prevented here (window times and the processor's time checks bound it), nor does the signature
hide anything: records stay readable by whoever the ACLs let read them.

Pure: bytes in, bytes out (``load_key`` reads one file).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

HOST_HEADER = "flowtracer-host"
"""Record header naming the signing host (UTF-8)."""
SIG_HEADER = "flowtracer-sig"
"""Record header with the HMAC-SHA256 signature (32 bytes)."""
KEY_BYTES = 32
"""Length of a host key and the least length of a master key (bytes)."""

_HOST_KEY_LABEL = b"flowtracer host key v1\0"
_RECORD_LABEL = b"flowtracer record v1\0"

Headers = Iterable[tuple[str, bytes]] | Mapping[str, bytes] | None
"""Record headers as Kafka clients give them: kafka-python and aiokafka a list of (name, bytes)."""


class IdentityError(ValueError):
    """A record without a valid signature, or signed by another host than it names; ``str()`` says which."""


def load_key(path: Path, what: str, min_bytes: int = KEY_BYTES) -> bytes:
    """A key from *path*: hex text (whitespace ignored), at least ``min_bytes`` bytes once decoded.

    Raises IdentityError naming *what* and the file (never the key).
    """
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise IdentityError(f"{what}: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        key = bytes.fromhex("".join(text.split()))
    except ValueError:
        raise IdentityError(f"{what}: {path} is not hex text") from None
    if len(key) < min_bytes:
        raise IdentityError(f"{what}: {path} holds {len(key)} bytes, at least {min_bytes} are needed")
    return key


def host_key(master: bytes, host: str) -> bytes:
    """The key of *host* (32 bytes), derived from the master key."""
    return hmac.new(master, _HOST_KEY_LABEL + host.encode("utf-8"), hashlib.sha256).digest()


def _field(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def signature(key: bytes, host: str, topic: str, record_key: bytes | None, value: bytes | None) -> bytes:
    """HMAC-SHA256 of one record under *host*'s key (32 bytes)."""
    body = (_RECORD_LABEL + _field(topic.encode("utf-8")) + _field(host.encode("utf-8"))
            + _field(record_key or b"") + (b"\0" if value is None else b"\1" + _field(value)))
    return hmac.new(key, body, hashlib.sha256).digest()


def sign(key: bytes, host: str, topic: str, record_key: bytes | None, value: bytes | None
         ) -> list[tuple[str, bytes]]:
    """The headers that say *host* (holding *key*) produced this record."""
    return [(HOST_HEADER, host.encode("utf-8")), (SIG_HEADER, signature(key, host, topic, record_key, value))]


def _header(headers: Headers, name: str) -> bytes | None:
    if headers is None:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    found = [v for k, v in items if k == name]
    if len(found) > 1:
        raise IdentityError(f"record has {len(found)} {name} headers")
    return found[0] if found else None


def signer(master: bytes, topic: str, record_key: bytes | None, value: bytes | None, headers: Headers) -> str:
    """The host that signed this record, checked against the key derived from *master*.

    Raises IdentityError when the headers are missing or the signature does not match.
    """
    host_b, sig = _header(headers, HOST_HEADER), _header(headers, SIG_HEADER)
    if host_b is None or sig is None:
        raise IdentityError(f"unsigned record (no {HOST_HEADER}/{SIG_HEADER} headers) where every host must sign")
    try:
        host = host_b.decode("utf-8")
    except UnicodeDecodeError:
        raise IdentityError(f"{HOST_HEADER} header is not UTF-8") from None
    expected = signature(host_key(master, host), host, topic, record_key, value)
    if not hmac.compare_digest(expected, sig):
        raise IdentityError(f"signature of host {host!r} does not match (another key, or the record was altered)")
    return host


def check_named(signed_by: str, named: str, what: str) -> None:
    """IdentityError unless the record names its signer: a host speaks only for itself."""
    if named != signed_by:
        raise IdentityError(f"{what} names host {named!r} but was signed by host {signed_by!r}: a host may "
                            "only send its own records")
