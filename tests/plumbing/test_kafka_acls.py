"""The per-stage Kafka ACL plan (plumbing/kafka_acls.py): each stage may write only its own topics."""

from __future__ import annotations

import pytest

from flowtracer.plumbing.kafka_acls import (
    AGENT_USER,
    COLLECTOR_USER,
    DESCRIBE,
    DIAGNOSE_USER,
    GROUP,
    PROCESSOR_USER,
    READ,
    TOPIC,
    WRITE,
    Acl,
    agent_users_per_host,
    kafka_acls_args,
    may,
    plan,
)
from flowtracer.schemas import topics

ACLS = plan(("flowtracer-processor",))


def writable(user: str) -> set[str]:
    names = {t.name for t in topics.ALL_TOPICS} | {"flowtracer-processor.flowtracer.attributions.v1"}
    return {n for n in names if may(ACLS, user, WRITE, TOPIC, n)}


def test_each_stage_writes_only_its_own_topics() -> None:
    assert writable(AGENT_USER) == {topics.FLOWS.name, topics.PATH_TRACES.name, topics.QP_ENDS.name}
    assert writable(COLLECTOR_USER) == {topics.COUNTERS.name, topics.SWITCH_CONGESTION.name}
    assert writable(DIAGNOSE_USER) == {topics.INCIDENTS.name}
    outputs = {t.name for t in topics.OUTPUT_TOPICS} - {topics.INCIDENTS.name}
    assert writable(PROCESSOR_USER) == outputs | {"flowtracer-processor.flowtracer.attributions.v1"}


def test_reads_and_groups() -> None:
    # the agent reads the peer exchange and the processor's word on when to re-trace, nothing else
    assert all(may(ACLS, AGENT_USER, READ, TOPIC, t.name)
               for t in (topics.QP_ENDS, topics.ECMP_GROUPS, topics.TRACE_REQUESTS))
    assert may(ACLS, PROCESSOR_USER, READ, TOPIC, topics.INCIDENTS.name)  # the dashboard's incident list
    assert not may(ACLS, PROCESSOR_USER, WRITE, TOPIC, topics.INCIDENTS.name)  # the diagnosis writes them
    assert not may(ACLS, AGENT_USER, READ, TOPIC, topics.FLOWS.name)  # no host reads another's flows
    assert all(may(ACLS, PROCESSOR_USER, READ, TOPIC, t.name) for t in topics.INPUT_TOPICS)
    assert may(ACLS, PROCESSOR_USER, READ, GROUP, "flowtracer-processor")
    assert may(ACLS, PROCESSOR_USER, WRITE, TOPIC, "flowtracer-processor-stage-state-changelog")
    assert not may(ACLS, PROCESSOR_USER, READ, GROUP, "other-app")
    assert not may(ACLS, AGENT_USER, READ, GROUP, "flowtracer-processor")
    # Metadata of every contract topic (the stages check at start that they exist), no data.
    assert all(may(ACLS, u, DESCRIBE, TOPIC, topics.COUNTERS.name) for u in (AGENT_USER, COLLECTOR_USER))
    assert may(ACLS, COLLECTOR_USER, DESCRIBE, TOPIC, "flowtracer-processor-stage-state-changelog")
    assert not may(ACLS, COLLECTOR_USER, READ, TOPIC, "flowtracer-processor-stage-state-changelog")


def test_per_host_agent_users() -> None:
    users = agent_users_per_host(["host02", "host01", "host01"])
    assert users == ["flowtracer-agent-host01", "flowtracer-agent-host02"]
    acls = plan(agent_users=users)
    assert may(acls, "flowtracer-agent-host01", WRITE, TOPIC, topics.FLOWS.name)
    assert not may(acls, AGENT_USER, WRITE, TOPIC, topics.FLOWS.name)
    assert not may(acls, "flowtracer-agent-host01", WRITE, TOPIC, topics.COUNTERS.name)


@pytest.mark.parametrize("acl", [a for a in ACLS if a.pattern == "PREFIXED"][:2])
def test_kafka_acls_arguments(acl: Acl) -> None:
    args = kafka_acls_args(acl)
    assert args[:3] == ["--add", "--allow-principal", f"User:{acl.user}"]
    assert args[-2:] == ["--resource-pattern-type", "prefixed"]
