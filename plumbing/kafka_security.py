"""How every stage connects to Kafka: TLS and SASL (PLAIN, SCRAM-SHA-256/512), one model for all stages.

:class:`KafkaSecurity` is the ``kafka.security`` section of the collector YAML and the content of the
file every other command takes as ``--kafka-config FILE``; ``FLOWTRACER_KAFKA_*`` variables set or
override single fields (:func:`load_kafka_security`). Paths are to PEM files. The password comes only
from an environment variable or a file, never inline, never from argv, and is read only when a client
is built (:meth:`KafkaSecurity.credentials`). :func:`kafka_python_kwargs` and :func:`faust_settings`
turn the one model into the settings of the two client libraries (kafka-python for the collector,
agents, admin and readers; aiokafka under Faust for the processor).
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr, ValidationError, model_validator

from flowtracer.plumbing.config_yaml import LineIndex, format_validation_error, parse_yaml, read_text
from flowtracer.plumbing.target_security import Credentials, SecretError

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

#: The password variable read when a SASL config names neither ``password_env`` nor ``password_file``.
DEFAULT_PASSWORD_ENV = "FLOWTRACER_KAFKA_PASSWORD"


class KafkaSecurityError(ValueError):
    """A Kafka security setting is invalid or a file/variable it names is missing; ``str()`` says which."""


class KafkaSecurity(Credentials):
    """TLS and SASL towards the Kafka brokers. Defaults: PLAINTEXT, nothing else. The SASL user and
    password references are the gNMI :class:`Credentials` fields (no inline password)."""

    security_protocol: Protocol = "PLAINTEXT"
    #: CA bundle (PEM) that signed the brokers' certificates; None = the system's trust store.
    ca_file: Path | None = None
    #: Client certificate and key (PEM) for mutual TLS.
    cert_file: Path | None = None
    key_file: Path | None = None
    #: Check that the broker certificate names the host we connect to (leave on outside labs).
    check_hostname: bool = True
    sasl_mechanism: Mechanism | None = None

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSecurity:
        tls = self.security_protocol in ("SSL", "SASL_SSL")
        sasl = self.security_protocol.startswith("SASL_")
        if not tls and (self.ca_file or self.cert_file or self.key_file):
            raise ValueError(f"ca_file/cert_file/key_file need security_protocol SSL or SASL_SSL, "
                             f"not {self.security_protocol}")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together (mutual TLS)")
        if sasl and self.sasl_mechanism is None:
            raise ValueError(f"security_protocol {self.security_protocol} needs sasl_mechanism "
                             "(PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
        sasl_fields = [f for f in ("sasl_mechanism", "username", "username_env", "password_env", "password_file")
                       if getattr(self, f) is not None]
        if not sasl and sasl_fields:
            raise ValueError(f"{', '.join(sasl_fields)} need security_protocol SASL_PLAINTEXT or SASL_SSL, "
                             f"not {self.security_protocol}")
        if sasl and self.username is None and self.username_env is None:
            raise ValueError("SASL needs username or username_env")
        if self.password_env and self.password_file:
            raise ValueError("give password_env or password_file, not both")
        return self

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def describe(self) -> str:
        """One log-safe phrase, e.g. ``"SASL_SSL (SCRAM-SHA-512 as flowtracer)"``; never the password."""
        if not self.sasl:
            return self.security_protocol
        who = self.username if self.username is not None else f"${self.username_env}"
        return f"{self.security_protocol} ({self.sasl_mechanism} as {who})"

    def credentials(self) -> tuple[str, SecretStr]:
        """(username, password) for SASL. Raises :class:`SecretError` naming the missing variable or file."""
        user = self.username
        if self.username_env:
            user = os.environ.get(self.username_env)
            if user is None:
                raise SecretError(f"kafka username_env: environment variable {self.username_env} is not set")
        if self.password_file is not None:
            try:
                password = self.password_file.read_text(encoding="utf-8").strip()
            except OSError as e:
                raise SecretError(f"kafka password_file: cannot read {self.password_file}: {e.strerror}") from None
        else:
            env = self.password_env if self.password_env else DEFAULT_PASSWORD_ENV
            value = os.environ.get(env)
            if value is None:
                raise SecretError(f"kafka password_env: environment variable {env} is not set")
            password = value
        return user or "", SecretStr(password)

    def check_files(self) -> None:
        """Raise :class:`KafkaSecurityError` naming the first PEM file that cannot be read."""
        for field in ("ca_file", "cert_file", "key_file"):
            path: Path | None = getattr(self, field)
            if path is not None and not os.access(path, os.R_OK):
                raise KafkaSecurityError(f"kafka {field}: cannot read {path}")


PLAINTEXT = KafkaSecurity()


def kafka_python_kwargs(sec: KafkaSecurity | None) -> dict[str, Any]:
    """Keyword arguments for kafka-python's ``KafkaProducer``/``KafkaConsumer``/``KafkaAdminClient``.

    Resolves the password now (SecretError when missing); the result holds it, so never log it.
    """
    sec = sec or PLAINTEXT
    out: dict[str, Any] = {"security_protocol": sec.security_protocol}
    if sec.tls:
        sec.check_files()
        out["ssl_check_hostname"] = sec.check_hostname
        if sec.ca_file is not None:
            out["ssl_cafile"] = str(sec.ca_file)
        if sec.cert_file is not None:
            out["ssl_certfile"] = str(sec.cert_file)
            out["ssl_keyfile"] = str(sec.key_file)
    if sec.sasl:
        user, password = sec.credentials()
        out["sasl_mechanism"] = sec.sasl_mechanism
        out["sasl_plain_username"] = user
        out["sasl_plain_password"] = password.get_secret_value()
    return out


def ssl_context(sec: KafkaSecurity) -> ssl.SSLContext:
    """A client TLS context: verifies the broker against ``ca_file`` (else the system store), with the
    client certificate for mutual TLS. Raises :class:`KafkaSecurityError` naming an unreadable file."""
    sec.check_files()
    try:
        ctx = ssl.create_default_context(cafile=str(sec.ca_file) if sec.ca_file else None)
        ctx.check_hostname = sec.check_hostname
        if sec.cert_file is not None:
            ctx.load_cert_chain(str(sec.cert_file), str(sec.key_file))
    except (ssl.SSLError, OSError) as e:
        raise KafkaSecurityError(f"kafka TLS files: {e}") from None
    return ctx


def check_broker_certificate(sec: KafkaSecurity | None, bootstrap: str, timeout_s: float = 5.0) -> None:
    """One TLS handshake with the first reachable bootstrap server; :class:`KafkaSecurityError` in one line
    when its certificate is not trusted (another CA, wrong name, expired): retrying never heals that,
    while the clients would retry and log it forever. Unreachable servers are left to the clients'
    retries; PLAINTEXT/SASL_PLAINTEXT check nothing."""
    sec = sec or PLAINTEXT
    if not sec.tls:
        return
    ctx = ssl_context(sec)
    for server in (b.strip() for b in bootstrap.split(",")):
        host, _, port = server.rpartition(":")
        host = host.strip("[]")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s) as raw, \
                    ctx.wrap_socket(raw, server_hostname=host):
                return
        except ssl.SSLCertVerificationError as e:
            trust = f"ca_file {sec.ca_file}" if sec.ca_file else "the system trust store"
            raise KafkaSecurityError(
                f"Kafka broker {server}: TLS certificate rejected ({e.verify_message}; "
                f"CERTIFICATE_VERIFY_FAILED) checked against {trust}") from None
        except (OSError, ValueError):
            continue


def check_broker_login(sec: KafkaSecurity | None, bootstrap: str, timeout_s: float = 10.0) -> None:
    """One SASL login at the first reachable bootstrap server; :class:`KafkaSecurityError` in one line when
    the broker refuses it (wrong user or password, mechanism not enabled): the clients would retry that
    forever and only log it. Unreachable servers are left to the clients' retries; non-SASL checks nothing.

    The login uses aiokafka's connection (the processor's client library, installed everywhere with
    Faust); kafka-python gets the same mechanism, user and password from :func:`kafka_python_kwargs`.
    The message names the mechanism and user, never the password."""
    sec = sec or PLAINTEXT
    if not sec.sasl:
        return
    import asyncio

    from aiokafka.conn import create_conn  # deferred: a login check is one connection at start
    from aiokafka.errors import KafkaError

    user, password = sec.credentials()

    async def login(host: str, port: int) -> None:
        conn = await asyncio.wait_for(create_conn(
            host, port, client_id="flowtracer-login-check", request_timeout_ms=int(timeout_s * 1000),
            ssl_context=ssl_context(sec) if sec.tls else None, security_protocol=sec.security_protocol,
            sasl_mechanism=sec.sasl_mechanism, sasl_plain_username=user,
            sasl_plain_password=password.get_secret_value()), timeout_s)
        conn.close()

    for server in (b.strip() for b in bootstrap.split(",")):
        host, _, port = server.rpartition(":")
        if not port.isdigit():
            continue  # not a host:port: left to the clients, which name it
        try:
            asyncio.run(login(host.strip("[]"), int(port)))
            return
        except (OSError, TimeoutError):
            continue
        except (KafkaError, AssertionError, ValueError) as e:
            # aiokafka raises the broker's SASL error (SaslAuthenticationFailed, UnsupportedSaslMechanismError);
            # its SCRAM client raises ValueError on a server signature that does not verify.
            raise KafkaSecurityError(
                f"Kafka broker {server}: SASL login refused for {sec.describe()}: {e or type(e).__name__}") from None


def check_broker(sec: KafkaSecurity | None, bootstrap: str) -> None:
    """The start-up checks that retrying never heals: the broker's TLS certificate, then the SASL login."""
    check_broker_certificate(sec, bootstrap)
    check_broker_login(sec, bootstrap)


def faust_settings(sec: KafkaSecurity | None, bootstrap: str) -> dict[str, Any]:
    """Faust app settings: ``broker`` (``kafka://`` URLs: the scheme picks Faust's aiokafka transport,
    security is not in the URL) and ``broker_credentials`` (``faust.SSLCredentials`` or
    ``faust.SASLCredentials``, which Faust hands to aiokafka for its consumer, producer and admin)."""
    import faust  # deferred: only the processor needs Faust

    sec = sec or PLAINTEXT
    out: dict[str, Any] = {"broker": [f"kafka://{b.strip()}" for b in bootstrap.split(",")]}
    if sec.sasl:
        user, password = sec.credentials()
        out["broker_credentials"] = faust.SASLCredentials(
            username=user, password=password.get_secret_value(), mechanism=sec.sasl_mechanism,
            ssl_context=ssl_context(sec) if sec.tls else None)
    elif sec.tls:
        out["broker_credentials"] = faust.SSLCredentials(ssl_context(sec))
    return out


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """Fields set by ``FLOWTRACER_KAFKA_*`` variables (each documented in docs/operations.md)."""
    found = {
        "security_protocol": env.get("FLOWTRACER_KAFKA_SECURITY_PROTOCOL"),
        "ca_file": env.get("FLOWTRACER_KAFKA_CA_FILE"),
        "cert_file": env.get("FLOWTRACER_KAFKA_CERT_FILE"),
        "key_file": env.get("FLOWTRACER_KAFKA_KEY_FILE"),
        "sasl_mechanism": env.get("FLOWTRACER_KAFKA_SASL_MECHANISM"),
        "username": env.get("FLOWTRACER_KAFKA_USERNAME"),
        "password_file": env.get("FLOWTRACER_KAFKA_PASSWORD_FILE"),
    }
    return {k: v for k, v in found.items() if v}


def parse_kafka_security(data: Any, source: str, lines: LineIndex | None = None) -> KafkaSecurity:
    """Validate a mapping; :class:`KafkaSecurityError` names ``source`` (and line) and the field."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise KafkaSecurityError(f"{source}: expected a mapping (security_protocol, ca_file, ...)")
    try:
        return KafkaSecurity.model_validate(data)
    except ValidationError as e:
        raise KafkaSecurityError(format_validation_error(e, source, lines, root="kafka security")) from None


def load_kafka_security(path: Path | None = None, base: KafkaSecurity | None = None,
                        env: Mapping[str, str] | None = None) -> KafkaSecurity:
    """The Kafka security of a command: ``base`` (e.g. the collector YAML's ``kafka.security``), replaced
    by the YAML file ``path`` (``--kafka-config``, else ``$FLOWTRACER_KAFKA_CONFIG``), then single fields
    from ``FLOWTRACER_KAFKA_*``. Raises :class:`KafkaSecurityError` naming the file or variable."""
    env = os.environ if env is None else env
    if path is None and env.get("FLOWTRACER_KAFKA_CONFIG"):
        path = Path(env["FLOWTRACER_KAFKA_CONFIG"])
    data: Any = (base or PLAINTEXT).model_dump(exclude_defaults=True)
    source = "kafka security"
    lines: LineIndex | None = None
    if path is not None:
        source = str(path)
        data, lines = parse_yaml(read_text(Path(path), KafkaSecurityError), source, KafkaSecurityError)
    overrides = _env_overrides(env)
    if overrides:
        if not isinstance(data, dict):
            raise KafkaSecurityError(f"{source}: expected a mapping (security_protocol, ca_file, ...)")
        data = {**data, **overrides}
        source += " + FLOWTRACER_KAFKA_* environment"
    return parse_kafka_security(data, source, lines)
