"""``--kafka-config FILE``: the one way every command is told how to reach Kafka securely.

The file is a :class:`~flowtracer.plumbing.kafka_security.KafkaSecurity` YAML (security_protocol,
ca_file, cert_file/key_file, sasl_mechanism, username/username_env, password_env/password_file);
``FLOWTRACER_KAFKA_CONFIG`` names it when the option is absent, and ``FLOWTRACER_KAFKA_*`` variables set
single fields. Secrets never come from argv.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from flowtracer.exit_codes import EXIT_BAD_INPUT
from flowtracer.plumbing.kafka_security import (
    KafkaSecurity,
    KafkaSecurityError,
    check_broker,
    kafka_python_kwargs,
    load_kafka_security,
)
from flowtracer.plumbing.target_security import SecretError

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("flowtracer.kafka")


def kafka_config_option(f: F) -> F:
    """The ``--kafka-config FILE`` option (parameter ``kafka_config``)."""
    return click.option(
        "--kafka-config", "kafka_config", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help="Kafka TLS/SASL settings (YAML; docs/operations.md, Security) [env: FLOWTRACER_KAFKA_CONFIG; "
             "fields also from FLOWTRACER_KAFKA_*]. Default PLAINTEXT.")(f)


def kafka_security_or_exit(path: Path | None, prog: str, base: KafkaSecurity | None = None,
                           bootstrap: str | None = None) -> KafkaSecurity:
    """Load and check the settings (files readable, secrets present; with ``bootstrap`` and TLS, that the
    broker's certificate is trusted and the SASL login is accepted); on error one line and exit 2."""
    try:
        sec = load_kafka_security(path, base=base)
        kafka_python_kwargs(sec)  # fail fast: a missing CA file or password is named before any connection
        if bootstrap:
            check_broker(sec, bootstrap)
    except (KafkaSecurityError, SecretError) as e:
        click.echo(f"{prog}: {e}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if sec.security_protocol == "SASL_PLAINTEXT":
        log.warning("Kafka %s without TLS: %s", sec.describe(),
                    "the password crosses the network in clear" if sec.sasl_mechanism == "PLAIN"
                    else "the records and the SCRAM exchange are unencrypted")
    elif sec.security_protocol != "PLAINTEXT":
        log.info("Kafka security: %s", sec.describe())
    return sec
