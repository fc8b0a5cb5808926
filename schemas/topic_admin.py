"""Create the contract's topics explicitly, with the partition counts co-partitioning needs.

Every stage calls ``ensure_topics`` before producing: a broker that auto-creates unknown topics
(Tansu with 4 partitions, Kafka with num.partitions) would otherwise pick counts of its own and
silently break co-partitioning.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from flowtracer.schemas.topics import (
    DEFAULT_PARTITIONS,
    EXCHANGE_TOPICS,
    GROUP_FIM,
    INPUT_TOPICS,
    INTERNAL_TOPICS,
    OUTPUT_TOPICS,
    Topic,
    internal_name,
)

#: Topics that must have exactly the input partition count (co-partitioned with each other).
CO_PARTITIONED = ("flowtracer.counters.v1", "flowtracer.flows.v1", "flowtracer.path-traces.v1", "attributions.v1")


class TopicError(RuntimeError):
    """The broker's topics cannot serve the contract (wrong partition counts, broker unreachable)."""


def wanted_partitions(topic: Topic, partitions: int) -> int:
    """Partitions of ``topic`` when the input topics have ``partitions``: 1 for the group-FIM and
    exchange topics (read whole by every reader), else ``partitions``."""
    return 1 if topic is GROUP_FIM or topic in EXCHANGE_TOPICS else partitions


def required_configs(topic: Topic) -> dict[str, str]:
    """Topic configs the contract needs whatever the deployment: exchange topics and path traces are
    compacted (each key's latest record is all that matters)."""
    return {"cleanup.policy": "compact"} if topic.compacted else {}


def ensure_topics(bootstrap: str, partitions: int = DEFAULT_PARTITIONS, replication: int = 1,
                  timeout_s: float = 30.0, client_id: str = "flowtracer-admin",
                  app_id: str | None = None, client_config: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Create missing contract topics and check existing ones; return name -> partition count.

    With ``app_id``, also the internal topics of that processor deployment. ``client_config``: extra
    ``KafkaAdminClient`` settings (TLS/SASL: ``schemas.kafka_security.kafka_python_kwargs``).
    """
    wanted: dict[str, int] = {t.name: partitions for t in (*INPUT_TOPICS, *OUTPUT_TOPICS)}
    wanted.update({t.name: wanted_partitions(t, partitions) for t in EXCHANGE_TOPICS})
    configs = {t.name: required_configs(t) for t in (*INPUT_TOPICS, *EXCHANGE_TOPICS)}
    if app_id is not None:
        wanted.update({internal_name(app_id, t): wanted_partitions(t, partitions) for t in INTERNAL_TOPICS})
    deadline = time.monotonic() + timeout_s
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id,
                                 request_timeout_ms=int(timeout_s * 1000), **(client_config or {}))
    except KafkaError as e:
        raise TopicError(f"cannot reach Kafka at {bootstrap}: {e}") from None
    try:
        existing = set(admin.list_topics())
        missing = [NewTopic(name, n, replication, topic_configs=configs.get(name) or None)
                   for name, n in wanted.items() if name not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another stage created them first
                admin.create_topics(missing)
        counts: dict[str, int] = {}
        while True:
            meta = admin.describe_topics(list(wanted))
            counts = {m.get("name", m.get("topic")): len(m["partitions"]) for m in meta if not m.get("error_code")}
            if len(counts) == len(wanted) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    except KafkaError as e:
        raise TopicError(f"cannot create topics on {bootstrap}: {e}") from None
    finally:
        admin.close()
    absent = [name for name in wanted if name not in counts]
    if absent:
        raise TopicError(f"topics did not appear on {bootstrap}: {', '.join(absent)}")
    wrong = [f"{n} has {counts[n]}" for n in counts if n.endswith(CO_PARTITIONED) and counts[n] != partitions]
    if wrong:
        raise TopicError(f"co-partitioned topics must have {partitions} partitions: {'; '.join(wrong)} "
                         "(recreate them, or run with --partitions matching the existing topics)")
    return counts
