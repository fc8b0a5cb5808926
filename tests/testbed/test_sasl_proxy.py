"""The test bed's SASL proxy live in front of a real Tansu broker: every mechanism with both client
libraries (kafka-python, aiokafka), every ApiVersions version answered with the SASL keys, a request
before authentication closing the connection, out-of-order SASL requests, and the KIP-43 v0 handshake
with unframed tokens."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.conn import create_conn
from aiokafka.errors import SaslAuthenticationFailed
from kafka import KafkaConsumer, KafkaProducer
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.sasl import SaslHandshakeRequest

from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.testbed.sasl_proxy import SaslProxy
from flowtracer.testbed.sasl_server import MECHANISMS

USER, PASSWORD = "flowtracer", "correct horse battery staple"


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SaslProxy, TansuBroker]]:
    tansu_port = free_port()
    client = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
              "sasl_plain_username": USER, "sasl_plain_password": PASSWORD}
    with SaslProxy(tansu_port, {USER: PASSWORD}) as proxy, \
            TansuBroker(tansu_port, advertise=proxy.address, client_config=client,
                        log_dir=tmp_path_factory.mktemp("tansu-sasl")) as broker:
        yield proxy, broker


def _sasl(mechanism: str, password: str = PASSWORD) -> dict:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": USER, "sasl_plain_password": password}


def test_both_libraries_produce_and_consume_with_every_mechanism(proxied: tuple[SaslProxy, TansuBroker],
                                                                 unique_id: str) -> None:
    proxy, broker = proxied
    broker.create_topics({unique_id: 1})
    for mechanism in MECHANISMS:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False,
                                 client_id=f"kp-{mechanism}", **_sasl(mechanism))
        producer.send(unique_id, f"kafka-python {mechanism}".encode()).get(timeout=10)
        producer.close()

    async def aiokafka_produce() -> None:
        for mechanism in MECHANISMS:
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, client_id=f"aio-{mechanism}",
                                        **_sasl(mechanism))
            await producer.start()
            try:
                await producer.send_and_wait(unique_id, f"aiokafka {mechanism}".encode())
            finally:
                await producer.stop()

    asyncio.run(aiokafka_produce())
    consumer = KafkaConsumer(unique_id, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             group_id=None, consumer_timeout_ms=3000, **_sasl("SCRAM-SHA-256"))
    got = sorted(r.value.decode() for r in consumer)
    consumer.close()
    assert got == sorted(f"{lib} {m}" for lib in ("kafka-python", "aiokafka") for m in MECHANISMS)
    seen = {(s.client_id, s.mechanism) for s in proxy.sessions}
    assert {(f"{lib}-{m}", m) for lib in ("kp", "aio") for m in MECHANISMS} <= seen


def test_a_wrong_password_is_refused(proxied: tuple[SaslProxy, TansuBroker]) -> None:
    proxy, _ = proxied

    async def connect() -> None:
        conn = await create_conn("127.0.0.1", proxy.port, client_id="aio-badpass",
                                 **_sasl("SCRAM-SHA-512", "hunter2"))
        conn.close()

    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials"):
        asyncio.run(connect())
    assert any("'aio-badpass'" in r and "invalid credentials" in r for r in proxy.refusals)
    assert not any("hunter2" in r for r in proxy.refusals)


def _request(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return b""
    (size,) = struct.unpack(">i", head)
    return head + sock.recv(size, socket.MSG_WAITALL)


@pytest.mark.parametrize("version", range(ApiVersionsRequest.min_version, ApiVersionsRequest.max_version + 1))
def test_every_api_versions_version_advertises_sasl(proxied: tuple[SaslProxy, TansuBroker], version: int) -> None:
    proxy, broker = proxied
    request = ApiVersionsRequest(version=version, client_software_name="t", client_software_version="1")
    request.with_header(correlation_id=7, client_id="versions")
    answers = {}
    for name, port in (("proxy", proxy.port), ("broker", broker.port)):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            raw = _request(sock, request.encode(header=True, framed=True))
        answers[name] = ApiVersionsResponse.decode(raw[4:], version=version, header=True)
    via_proxy, direct = answers["proxy"], answers["broker"]
    assert via_proxy.header.correlation_id == 7 and via_proxy.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in via_proxy.api_keys}
    assert keys[17] == (0, 1) and keys[36] == (0, 2)
    direct_keys = {k.api_key: (k.min_version, k.max_version) for k in direct.api_keys}
    assert {k: v for k, v in keys.items() if k not in (17, 36)} == \
        {k: v for k, v in direct_keys.items() if k not in (17, 36)}
    assert via_proxy.throttle_time_ms == direct.throttle_time_ms if version >= 1 else True


def test_a_request_before_authentication_closes_the_connection(proxied: tuple[SaslProxy, TansuBroker]) -> None:
    proxy, _ = proxied
    # A Metadata v1 request (key 3, no topics = all) before any SASL exchange.
    metadata = struct.pack(">hhih", 3, 1, 99, 6) + b"sneaky" + struct.pack(">i", -1)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        assert _request(sock, struct.pack(">i", len(metadata)) + metadata) == b""
    assert any("'sneaky': request key 3 v1 before authentication" in r for r in proxy.refusals)


def test_a_truncated_handshake_is_refused_and_the_proxy_goes_on(proxied: tuple[SaslProxy, TansuBroker]) -> None:
    proxy, broker = proxied
    body = struct.pack(">hhih", 17, 1, 3, 5) + b"short"  # a SaslHandshake without its mechanism
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert sock.recv(1) == b""
    assert any(r.startswith("malformed request") for r in proxy.refusals)
    with broker.admin(client_id="after-malformed") as admin:
        assert admin.describe_cluster()["cluster_id"] == broker.cluster_id


def test_authenticate_before_handshake_is_an_illegal_state(proxied: tuple[SaslProxy, TansuBroker]) -> None:
    proxy, _ = proxied
    token = b"n,,n=flowtracer,r=abc"
    body = struct.pack(">hhih", 36, 1, 5, 5) + b"early" + struct.pack(">i", len(token)) + token
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        answer = _request(sock, struct.pack(">i", len(body)) + body)
        assert struct.unpack_from(">ih", answer, 4) == (5, 34)  # ILLEGAL_SASL_STATE
        assert sock.recv(1) == b""  # then closed


def test_a_v0_handshake_exchanges_unframed_scram_tokens(proxied: tuple[SaslProxy, TansuBroker]) -> None:
    proxy, _ = proxied
    handshake = SaslHandshakeRequest(version=0, mechanism="SCRAM-SHA-256")
    handshake.with_header(correlation_id=1, client_id="v0-client")
    client = ScramClient(USER, PASSWORD, "SCRAM-SHA-256")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        answer = _request(sock, handshake.encode(header=True, framed=True))
        assert struct.unpack_from(">ih", answer, 4) == (1, 0)  # correlation id, no error
        first = client.first_message()
        server_first = _request(sock, struct.pack(">i", len(first)) + first)[4:]
        client.process_server_first_message(server_first)
        final = client.final_message()
        client.process_server_final_message(_request(sock, struct.pack(">i", len(final)) + final)[4:])
    assert ("v0-client", "SCRAM-SHA-256", 0) in {(s.client_id, s.mechanism, s.handshake_version)
                                                 for s in proxy.sessions}
