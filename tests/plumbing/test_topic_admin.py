"""The one topic plan (plumbing/topic_admin.py): what a stage's start-up, the processor's start-up and the
deployment create, and the refusal of a wrong partition count, against a Tansu broker of this module's own
(the contract's topic names are fixed, so the session broker's may already have other counts)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flowtracer.embedded.tansu import TansuBroker
from flowtracer.plumbing import topic_admin
from flowtracer.plumbing.topic_admin import TopicError, ensure_topics
from flowtracer.schemas.topics import EXCHANGE_TOPICS, INPUT_TOPICS, OUTPUT_TOPICS
from flowtracer.stream.runtime.app import fabric_changelog_topic, state_changelog_topic
from flowtracer.stream.runtime.config import ProcessorConfig

COMPACT = {"cleanup.policy": "compact"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    with TansuBroker(log_dir=tmp_path_factory.mktemp("tansu-topics")) as b:
        yield b


def test_plan_without_a_policy_asks_only_what_the_contract_needs() -> None:
    plan = {t.name: t for t in topic_admin.plan(6, ("proc",))}
    cfg = ProcessorConfig.model_construct(app_id="proc")
    wanted = {t.name: 6 for t in (*INPUT_TOPICS, *OUTPUT_TOPICS)}
    wanted |= {"flowtracer.qp-ends.v1": 1, "proc.flowtracer.attributions.v1": 6, "proc.flowtracer.group-fim.v1": 1,
               state_changelog_topic(cfg): 6, fabric_changelog_topic(cfg): 1}
    assert {n: t.partitions for n, t in plan.items()} == wanted
    assert {n for n, t in plan.items() if t.configs == COMPACT} == {
        "flowtracer.path-traces.v1", "flowtracer.qp-ends.v1", "flowtracer.incidents.v1", "flowtracer.ecmp-groups.v1",
        "flowtracer.flow-paths.v1",
        "proc-stage-state-changelog", "proc-fabric-state-changelog"}
    assert all(t.configs in ({}, COMPACT) for t in plan.values()), "no retention or replication without a policy"
    assert {n for n, t in plan.items() if t.strict} == {
        "flowtracer.counters.v1", "flowtracer.flows.v1", "flowtracer.path-traces.v1", "flowtracer.switch-congestion.v1",
        "proc.flowtracer.attributions.v1", "proc.flowtracer.group-fim.v1", "proc-stage-state-changelog",
        "proc-fabric-state-changelog"}


def test_plan_without_an_app_id_is_the_contract_topics_only() -> None:
    assert [t.name for t in topic_admin.plan(4)] == [t.name for t in (*INPUT_TOPICS, *OUTPUT_TOPICS, *EXCHANGE_TOPICS)]


def test_a_processor_start_up_creates_its_changelogs_and_a_wrong_count_fails(broker: TansuBroker) -> None:
    counts = ensure_topics(broker.bootstrap, 3, app_id="proc-a", timeout_s=20)
    assert counts == {t.name: t.partitions for t in topic_admin.plan(3, ("proc-a",))}
    assert ensure_topics(broker.bootstrap, 3, app_id="proc-a", timeout_s=20) == counts, "existing: left alone"
    broker.create_topics({"proc-b-fabric-state-changelog": 2})
    with pytest.raises(TopicError, match="proc-b-fabric-state-changelog has 2 partitions, needs 1"):
        ensure_topics(broker.bootstrap, 3, app_id="proc-b", timeout_s=20)
    with pytest.raises(TopicError, match=r"flowtracer\.counters\.v1 has 3 partitions, needs 4;.*--partitions"):
        ensure_topics(broker.bootstrap, 4, timeout_s=20)

