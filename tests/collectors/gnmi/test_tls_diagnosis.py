"""The client-certificate diagnosis: a refused TLS client side is told apart from a switch that answers or
is not there, and our own certificate names the cause."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from gnmi_session_util import LoopThread, fast_gnmi, run_session, stop_session
from gnmi_switches import make_switch
from tls_certs import make_ca, make_client_cert, make_server_cert
from waiting import wait_for

from flowtracer.collectors.gnmi.config import Backoff, Target, Tls
from flowtracer.collectors.gnmi.session import TargetSession
from flowtracer.collectors.gnmi.tls_diagnosis import certificate_problem, client_side_verdict, refuses_client
from flowtracer.sim.switches.server import GnmiServer, TlsFiles


def test_refused_only_when_the_switch_closes_on_our_client_side(tmp_path: Path) -> None:
    ca, ca_key, ca_cert = make_ca(tmp_path, "ca")
    cert, key = make_server_cert(tmp_path, ca_key, ca_cert)
    client = make_client_cert(tmp_path, ca_key, ca_cert)
    with socket.socket() as s:  # a port nobody listens on: unreachable is not a refusal
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    with GnmiServer({"a": make_switch("a")}, tls=TlsFiles(cert, key, ca_file=ca)) as mtls, \
            GnmiServer({"b": make_switch("b")}, tls=TlsFiles(cert, key)) as plain_tls:
        async def check() -> list[bool]:
            with_cert = Tls(enabled=True, cert_file=client[0], key_file=client[1])
            return [await refuses_client("127.0.0.1", port, tls, 3.0) for port, tls in (
                (mtls.port, Tls(enabled=True)), (mtls.port, with_cert), (plain_tls.port, Tls(enabled=True)),
                (closed_port, Tls(enabled=True)))]
        assert asyncio.run(check()) == [True, False, False, False]


def test_verdict_names_the_cause_and_the_file(tmp_path: Path) -> None:
    _, ca_key, ca_cert = make_ca(tmp_path, "ca")
    valid = make_client_cert(tmp_path, ca_key, ca_cert, "valid")
    expired = make_client_cert(tmp_path, ca_key, ca_cert, "old", expired=True)
    now = datetime.datetime.now(datetime.UTC)
    assert certificate_problem(valid[0].read_bytes(), now) is None
    assert certificate_problem(valid[0].read_bytes(), now - datetime.timedelta(days=3))[0] == \
        "client_cert_not_yet_valid"  # type: ignore[index]
    reason, hint = client_side_verdict(Tls(enabled=True, cert_file=expired[0], key_file=expired[1]), now)
    assert reason == "client_cert_expired" and f"tls.cert_file {expired[0]} expired at" in hint
    reason, hint = client_side_verdict(Tls(enabled=True, cert_file=valid[0], key_file=valid[1]), now)
    assert reason == "client_cert_rejected" and "issuer CN=ca" in hint
    assert client_side_verdict(Tls(enabled=True), now)[0] == "client_cert_missing"


@contextlib.contextmanager
def openssl_tls_server(cert: Path, key: Path, client_ca: Path, version: ssl.TLSVersion) -> Iterator[int]:
    """A TLS server on OpenSSL (Python's ssl) that requires a client certificate and, unlike grpc's, sends the
    TLS alert when it refuses one, as many switch stacks do; it never gets as far as gNMI. Yields its port."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.maximum_version = version
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(client_ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.set_alpn_protocols(["h2"])
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.settimeout(2)
            with conn, contextlib.suppress(OSError):
                ctx.wrap_socket(conn, server_side=True).recv(16)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes accept(); close() alone does not
        listener.close()
        thread.join(5)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_switches_that_send_tls_alerts_are_diagnosed_too(tmp_path: Path, version: ssl.TLSVersion) -> None:
    """grpc reports an OpenSSL switch's refusal as ``..._ALERT_...`` (TLS 1.2) or ``Unwrap failed`` (TLS 1.3),
    not ``Socket closed``: the session still names the cause from our certificate."""
    ca, ca_key, ca_cert = make_ca(tmp_path, "ca")
    _, other_key, other_cert = make_ca(tmp_path, "other-ca")
    cert, key = make_server_cert(tmp_path, ca_key, ca_cert)
    clients = {"client_cert_expired": make_client_cert(tmp_path, ca_key, ca_cert, "old", expired=True),
               "client_cert_rejected": make_client_cert(tmp_path, other_key, other_cert, "foreign"),
               "client_cert_missing": None}
    gnmi = fast_gnmi(backoff=Backoff(base=0.2, cap=1.0, reset_after=5.0, slow_retry=1.0))
    lt = LoopThread()
    with openssl_tls_server(cert, key, ca, version) as port:
        sessions = {reason: TargetSession(Target(name=reason, address="127.0.0.1", port=port, tls=Tls(
            enabled=True, ca_file=ca, server_name="switch.test", cert_file=c[0] if c else None,
            key_file=c[1] if c else None)), gnmi, collector_id="t", emit=lambda b: None)
            for reason, c in clients.items()}
        futures = {reason: run_session(s, lt) for reason, s in sessions.items()}
        try:
            wait_for(lambda: all(s.stats.failures for s in sessions.values()), 10, "every session to fail once")
        finally:
            for reason, s in sessions.items():
                stop_session(s, futures[reason], lt)
            lt.close()
    for reason, s in sessions.items():
        assert set(s.stats.failures) == {reason}, (version, reason, s.stats.last_error)
        assert s.stats.last_error_class == "config"
