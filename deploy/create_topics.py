#!/usr/bin/env python3
"""Create flowtracer's Kafka topics before any stage starts: partition counts, replication, retention.

Every stage creates missing topics itself (``ensure_topics``; the processor's start-up adds its
internal topics and state changelogs), but with replication factor 1 and the broker's default
retention: fine for a laptop, wrong for a cluster. Run this once per cluster (the compose stack's
``kafka-init`` service, the Kubernetes Job ``flowtracer-topics``) and again after adding a processor
deployment (another ``--app-id``)::

    flowtracer-create-topics --kafka kafka:9092 --partitions 32 --replication 3 \\
        --app-id flowtracer-processor [--app-id flowtracer-infer] [--dry-run]

This is only argument parsing: names, partition counts, compaction and which counts are binding are
the one topic plan of ``flowtracer.plumbing.topic_admin`` (``plan``, the same one ``ensure_topics``
applies), to which the arguments add a ``ClusterPolicy`` (replication, min.insync.replicas,
retention, compression). Existing topics are left as they are, but a co-partitioned, group-FIM or
changelog topic with the wrong partition count is an error: co-partitioning cannot be repaired in
place (docs/operations.md, "Topics" and "Changing the partition count").

Exit codes: 0 every topic is there with the right count; 1 Kafka unreachable or a wrong count;
2 bad arguments or Kafka security settings. TLS/SASL: ``--kafka-config FILE`` (or
``FLOWTRACER_KAFKA_CONFIG`` and the ``FLOWTRACER_KAFKA_*`` variables), as every stage
(docs/operations.md, Security).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flowtracer.plumbing.durations import parse_duration
from flowtracer.plumbing.kafka_security import check_broker, kafka_python_kwargs, load_kafka_security
from flowtracer.plumbing.topic_admin import ClusterPolicy, TopicError, apply, plan
from flowtracer.schemas.topics import DEFAULT_PARTITIONS

DEFAULT_APP_ID = "flowtracer-processor"


def duration_ms(text: str) -> int:
    """``90m``, ``6h``, ``7d``, ``500ms`` -> milliseconds; ``-1`` = keep forever (the shared duration parser)."""
    if text == "-1":
        return -1
    return round(1000 * parse_duration(text, hint="e.g. 6h, 7d, 90m, or -1", units=("ms", "s", "m", "h", "d")))


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
        policy = ClusterPolicy(a.replication, a.min_insync_replicas, duration_ms(a.retention_input),
                               duration_ms(a.retention_output), duration_ms(a.retention_internal), a.compression)
        topics = plan(a.partitions, tuple(a.app_ids or (DEFAULT_APP_ID,)), policy)
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
        check_broker(security, a.kafka)
    except ValueError as e:
        print(f"flowtracer-create-topics: {e}", file=sys.stderr)
        return 2
    try:
        problems = apply(a.kafka, topics, a.replication, a.timeout, client_id="flowtracer-create-topics",
                         wait_for_broker=True, report=lambda line: print(line, file=sys.stderr),
                         client_config=client_config)
    except TopicError as e:
        print(f"flowtracer-create-topics: {e}", file=sys.stderr)
        return 1
    for p in problems:
        print(f"flowtracer-create-topics: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
