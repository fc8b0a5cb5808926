"""The server side of SASL PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), as a Kafka broker
runs it, for the test bed's SASL proxy (:mod:`.sasl_proxy`). Pure: tokens in, tokens out.

Users are given as ``user: password`` and kept only as salted SCRAM credentials (:func:`make_credentials`);
PLAIN is checked against the SCRAM-SHA-256 credential, so no password is kept. Every refusal is a
:class:`SaslFailure` whose text is what a Kafka broker sends back, never a secret; an unknown user and
a wrong password read the same.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *SCRAM_HASHES)
#: Kafka's minimum for SCRAM credentials.
SCRAM_ITERATIONS = 4096


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


class SaslFailure(Exception):
    """The client's SASL exchange is refused; ``str()`` is the message sent to the client (no secret)."""


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
