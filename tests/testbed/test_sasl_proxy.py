"""The test bed's SASL proxy: its server side of PLAIN and SCRAM against the client code of the two Kafka
libraries the stages use (kafka-python, aiokafka) and the RFC 7677 test vector, then live in front of a
real Tansu broker: every mechanism with both libraries, every ApiVersions version rewritten, a request
before authentication closing the connection, and the KIP-43 v0 handshake with unframed tokens."""

from __future__ import annotations

import asyncio
import base64
import socket
import struct
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.conn import SaslPlainAuthenticator, ScramAuthenticator, create_conn
from aiokafka.errors import SaslAuthenticationFailed
from kafka import KafkaConsumer, KafkaProducer
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.sasl import SaslHandshakeRequest

from flowtracer.testbed.sasl_proxy import (
    MECHANISMS,
    PlainServer,
    SaslFailure,
    SaslProxy,
    ScramServer,
    make_credentials,
    rewrite_api_versions,
    scram_credential,
)
from flowtracer.testbed.tansu import TansuBroker, free_port

USER, PASSWORD = "flowtracer", "correct horse battery staple"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def credentials() -> dict:
    return make_credentials({USER: PASSWORD})


# -- the SASL exchanges, against the libraries' own client code --------------------------------------

@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("password", [PASSWORD, "wrong"])
def test_scram_with_kafka_python_client(credentials: dict, mechanism: str, password: str) -> None:
    client, server = ScramClient(USER, password, mechanism), ScramServer(mechanism, credentials)
    client.process_server_first_message(server.step(client.first_message()))
    if password != PASSWORD:
        with pytest.raises(SaslFailure, match=rf"invalid credentials with SASL mechanism {mechanism}$"):
            server.step(client.final_message())
        return
    # The client checks the server signature: it raises unless the server proved it holds the key.
    client.process_server_final_message(server.step(client.final_message()))
    assert server.done and server.user == USER


@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("password", [PASSWORD, "wrong"])
def test_scram_with_aiokafka_client(credentials: dict, mechanism: str, password: str) -> None:
    client = ScramAuthenticator(loop=None, sasl_plain_password=password, sasl_plain_username=USER,
                                sasl_mechanism=mechanism)
    server = ScramServer(mechanism, credentials)
    token, _ = client._authenticator.send(None)  # the library's own generator drives the exchange
    token, _ = client._authenticator.send(server.step(token))
    if password != PASSWORD:
        with pytest.raises(SaslFailure, match="invalid credentials"):
            server.step(token)
        return
    with pytest.raises(StopIteration):  # the client accepted the server signature and is done
        client._authenticator.send(server.step(token))
    assert server.done and server.user == USER


def test_scram_sha_256_matches_the_rfc_7677_test_vector() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    creds = {"user": {"SCRAM-SHA-256": scram_credential("pencil", "SCRAM-SHA-256", salt, 4096)}}
    server = ScramServer("SCRAM-SHA-256", creds, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
             b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert server.step(final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("bad", [
    pytest.param(b"p=tls-unique,,n=flowtracer,r=abc", id="channel-binding"),
    pytest.param(b"n,a=other,n=flowtracer,r=abc", id="other-authzid"),
    pytest.param(b"n,,n=nobody,r=abc", id="unknown-user"),
    pytest.param(b"n,,r=abc", id="no-user"),
])
def test_scram_refuses_a_bad_client_first_message(credentials: dict, bad: bytes) -> None:
    with pytest.raises(SaslFailure):
        ScramServer("SCRAM-SHA-512", credentials).step(bad)


def test_scram_refuses_a_replayed_proof_with_another_nonce(credentials: dict) -> None:
    client = ScramClient(USER, PASSWORD, "SCRAM-SHA-512")
    client.process_server_first_message(ScramServer("SCRAM-SHA-512", credentials).step(client.first_message()))
    replay = ScramServer("SCRAM-SHA-512", credentials)
    replay.step(b"n,,n=" + USER.encode() + b",r=" + client.nonce[:32])
    with pytest.raises(SaslFailure, match="nonce mismatch"):
        replay.step(client.final_message())


@pytest.mark.parametrize("password", [PASSWORD, "wrong"])
def test_plain_with_both_clients(credentials: dict, password: str) -> None:
    tokens = [SaslMechanismPlain(sasl_plain_username=USER, sasl_plain_password=password).auth_bytes(),
              next(SaslPlainAuthenticator(loop=None, sasl_plain_password=password,
                                          sasl_plain_username=USER)._authenticator)[0]]
    for token in tokens:
        server = PlainServer(credentials)
        if password == PASSWORD:
            assert server.step(token) == b"" and server.user == USER
        else:
            with pytest.raises(SaslFailure, match=r"invalid credentials with SASL mechanism PLAIN$"):
                server.step(token)


@pytest.mark.parametrize("version", range(ApiVersionsResponse.min_version, ApiVersionsResponse.max_version + 1))
def test_api_versions_rewrite_adds_sasl_and_keeps_the_rest(version: int) -> None:
    """A broker answer without keys 17 and 36 gets them; other keys, throttle time and (v3+) the tagged
    feature fields come through unchanged, in every layout (compact arrays and tagged fields from v3)."""
    v = ApiVersionsResponse
    features = {} if version < 3 else {
        "supported_features": [v.SupportedFeatureKey(name="metadata.version", min_version=1, max_version=20,
                                                     version=version)],
        "finalized_features_epoch": 3, "finalized_features": [], "zk_migration_ready": False}
    original = v(version=version, error_code=0, throttle_time_ms=5,
                 api_keys=[v.ApiVersion(api_key=0, min_version=0, max_version=9, version=version),
                           v.ApiVersion(api_key=17, min_version=0, max_version=0, version=version)],
                 **features)
    original.with_header(correlation_id=11)
    rewritten = v.decode(rewrite_api_versions(bytes(original.encode(header=True)), version), version=version,
                         header=True)
    assert rewritten.header.correlation_id == 11 and rewritten.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in rewritten.api_keys} == \
        {0: (0, 9), 17: (0, 1), 36: (0, 2)}
    if version >= 1:
        assert rewritten.throttle_time_ms == 5
    if version >= 3:
        assert [f.name for f in rewritten.supported_features] == ["metadata.version"]
        assert rewritten.finalized_features_epoch == 3


# -- live, in front of Tansu --------------------------------------------------------------------------

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
