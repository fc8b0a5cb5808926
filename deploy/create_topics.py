#!/usr/bin/env python3
"""Create flowtracer's Kafka topics before any stage starts: partition counts, replication, retention.

Every stage creates missing topics itself (``ensure_topics``, the processor's changelog), but with
replication factor 1 and the broker's default retention: fine for a laptop, wrong for a cluster.
Run this once per cluster (the compose stack's ``kafka-init`` service, the Kubernetes Job
``flowtracer-topics``) and again after adding a processor deployment (another ``--app-id``)::

    flowtracer-create-topics --kafka kafka:9092 --partitions 32 --replication 3 \\
        --app-id flowtracer-processor [--app-id flowtracer-infer] [--dry-run]

Names and counts come from the code, not from a copy: the contract topics of
``flowtracer.schemas.topics`` with ``ensure_topics``' counts (inputs and every output topic
``--partitions``; the agents' compacted ``flowtracer.qp-ends.v1`` 1; per app id
``<app-id>.flowtracer.attributions.v1`` ``--partitions`` and ``<app-id>.flowtracer.group-fim.v1`` 1)
and the processor's state changelogs (``<app-id>-stage-state-changelog``, ``--partitions``, and
``<app-id>-fabric-state-changelog``, 1, both compacted). Existing topics are left as they are, but
a co-partitioned topic (or the group-FIM topic) with the wrong partition count is an error:
co-partitioning cannot be repaired in place (docs/operations.md, "Changing the partition count").

Exit codes: 0 every topic is there with the right count; 1 Kafka unreachable or a wrong count;
2 bad arguments or Kafka security settings. TLS/SASL: ``--kafka-config FILE`` (or
``FLOWTRACER_KAFKA_CONFIG`` and the ``FLOWTRACER_KAFKA_*`` variables), as every stage
(docs/operations.md, Security).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowtracer.schemas.durations import parse_duration
from flowtracer.schemas.kafka_security import check_broker_certificate, kafka_python_kwargs, load_kafka_security
from flowtracer.schemas.topic_admin import CO_PARTITIONED, required_configs, wanted_partitions
from flowtracer.schemas.topics import (
    DEFAULT_PARTITIONS,
    EXCHANGE_TOPICS,
    GROUP_FIM,
    INPUT_TOPICS,
    INTERNAL_TOPICS,
    OUTPUT_TOPICS,
    internal_name,
)

DEFAULT_APP_ID = "flowtracer-processor"


@dataclass(frozen=True)
class TopicPlan:
    """One topic to create: name, partition count, topic configs, and whether the count is binding."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    strict: bool = False
    """True when a different partition count breaks the processor (co-partitioned, group-FIM, changelog)."""


def duration_ms(text: str) -> int:
    """``90m``, ``6h``, ``7d``, ``500ms`` -> milliseconds; ``-1`` = keep forever (the shared duration parser)."""
    if text == "-1":
        return -1
    return round(1000 * parse_duration(text, hint="e.g. 6h, 7d, 90m, or -1", units=("ms", "s", "m", "h", "d")))


def changelog_name(app_id: str) -> str:
    """The processor's stage-state changelog for ``app_id`` (the processor's own naming function)."""
    from flowtracer.stream.runtime.app import state_changelog_topic
    from flowtracer.stream.runtime.config import ProcessorConfig

    return state_changelog_topic(ProcessorConfig.model_construct(app_id=app_id))


def fabric_changelog_name(app_id: str) -> str:
    """The processor's fabric-state changelog for ``app_id`` (one partition, like the group-FIM topic)."""
    from flowtracer.stream.runtime.app import fabric_changelog_topic
    from flowtracer.stream.runtime.config import ProcessorConfig

    return fabric_changelog_topic(ProcessorConfig.model_construct(app_id=app_id))


def plan(partitions: int = DEFAULT_PARTITIONS, app_ids: tuple[str, ...] = (DEFAULT_APP_ID,), replication: int = 1,
         min_insync: int | None = None, retention_input_ms: int = 6 * 3_600_000,
         retention_output_ms: int = 24 * 3_600_000, retention_internal_ms: int = 3_600_000,
         compression: str = "zstd") -> list[TopicPlan]:
    """Every topic the stages and processor deployments ``app_ids`` need, with counts and configs."""
    isr = min_insync if min_insync is not None else max(1, replication - 1)
    common = {"min.insync.replicas": str(isr)}
    out: list[TopicPlan] = []
    for t in INPUT_TOPICS:
        out.append(TopicPlan(t.name, partitions, {**common, "retention.ms": str(retention_input_ms),
                                                  "compression.type": compression, **required_configs(t)},
                             strict=True))
    for t in OUTPUT_TOPICS:
        out.append(TopicPlan(t.name, partitions, {**common, "retention.ms": str(retention_output_ms),
                                                  "compression.type": compression}))
    for t in EXCHANGE_TOPICS:  # the agents' QP ends
        out.append(TopicPlan(t.name, wanted_partitions(t, partitions), {**common, **required_configs(t)}))
    for app in app_ids:
        for t in INTERNAL_TOPICS:
            out.append(TopicPlan(internal_name(app, t), wanted_partitions(t, partitions),
                                 {**common, "retention.ms": str(retention_internal_ms)},
                                 strict=t is GROUP_FIM or t.name.endswith(CO_PARTITIONED)))
        out.append(TopicPlan(changelog_name(app), partitions, {**common, "cleanup.policy": "compact"}, strict=True))
        out.append(TopicPlan(fabric_changelog_name(app), 1, {**common, "cleanup.policy": "compact"}, strict=True))
    return out


def apply(bootstrap: str, topics: list[TopicPlan], replication: int, timeout_s: float,
          client_config: dict[str, Any] | None = None) -> list[str]:
    """Create the missing topics; return the problems (wrong partition counts), empty when all is well."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    deadline = time.monotonic() + timeout_s
    while True:  # the broker may still be starting
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="flowtracer-create-topics",
                                     request_timeout_ms=30_000, **(client_config or {}))
            break
        except KafkaError as e:
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot reach Kafka at {bootstrap}: {e}") from None
            time.sleep(2)
    try:
        existing = set(admin.list_topics())
        missing = [NewTopic(t.name, t.partitions, replication, topic_configs=t.configs)
                   for t in topics if t.name not in existing]
        for new in missing:  # one by one: a failure names its topic
            try:
                admin.create_topics([new])
                print(f"created {new.name}: {new.num_partitions} partitions x {replication}", file=sys.stderr)
            except TopicAlreadyExistsError:
                pass
        for t in topics:
            if t.name in existing:
                print(f"exists  {t.name} (configs left as they are)", file=sys.stderr)
        counts: dict[str, int] = {}
        while len(counts) < len(topics):
            meta = admin.describe_topics([t.name for t in topics])
            counts = {m.get("name", m.get("topic")): len(m["partitions"]) for m in meta if not m.get("error_code")}
            if len(counts) < len(topics):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
    except KafkaError as e:
        raise RuntimeError(f"cannot create topics on {bootstrap}: {e}") from None
    finally:
        admin.close()
    problems = [f"{t.name} did not appear" for t in topics if t.name not in counts]
    problems += [f"{t.name} has {counts[t.name]} partitions, needs {t.partitions}" for t in topics
                 if t.strict and t.name in counts and counts[t.name] != t.partitions]
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="flowtracer-create-topics", description=__doc__.splitlines()[0])
    ap.add_argument("--kafka", metavar="HOST:PORT[,HOST:PORT]", help="bootstrap servers (not needed with --dry-run)")
    ap.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                    help=f"the processors' --partitions [default: {DEFAULT_PARTITIONS}]")
    ap.add_argument("--replication", type=int, default=1, help="replication factor [default: 1; 3 in production]")
    ap.add_argument("--min-insync-replicas", type=int, default=None, help="[default: replication - 1, at least 1]")
    ap.add_argument("--app-id", action="append", dest="app_ids", metavar="APP_ID",
                    help=f"a processor deployment's --app-id (repeatable) [default: {DEFAULT_APP_ID}]")
    ap.add_argument("--retention-input", default="6h", help="counters and flows topics [default: 6h]")
    ap.add_argument("--retention-output", default="24h", help="output topics [default: 24h]")
    ap.add_argument("--retention-internal", default="1h", help="attributions and group-FIM topics [default: 1h]")
    ap.add_argument("--compression", default="zstd", choices=["zstd", "lz4", "gzip", "snappy", "producer"],
                    help="compression.type of the input and output topics [default: zstd]")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the broker [default: 120]")
    ap.add_argument("--dry-run", action="store_true", help="print the plan as JSON and touch nothing")
    ap.add_argument("--kafka-config", type=Path, default=None, metavar="FILE",
                    help="Kafka TLS/SASL settings (YAML) [env: FLOWTRACER_KAFKA_CONFIG]; default PLAINTEXT")
    a = ap.parse_args(argv)
    try:
        if a.partitions < 1 or a.replication < 1:
            raise ValueError("--partitions and --replication must be at least 1")
        if a.min_insync_replicas is not None and not 1 <= a.min_insync_replicas <= a.replication:
            raise ValueError("--min-insync-replicas must be between 1 and --replication")
        topics = plan(a.partitions, tuple(a.app_ids or (DEFAULT_APP_ID,)), a.replication, a.min_insync_replicas,
                      duration_ms(a.retention_input), duration_ms(a.retention_output),
                      duration_ms(a.retention_internal), a.compression)
        if not a.dry_run and not a.kafka:
            raise ValueError("--kafka is required (or --dry-run)")
        security = load_kafka_security(a.kafka_config)
        client_config = {} if a.dry_run else kafka_python_kwargs(security)
    except ValueError as e:
        print(f"flowtracer-create-topics: {e}", file=sys.stderr)
        return 2
    if a.dry_run:
        print(json.dumps([{"name": t.name, "partitions": t.partitions, "configs": t.configs} for t in topics],
                         indent=1))
        return 0
    try:
        check_broker_certificate(security, a.kafka)
    except ValueError as e:
        print(f"flowtracer-create-topics: {e}", file=sys.stderr)
        return 2
    try:
        problems = apply(a.kafka, topics, a.replication, a.timeout, client_config)
    except RuntimeError as e:
        print(f"flowtracer-create-topics: {e}", file=sys.stderr)
        return 1
    for p in problems:
        print(f"flowtracer-create-topics: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
