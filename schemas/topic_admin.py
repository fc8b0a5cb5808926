"""Create the contract's topics explicitly, with the partition counts co-partitioning needs.

Every stage calls ``ensure_topics`` before producing: a broker that auto-creates unknown topics
(Tansu with 4 partitions, Kafka with num.partitions) would otherwise pick counts of its own and
silently break co-partitioning.
"""

from __future__ import annotations

import contextlib
import time

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from .topics import ALL_TOPICS, DEFAULT_PARTITIONS, GROUP_FIM, Topic

#: Topics that must have exactly the input partition count (co-partitioned with each other).
CO_PARTITIONED = ("flowtracer.counters.v1", "flowtracer.flows.v1", "flowtracer.attributions.v1")


class TopicError(RuntimeError):
    """The broker's topics cannot serve the contract (wrong partition counts, broker unreachable)."""


def wanted_partitions(topic: Topic, partitions: int) -> int:
    return 1 if topic is GROUP_FIM else partitions


def ensure_topics(bootstrap: str, partitions: int = DEFAULT_PARTITIONS, replication: int = 1,
                  timeout_s: float = 30.0, client_id: str = "flowtracer-admin") -> dict[str, int]:
    """Create missing contract topics and check existing ones; return name -> partition count."""
    deadline = time.monotonic() + timeout_s
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id,
                                 request_timeout_ms=int(timeout_s * 1000))
    except KafkaError as e:
        raise TopicError(f"cannot reach Kafka at {bootstrap}: {e}") from None
    try:
        existing = set(admin.list_topics())
        missing = [NewTopic(t.name, wanted_partitions(t, partitions), replication)
                   for t in ALL_TOPICS if t.name not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another stage created them first
                admin.create_topics(missing)
        counts: dict[str, int] = {}
        while True:
            meta = admin.describe_topics([t.name for t in ALL_TOPICS])
            counts = {m.get("name", m.get("topic")): len(m["partitions"]) for m in meta if not m.get("error_code")}
            if len(counts) == len(ALL_TOPICS) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    except KafkaError as e:
        raise TopicError(f"cannot create topics on {bootstrap}: {e}") from None
    finally:
        admin.close()
    absent = [t.name for t in ALL_TOPICS if t.name not in counts]
    if absent:
        raise TopicError(f"topics did not appear on {bootstrap}: {', '.join(absent)}")
    wrong = [f"{n} has {counts[n]}" for n in CO_PARTITIONED if counts[n] != partitions]
    if wrong:
        raise TopicError(f"co-partitioned topics must have {partitions} partitions: {'; '.join(wrong)} "
                         "(recreate them, or run with --partitions matching the existing topics)")
    return counts
