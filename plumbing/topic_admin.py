"""The one topic plan: every topic the stages and processor deployments need, and applying it to a broker.

Stages call ``ensure_topics`` before producing (the processor, a tracing agent, the local pipeline):
a broker that auto-creates unknown topics (Tansu with 4 partitions, Kafka with num.partitions) would
otherwise pick counts of its own and silently break co-partitioning. The processor's start-up passes
its app id, which adds its internal topics and its state changelogs. ``deploy/create_topics.py``
applies the same plan with a :class:`ClusterPolicy` (replication, retention, compression) once per
cluster. Nothing else creates topics (the test bed's ``create_topics`` serves tests' own topics).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from flowtracer.schemas.topics import (
    CHANGELOG_TOPICS,
    DEFAULT_PARTITIONS,
    EXCHANGE_TOPICS,
    FABRIC_CHANGELOG,
    GROUP_FIM,
    INPUT_TOPICS,
    INTERNAL_TOPICS,
    OUTPUT_TOPICS,
    Topic,
    changelog_name,
    internal_name,
)


class TopicError(RuntimeError):
    """The broker's topics cannot serve the contract (wrong partition counts, broker unreachable)."""


@dataclass(frozen=True)
class TopicPlan:
    """One topic to create: name, partition count, topic configs, and whether the count is binding."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    strict: bool = False
    """True when a different partition count breaks the processor (co-partitioned, group-FIM, changelog)."""


@dataclass(frozen=True)
class ClusterPolicy:
    """What a production cluster adds to the contract's needs: replication, retention (ms, -1 keeps
    forever) and compression. Without one, topics get the broker's defaults and replication 1."""

    replication: int = 1
    min_insync: int | None = None
    """``min.insync.replicas``; None: replication - 1, at least 1."""
    retention_input_ms: int = 6 * 3_600_000
    retention_output_ms: int = 24 * 3_600_000
    retention_internal_ms: int = 3_600_000
    compression: str = "zstd"

    def insync(self) -> int:
        """The ``min.insync.replicas`` every topic gets."""
        return self.min_insync if self.min_insync is not None else max(1, self.replication - 1)


def wanted_partitions(topic: Topic, partitions: int) -> int:
    """Partitions of ``topic`` when the input topics have ``partitions``: 1 for the group-FIM topic, the
    fabric-state changelog and the exchange topics (read whole by every reader), else ``partitions``."""
    return 1 if topic in (GROUP_FIM, FABRIC_CHANGELOG) or topic in EXCHANGE_TOPICS else partitions


def binding(topic: Topic) -> bool:
    """Whether another partition count than :func:`wanted_partitions` breaks the processor: the
    co-partitioned inputs, its internal topics and its changelogs (not outputs, not exchange topics)."""
    return topic in INPUT_TOPICS or topic in INTERNAL_TOPICS or topic in CHANGELOG_TOPICS


def required_configs(topic: Topic) -> dict[str, str]:
    """Topic configs the contract needs whatever the deployment: exchange topics, path traces and
    changelogs are compacted (each key's latest record is all that matters)."""
    return {"cleanup.policy": "compact"} if topic.compacted else {}


def cluster_configs(topic: Topic, policy: ClusterPolicy) -> dict[str, str]:
    """Configs ``policy`` adds to ``topic``: min.insync everywhere; retention and compression on the
    inputs and outputs; retention on the internal topics; nothing more on compacted exchange and changelogs."""
    out = {"min.insync.replicas": str(policy.insync())}
    if topic in INPUT_TOPICS or topic in OUTPUT_TOPICS:
        retention = policy.retention_input_ms if topic in INPUT_TOPICS else policy.retention_output_ms
        out |= {"retention.ms": str(retention), "compression.type": policy.compression}
    elif topic in INTERNAL_TOPICS:
        out["retention.ms"] = str(policy.retention_internal_ms)
    return out


def plan(partitions: int = DEFAULT_PARTITIONS, app_ids: Sequence[str] = (),
         policy: ClusterPolicy | None = None) -> list[TopicPlan]:
    """Every topic the stages and the processor deployments ``app_ids`` need, with counts and configs.

    The contract topics always; per app id its internal topics and its state changelogs.
    """
    def one(topic: Topic, name: str) -> TopicPlan:
        configs = {**(cluster_configs(topic, policy) if policy else {}), **required_configs(topic)}
        return TopicPlan(name, wanted_partitions(topic, partitions), configs, strict=binding(topic))

    out = [one(t, t.name) for t in (*INPUT_TOPICS, *OUTPUT_TOPICS, *EXCHANGE_TOPICS)]
    for app in app_ids:
        out += [one(t, internal_name(app, t)) for t in INTERNAL_TOPICS]
        out += [one(t, changelog_name(app, t)) for t in CHANGELOG_TOPICS]
    return out


def problems(topics: Sequence[TopicPlan], counts: dict[str, int]) -> list[str]:
    """What is wrong with the broker's ``counts`` (name -> partitions) for ``topics``; empty when all is well."""
    out = [f"{t.name} did not appear" for t in topics if t.name not in counts]
    out += [f"{t.name} has {counts[t.name]} partitions, needs {t.partitions}" for t in topics
            if t.strict and t.name in counts and counts[t.name] != t.partitions]
    return out


def connect(bootstrap: str, client_id: str, timeout_s: float, wait_for_broker: bool,
            client_config: Mapping[str, Any] | None = None) -> KafkaAdminClient:
    """An admin client; with ``wait_for_broker``, retried until ``timeout_s`` (a broker still starting).
    ``client_config``: extra ``KafkaAdminClient`` settings (TLS/SASL: ``kafka_security.kafka_python_kwargs``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id,
                                    request_timeout_ms=int(min(timeout_s, 30.0) * 1000), **(client_config or {}))
        except KafkaError as e:
            if not wait_for_broker or time.monotonic() > deadline:
                raise TopicError(f"cannot reach Kafka at {bootstrap}: {e}") from None
            time.sleep(2)


def create(bootstrap: str, topics: Sequence[TopicPlan], replication: int = 1, timeout_s: float = 30.0,
           client_id: str = "flowtracer-admin", wait_for_broker: bool = False,
           report: Callable[[str], None] | None = None,
           client_config: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Create the missing ``topics`` (existing ones are left as they are, configs included); return the
    partition count of each that exists once they appeared or ``timeout_s`` passed. ``report`` gets one
    line per topic."""
    deadline = time.monotonic() + timeout_s
    admin = connect(bootstrap, client_id, timeout_s, wait_for_broker, client_config)
    try:
        existing = set(admin.list_topics())
        for t in topics:
            if t.name in existing:
                if report:
                    report(f"exists  {t.name} (configs left as they are)")
                continue
            try:  # one by one: a failure names its topic
                admin.create_topics([NewTopic(t.name, t.partitions, replication, topic_configs=t.configs or None)])
            except TopicAlreadyExistsError:  # another stage created it first
                continue
            except KafkaError as e:
                raise TopicError(f"cannot create topic {t.name} on {bootstrap}: {e}") from None
            if report:
                report(f"created {t.name}: {t.partitions} partitions x {replication}")
        counts: dict[str, int] = {}
        while True:
            meta = admin.describe_topics([t.name for t in topics])
            counts = {m.get("name", m.get("topic")): len(m["partitions"]) for m in meta if not m.get("error_code")}
            if len(counts) >= len(topics) or time.monotonic() > deadline:
                return counts
            time.sleep(0.1)
    except KafkaError as e:
        raise TopicError(f"cannot create topics on {bootstrap}: {e}") from None
    finally:
        admin.close()


def apply(bootstrap: str, topics: Sequence[TopicPlan], replication: int = 1, timeout_s: float = 30.0,
          client_id: str = "flowtracer-admin", wait_for_broker: bool = False,
          report: Callable[[str], None] | None = None,
          client_config: Mapping[str, Any] | None = None) -> list[str]:
    """Create the missing ``topics``; return the problems (absent topics, wrong binding partition counts).

    Raises :class:`TopicError` when the broker cannot be reached or refuses a topic.
    """
    counts = create(bootstrap, topics, replication, timeout_s, client_id, wait_for_broker, report, client_config)
    return problems(topics, counts)


def ensure_topics(bootstrap: str, partitions: int = DEFAULT_PARTITIONS, replication: int = 1,
                  timeout_s: float = 30.0, client_id: str = "flowtracer-admin",
                  app_id: str | None = None, client_config: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Create missing contract topics and check existing ones; return name -> partition count.

    With ``app_id``, also the internal topics and state changelogs of that processor deployment (its
    start-up). A binding topic with another partition count raises :class:`TopicError`.
    """
    topics = plan(partitions, (app_id,) if app_id is not None else ())
    counts = create(bootstrap, topics, replication, timeout_s, client_id, client_config=client_config)
    wrong = problems(topics, counts)
    if wrong:
        hint = "" if all(w.endswith("did not appear") for w in wrong) else \
            " (recreate them, or run with --partitions matching the existing topics)"
        raise TopicError(f"topics on {bootstrap}: {'; '.join(wrong)}{hint}")
    return counts
