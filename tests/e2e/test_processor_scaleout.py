"""Two processor workers give the same output as one, and killing one mid-run loses nothing.

Traffic is recorded once through the real pipeline (sim, collectors, agents into Tansu). Then the
same recording is processed by one worker, and again by a group of two workers, one of which is
SIGKILLed while the backlog is being processed. Every output record is keyed by (kind, entity,
window): the two-worker run must produce every key the single worker did, and only identical
values for it (replays rewrite the same records, they never change them), from the time every
source is streaming. Rolling FIM samples are only required to be present: see the known gap below.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from flowtracer.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.schemas import topics
from flowtracer.schemas.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2

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

        first, second = pipeline.start_processors(["hash"], workers=2, app_id="pair")
        two: dict[Key, set[bytes]] = defaultdict(set)
        deadline = time.monotonic() + 60
        while not two and time.monotonic() < deadline:  # kill at the first output: the backlog goes fast
            for k, v in _drain(consumer, quiet_s=0.2, until=time.monotonic() + 0.3).items():
                two[k] |= v
        assert _fabric_windows(two) < _fabric_windows(one), "the kill must happen mid-run"
        first.proc.kill()  # no clean shutdown: un-acked records must be replayed by the survivor
        for k, v in _drain(consumer, quiet_s=20, until=time.monotonic() + 150).items():
            two[k] |= v
        second.stop()
        consumer.close()

    # The recording's first windows hold partial instants (sources starting, baseline samples, an
    # instant split over two batches) whose outcome depends on the order topics are read in; from the
    # time every source streams, the output is a function of the records alone.
    steady = sorted({k[2] for k in one})[5]
    one = {k: v for k, v in one.items() if k[2] >= steady}
    missing = sorted(set(one) - set(two))
    assert not missing, f"{len(missing)} outputs of the single worker never came from the pair: {missing[:5]}"
    # Known gap (issue #6 stays open for it): the rolling-FIM history is saved to the Faust table
    # `stage-state`, but on Tansu a worker that takes a partition over does not get it back (Faust does
    # not recover that changelog), so rolling FIM samples whose 10 s window spans the failover are
    # computed from a shorter history. Every other output must be identical, and no FIM sample missing.
    changed = [k for k in one if two[k] != one[k] and k[0] != topics.FIM.name]
    if changed:
        cls, _ = OUTPUTS[changed[0][0]]
        example = [str(cls.FromString(v)) for v in sorted(one[changed[0]] | two[changed[0]])]
        windows = sorted({k[2] for k in changed})
        raise AssertionError(f"{len(changed)} outputs differ in windows {windows[:5]}..{windows[-1:]} of "
                             f"{sorted({k[2] for k in one})[:1]}: single {len(one[changed[0]])} vs pair "
                             f"{len(two[changed[0]])} values, e.g.\n" + "\n---\n".join(example))
