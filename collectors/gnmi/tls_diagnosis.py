"""Why a switch closed our TLS connection during the handshake: the client-certificate side of mutual TLS.

A gRPC server that refuses the client's certificate (none sent, expired, or signed by a CA it does not
trust) closes the connection without an alert the client can read: grpc reports only "Socket closed",
as it would for a switch that restarts. Before calling that transient, ``diagnose`` re-does the handshake
with Python's ssl and sends the HTTP/2 preface: a switch that answers accepted our TLS side (so the
failure was something else); one that closes it again refused us, and our own certificate says why
(missing, expired, not yet valid; else it is not signed by a CA the switch trusts, or revoked).
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
from pathlib import Path

from cryptography import x509

from flowtracer.plumbing.target_security import TlsConfig

#: HTTP/2 client preface and an empty SETTINGS frame: a gRPC server answers with its SETTINGS.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")


def certificate_problem(pem: bytes, now: datetime.datetime) -> tuple[str, str] | None:
    """(reason, what) when the certificate in ``pem`` is not valid at ``now`` (aware UTC), else None."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return "client_cert_rejected", "is not a PEM certificate"
    if now > cert.not_valid_after_utc:
        return "client_cert_expired", f"expired at {cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC"
    if now < cert.not_valid_before_utc:
        return "client_cert_not_yet_valid", f"is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC"
    return None


def client_side_verdict(tls: TlsConfig, now: datetime.datetime) -> tuple[str, str]:
    """(reason, hint) once the switch is known to refuse our TLS client side (pure but for reading cert_file)."""
    prefix = "the switch closed the TLS handshake"
    if tls.cert_file is None:
        return "client_cert_missing", (f"{prefix}: it requires a client certificate and none is configured "
                                       "(set tls.cert_file and tls.key_file)")
    try:
        pem = Path(tls.cert_file).read_bytes()
    except OSError as e:
        return "client_cert_rejected", f"{prefix}; tls.cert_file {tls.cert_file} is unreadable: {e.strerror}"
    problem = certificate_problem(pem, now)
    if problem is not None:
        return problem[0], f"{prefix}: our client certificate tls.cert_file {tls.cert_file} {problem[1]}"
    issuer = x509.load_pem_x509_certificate(pem).issuer.rfc4514_string()
    return "client_cert_rejected", (f"{prefix}: it refused our client certificate tls.cert_file {tls.cert_file} "
                                    f"(issuer {issuer}): not signed by a CA the switch trusts, or revoked")


async def refuses_client(address: str, port: int, tls: TlsConfig, timeout: float) -> bool:
    """True when the switch closes a TLS connection made with our client certificate (if any) before it
    answers the HTTP/2 preface; False when it answers or cannot be reached at all (then it is not us).

    The switch's own certificate is not checked here: grpc's handshake already did, and failed
    differently when it was the problem.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    if tls.cert_file is not None and tls.key_file is not None:
        try:
            ctx.load_cert_chain(str(tls.cert_file), str(tls.key_file))
        except (OSError, ssl.SSLError):
            return False  # unusable locally: grpc would have said so; not a verdict on the switch
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            address, port, ssl=ctx, server_hostname=tls.server_name or address), timeout)
    except ssl.SSLError:
        return True  # TLS 1.2: the refusal comes within the handshake
    except (OSError, TimeoutError):
        return False
    try:
        writer.write(_H2_PREFACE)
        await writer.drain()
        return not await asyncio.wait_for(reader.read(9), timeout)  # TLS 1.3: closed after the handshake
    except (ssl.SSLError, ConnectionError):
        return True
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()


async def diagnose(address: str, port: int, tls: TlsConfig, timeout: float) -> tuple[str, str] | None:
    """(reason, hint) when the switch refuses our TLS client side, else None (the failure was not that)."""
    if not await refuses_client(address, port, tls, timeout):
        return None
    return client_side_verdict(tls, datetime.datetime.now(datetime.UTC))
