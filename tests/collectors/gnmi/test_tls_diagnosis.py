"""The client-certificate diagnosis: a refused TLS client side is told apart from a switch that answers or
is not there, and our own certificate names the cause."""

from __future__ import annotations

import asyncio
import datetime
import socket
from pathlib import Path

from gnmi_switches import make_switch
from tls_certs import make_ca, make_client_cert, make_server_cert

from flowtracer.collectors.gnmi.config import Tls
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
