"""Two processor workers give the same output as one, and killing one mid-run loses nothing.

Traffic is recorded once through the real pipeline (sim, collectors, agents into Tansu). Then the
same recording is processed by one worker, and again by a group of two workers, one of which is
SIGKILLed while the backlog is being processed. Every output record is keyed by (kind, entity,
window): the two-worker run must produce every key the single worker did, and only identical
values for it (replays rewrite the same records, they never change them), from the time every
source is streaming. Rolling FIM samples too: the survivor continues from the stage state (last
published window, rolling history) the victim saved in the Faust tables.
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions, Stage
from flowtracer.schemas import topics
from flowtracer.schemas.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.runtime.app import state_changelog_topic
from flowtracer.stream.runtime.config import ProcessorConfig

pytestmark = pytest.mark.slow

RECORD_S = 20
OUTPUTS = {topics.LINK_LOADS.name: (analytics_pb2.LinkLoad, "link"),
           topics.PATH_LOADS.name: (analytics_pb2.PathLoad, "path_id"),
           topics.FIM.name: (analytics_pb2.FimSample, "group"),
           topics.COLLISIONS.name: (analytics_pb2.Collision, "group")}

Key = tuple[str, str, int, int]  # topic, entity, window end, basis


def _key(topic: str, msg: object) -> Key:
    _, field = OUTPUTS[topic]
    return (topic, getattr(msg, field), msg.window_end_ns, getattr(msg, "basis", 0))  # type: ignore[attr-defined]


def _drain(consumer: KafkaConsumer, quiet_s: float, until: float) -> dict[Key, set[bytes]]:
    """Read until nothing new came for ``quiet_s`` (or the deadline)."""
    got: dict[Key, set[bytes]] = defaultdict(set)
    last_new = time.monotonic()
    while time.monotonic() - last_new < quiet_s and time.monotonic() < until:
        for records in consumer.poll(timeout_ms=500).values():
            for m in records:
                cls, _ = OUTPUTS[m.topic]
                got[_key(m.topic, cls.FromString(m.value))].add(m.value)
                last_new = time.monotonic()
    return got


def _fabric_windows(got: dict[Key, set[bytes]]) -> int:
    return sum(1 for k in got if k[0] == topics.FIM.name and k[1] == "fabric")


def _owned(worker: Stage) -> set[int]:
    """Partitions the worker has created stages for (its log says so)."""
    return {int(p) for p in re.findall(r"(?:flows|links) stage of partition (\d+)", worker.log_path.read_text())}


def _first_to_save(bootstrap: str, workers: list[Stage], got: dict[Key, set[bytes]], outputs: KafkaConsumer,
                   until: float) -> Stage:
    """The first worker owning a partition whose stage state is in the changelog (collecting outputs meanwhile)."""
    changelog = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    topic = state_changelog_topic(ProcessorConfig.model_construct(app_id="pair"))
    saved: set[int] = set()
    try:
        while time.monotonic() < until:
            for k, v in _drain(outputs, quiet_s=0.1, until=time.monotonic() + 0.2).items():
                got[k] |= v
            if not changelog.assignment() and changelog.partitions_for_topic(topic):
                tps = [TopicPartition(topic, p) for p in changelog.partitions_for_topic(topic)]
                changelog.assign(tps)
                changelog.seek_to_beginning(*tps)
            for records in changelog.poll(timeout_ms=100).values():
                saved |= {r.partition for r in records}
            for w in workers:
                if _owned(w) & saved:
                    return w
    finally:
        changelog.close()
    raise AssertionError(f"no worker saved stage state in time: saved {saved}, owned {[_owned(w) for w in workers]}")


def test_two_workers_and_a_failover_give_the_single_worker_output(tmp_path: Path) -> None:
    topo = tmp_path / "fabric16.yaml"
    topo.write_text(generate(FabricSpec(hosts=16, leaves=4, spines=2)).to_yaml())
    pipeline = LocalPipeline(PipelineOptions(topology=topo, partitions=4, resolvers=()), tmp_path / "run")
    with pipeline:
        pipeline.wait(RECORD_S)
        pipeline.stop_stages()  # the recording stays in the broker
        # Manual assignment (no group join to wait for); the consumer keeps its position between runs.
        consumer = KafkaConsumer(bootstrap_servers=pipeline.bootstrap, enable_auto_commit=False)
        tps = [TopicPartition(t, p) for t in OUTPUTS for p in consumer.partitions_for_topic(t)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)

        [single] = pipeline.start_processors(["hash"], workers=1, app_id="single")
        one = _drain(consumer, quiet_s=15, until=time.monotonic() + 120)
        single.stop()
        assert _fabric_windows(one) >= RECORD_S - 8, "the single worker processed the recording"

        workers = pipeline.start_processors(["hash"], workers=2, app_id="pair")
        two: dict[Key, set[bytes]] = defaultdict(set)
        # Kill a worker as soon as one of the partitions it owns has saved stage state (it has published
        # a window there): the backlog goes fast, and the survivor must continue from that state.
        victim = _first_to_save(pipeline.bootstrap, workers, two, consumer, until=time.monotonic() + 60)
        survivor = workers[1 - workers.index(victim)]
        assert _fabric_windows(two) < _fabric_windows(one), "the kill must happen mid-run"
        victim.proc.kill()  # no clean shutdown: un-acked records must be replayed by the survivor
        for k, v in _drain(consumer, quiet_s=20, until=time.monotonic() + 150).items():
            two[k] |= v
        survivor.stop()
        consumer.close()
        taken_over = survivor.log_path.read_text(errors="replace")
    assert "restored, continuing after window end" in taken_over, "the survivor restored the victim's stages"

    # The recording's first windows hold partial instants (sources starting, baseline samples, an
    # instant split over two batches) whose outcome depends on the order topics are read in; from the
    # time every source streams, the output is a function of the records alone.
    steady = sorted({k[2] for k in one})[5]
    one = {k: v for k, v in one.items() if k[2] >= steady}
    missing = sorted(set(one) - set(two))
    by_window = Counter((k[0].split(".")[1], k[2]) for k in missing)
    assert not missing, (f"{len(missing)} outputs of the single worker never came from the pair: {missing[:3]}; "
                         f"per (topic, window end): {sorted(by_window.items())}")
    changed = [k for k in one if two[k] != one[k]]
    if changed:
        cls, _ = OUTPUTS[changed[0][0]]
        windows = sorted({k[2] for k in changed})
        raise AssertionError(f"{len(changed)} outputs differ in windows {windows[:5]}..{windows[-1:]} of "
                             f"{sorted({k[2] for k in one})[:1]}, e.g.\nsingle worker:\n"
                             + "\n---\n".join(str(cls.FromString(v)) for v in sorted(one[changed[0]]))
                             + "\npair:\n" + "\n---\n".join(str(cls.FromString(v)) for v in sorted(two[changed[0]])))
