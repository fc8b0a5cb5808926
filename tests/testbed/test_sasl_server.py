"""The server side of PLAIN and SCRAM against the client code of the two Kafka libraries the stages use
(kafka-python, aiokafka), driven token by token, and against the RFC 7677 SCRAM-SHA-256 test vector."""

from __future__ import annotations

import base64

import pytest
from aiokafka.conn import SaslPlainAuthenticator, ScramAuthenticator
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import ScramClient

from flowtracer.testbed.sasl_server import PlainServer, SaslFailure, ScramServer, make_credentials, scram_credential

USER, PASSWORD = "flowtracer", "correct horse battery staple"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def credentials() -> dict:
    return make_credentials({USER: PASSWORD})


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
