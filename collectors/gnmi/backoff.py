"""Reconnect policy, pure: gRPC status -> error class, reason and hint, and the backoff schedule.

Configuration-class errors (the switch says no: bad credentials, no permission, a path or
encoding it does not support, a TLS certificate we do not trust) will not heal by hammering the
switch, so they are logged clearly and retried slowly. Transient ones (switch rebooting,
network, stalled stream) are retried with exponential backoff and jitter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

import grpc


class ErrorClass(StrEnum):
    TRANSIENT = "transient"
    CONFIG = "config"


#: gRPC status -> (reason, hint) for the configuration class. ``reason`` is the bounded label value of
#: ``flowtracer_gnmi_connection_failures_total``.
_CONFIG_CODES = {
    grpc.StatusCode.UNAUTHENTICATED: ("credentials", "the switch rejected the credentials (check "
                                                     "credentials.username / password_env / password_file)"),
    grpc.StatusCode.PERMISSION_DENIED: ("permission", "the user may not subscribe to these paths (switch AAA)"),
    grpc.StatusCode.INVALID_ARGUMENT: ("subscription", "the switch rejected the subscription (paths, mode, "
                                                       "encoding or sample_interval)"),
    grpc.StatusCode.UNIMPLEMENTED: ("unimplemented", "the switch does not implement this RPC or path"),
    grpc.StatusCode.NOT_FOUND: ("not_found", "the switch does not know a subscribed path"),
    grpc.StatusCode.FAILED_PRECONDITION: ("precondition", "the switch refused the subscription in its current state"),
}
_TLS_MARKERS = ("certificate_verify_failed", "ssl handshake failed", "handshake failed", "certificate verify",
                "tsi_protocol_failure", "wrong_version_number", "unknown ca", "self signed", "hostname mismatch",
                "peer name")
#: What grpc says when the switch may have refused our TLS client side (our certificate): a TLS alert the
#: switch sent (OpenSSL stacks: ``SSLV3_ALERT_CERTIFICATE_EXPIRED``, ``TLSV1_ALERT_UNKNOWN_CA``, ...),
#: the alert arriving after a TLS 1.3 handshake (``Unwrap failed``), or no alert at all (grpc and
#: BoringSSL servers just close: ``Socket closed``). tls_diagnosis.py then finds out which.
_CLIENT_SIDE_MARKERS = ("_alert_", "unwrap failed", "socket closed")


def may_refuse_client(details: str) -> bool:
    """True when a failed connect's ``details`` fit a switch refusing our TLS client certificate."""
    low = details.lower()
    return any(m in low for m in _CLIENT_SIDE_MARKERS)


def classify(code: grpc.StatusCode | None, details: str = "") -> tuple[ErrorClass, str, str]:
    """(error class, reason label, one-line hint for the operator) for a failed call."""
    if code in _CONFIG_CODES:
        reason, hint = _CONFIG_CODES[code]  # type: ignore[index]
        return ErrorClass.CONFIG, reason, hint
    low = details.lower()
    if code == grpc.StatusCode.UNAVAILABLE and "_alert_" in low:  # the switch's alert: it refused us, not we it
        return ErrorClass.CONFIG, "client_cert_rejected", (
            "TLS handshake failed: the switch refused our TLS client side (check tls.cert_file, tls.key_file)")
    if code == grpc.StatusCode.UNAVAILABLE and any(m in low for m in _TLS_MARKERS):
        return ErrorClass.CONFIG, "server_cert_untrusted", (
            "TLS handshake failed: the switch's certificate is not trusted or does not match (check tls.ca_file, "
            "tls.server_name, tls.enabled)")
    if code == grpc.StatusCode.UNAVAILABLE:
        return ErrorClass.TRANSIENT, "unreachable", "the switch is unreachable or restarting"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ErrorClass.TRANSIENT, "timeout", "the switch did not answer in time"
    return ErrorClass.TRANSIENT, "stream_failed", "the stream failed"


@dataclass
class Backoff:
    """Exponential backoff with jitter: attempt n waits uniform(d/2, d), d = min(cap, base * 2^n).

    ``healthy(seconds)`` after a session ends: if it streamed for at least ``reset_after`` s, the
    next failure starts again from ``base``. Seconds throughout.
    """

    base: float = 1.0
    cap: float = 60.0
    reset_after: float = 60.0
    rng: random.Random | None = None
    attempt: int = 0

    def next_delay(self) -> float:
        """The delay before the next attempt (and count this attempt)."""
        d = min(self.cap, self.base * 2 ** min(self.attempt, 32))
        self.attempt += 1
        r = (self.rng or random).random()
        return d / 2 + r * d / 2

    def healthy(self, seconds: float) -> None:
        """The session that just ended streamed for ``seconds``; reset if that was long enough."""
        if seconds >= self.reset_after:
            self.attempt = 0

    def reset(self) -> None:
        self.attempt = 0
