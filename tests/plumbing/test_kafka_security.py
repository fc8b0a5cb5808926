"""The Kafka security model, the exact client settings it produces for kafka-python and Faust/aiokafka,
and the start-up SASL login check against a real broker behind the test bed's SASL proxy (the pipeline
over TLS + SCRAM is tests/e2e/test_kafka_tls_e2e.py).
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from tls_certs import make_ca

from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.plumbing.kafka_security import (
    KafkaSecurity,
    KafkaSecurityError,
    check_broker_login,
    faust_settings,
    kafka_python_kwargs,
    load_kafka_security,
    parse_kafka_security,
)
from flowtracer.plumbing.target_security import SecretError
from flowtracer.testbed.sasl_proxy import SaslProxy


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    """A CA bundle ssl can load."""
    return make_ca(tmp_path, "kafka-ca")[0]


def test_plaintext_is_the_default() -> None:
    assert kafka_python_kwargs(None) == {"security_protocol": "PLAINTEXT"}
    assert faust_settings(None, "a:1, b:2") == {"broker": ["kafka://a:1", "kafka://b:2"]}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_kwargs_for_both_libraries(mechanism: str, ca: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    monkeypatch.setenv("KUSER", "flowtracer")
    sec = KafkaSecurity(security_protocol="SASL_SSL", ca_file=ca, sasl_mechanism=mechanism,
                        username_env="KUSER", password_file=pw)
    kw = kafka_python_kwargs(sec)
    assert kw == {"security_protocol": "SASL_SSL", "ssl_check_hostname": True, "ssl_cafile": str(ca),
                  "sasl_mechanism": mechanism, "sasl_plain_username": "flowtracer", "sasl_plain_password": "s3cret"}
    for client in (KafkaProducer, KafkaConsumer, KafkaAdminClient):  # every key is one the client knows
        assert set(kw) <= set(client.DEFAULT_CONFIG), client
    settings = faust_settings(sec, "k:9093")
    auth = credentials_to_aiokafka_auth(settings["broker_credentials"])  # what Faust hands aiokafka
    assert auth["security_protocol"] == "SASL_SSL"
    assert auth["sasl_mechanism"] == mechanism
    assert (auth["sasl_plain_username"], auth["sasl_plain_password"]) == ("flowtracer", "s3cret")
    assert isinstance(auth["ssl_context"], ssl.SSLContext)
    assert auth["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    assert "s3cret" not in repr(sec) + sec.describe()


def test_sasl_plaintext_and_ssl_only(ca: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWTRACER_KAFKA_PASSWORD", "pw")
    sec = KafkaSecurity(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", username="u")
    auth = credentials_to_aiokafka_auth(faust_settings(sec, "k:1")["broker_credentials"])
    assert (auth["security_protocol"], auth["ssl_context"], auth["sasl_plain_password"]) == ("SASL_PLAINTEXT", None, "pw")
    ssl_only = KafkaSecurity(security_protocol="SSL", ca_file=ca)
    assert credentials_to_aiokafka_auth(faust_settings(ssl_only, "k:1")["broker_credentials"])["security_protocol"] == "SSL"
    assert kafka_python_kwargs(ssl_only) == {"security_protocol": "SSL", "ssl_check_hostname": True,
                                             "ssl_cafile": str(ca)}


@pytest.mark.parametrize(("data", "message"), [
    ({"security_protocol": "SASL_SSL", "password": "x"}, "not accepted inline"),
    ({"security_protocol": "SASL_SSL", "username": "u"}, "needs sasl_mechanism"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "username": "u"}, "sasl_mechanism"),
    ({"security_protocol": "PLAINTEXT", "ca_file": "/ca.pem"}, "need security_protocol SSL or SASL_SSL"),
    ({"security_protocol": "SSL", "username": "u"}, "need security_protocol SASL_PLAINTEXT or SASL_SSL"),
    ({"security_protocol": "SSL", "cert_file": "/c.pem"}, "cert_file and key_file go together"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}, "needs username"),
    ({"security_protocol": "TLS"}, "security_protocol"),
])
def test_bad_settings_are_one_line_naming_the_problem(data: dict, message: str) -> None:
    with pytest.raises(KafkaSecurityError, match=message) as e:
        parse_kafka_security(data, "kafka.yaml")
    assert str(e.value).startswith("kafka.yaml: ") and "\n" not in str(e.value)


def test_missing_secret_and_files_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE", raising=False)
    sec = KafkaSecurity(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", username="u", password_env="NOPE")
    with pytest.raises(SecretError, match="NOPE is not set"):
        kafka_python_kwargs(sec)
    with pytest.raises(KafkaSecurityError, match=r"ca_file: cannot read .*missing\.pem"):
        kafka_python_kwargs(KafkaSecurity(security_protocol="SSL", ca_file=tmp_path / "missing.pem"))


def test_file_then_environment(tmp_path: Path, ca: Path) -> None:
    f = tmp_path / "kafka.yaml"
    f.write_text(f"security_protocol: SSL\nca_file: {ca}\n")
    env = {"FLOWTRACER_KAFKA_CONFIG": str(f)}
    assert load_kafka_security(env=env) == KafkaSecurity(security_protocol="SSL", ca_file=ca)
    env.update(FLOWTRACER_KAFKA_SECURITY_PROTOCOL="SASL_SSL", FLOWTRACER_KAFKA_SASL_MECHANISM="SCRAM-SHA-256",
               FLOWTRACER_KAFKA_USERNAME="svc")
    sec = load_kafka_security(env=env)
    assert (sec.security_protocol, sec.ca_file, sec.username) == ("SASL_SSL", ca, "svc")
    base = KafkaSecurity(security_protocol="SSL", ca_file=ca)
    assert load_kafka_security(None, base=base, env={}) == base  # the collector YAML's kafka.security
    f.write_text("security_protocol: [\n")
    with pytest.raises(KafkaSecurityError, match="YAML syntax error"):
        load_kafka_security(f, env={})


@pytest.mark.parametrize(("mechanism", "password", "refused"), [
    ("SCRAM-SHA-512", "right-pw", None),
    ("PLAIN", "right-pw", None),
    ("SCRAM-SHA-256", "wrong-pw", r"SASL login refused for SASL_PLAINTEXT \(SCRAM-SHA-256 as u\): \[Error 58\] "
                                  r"SaslAuthenticationFailed: .*invalid credentials"),
])
def test_the_login_check_names_a_refused_login_in_one_line(kafka: TansuBroker, mechanism: str, password: str,
                                                             refused: str | None) -> None:
    sec = KafkaSecurity(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism, username="u",
                        password_env="FT_TEST_KAFKA_PW")
    with SaslProxy(kafka.port, {"u": "right-pw"}) as proxy, pytest.MonkeyPatch.context() as env:
        env.setenv("FT_TEST_KAFKA_PW", password)
        if refused is None:
            check_broker_login(sec, proxy.address)
            assert [(s.user, s.mechanism, s.client_id) for s in proxy.sessions] == \
                [("u", mechanism, "flowtracer-login-check")]
        else:
            with pytest.raises(KafkaSecurityError, match=refused) as e:
                check_broker_login(sec, proxy.address)
            assert "\n" not in str(e.value) and password not in str(e.value)


def test_the_login_check_names_a_mechanism_the_broker_lacks(kafka: TansuBroker,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWTRACER_KAFKA_PASSWORD", "pw")
    sec = KafkaSecurity(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", username="u")
    with SaslProxy(kafka.port, {"u": "pw"}, mechanisms=["SCRAM-SHA-512"]) as proxy, \
            pytest.raises(KafkaSecurityError, match="UnsupportedSaslMechanism"):
        check_broker_login(sec, proxy.address)


def test_the_login_check_leaves_unreachable_brokers_and_plaintext_to_the_clients() -> None:
    check_broker_login(KafkaSecurity(), "127.0.0.1:1")
    sec = KafkaSecurity(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", username="u",
                        password_env="PATH")  # any set variable: nothing listens, nothing is sent
    check_broker_login(sec, f"127.0.0.1:{free_port()}")
