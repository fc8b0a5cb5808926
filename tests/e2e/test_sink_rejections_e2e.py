"""A store that refuses batches for good does not crash-loop the processor: the whole pipeline
(sim -> collectors/agents -> Tansu -> ``flowtracer process``) writes to a scripted ``/api/v2/write``
that answers 401 (a revoked token) to its first requests and 204 afterwards. The refused points must
be in the dead-letter topic (one record per window of each refused batch, with the status and the store's answer), the
processor must stay up and keep writing later windows, and no point may be both refused and stored.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaConsumer

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.runtime.dead_letters import line_timestamp_ns
from flowtracer.testbed.write_server import REFUSAL, WriteServer

pytestmark = pytest.mark.slow

RUN_S = 25
REFUSED_REQUESTS = 3


def _dead_letters(bootstrap: str) -> list[analytics_pb2.DeadLetter]:
    consumer = KafkaConsumer(topics.DEAD_LETTER.name, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=4000, enable_auto_commit=False)
    out = [analytics_pb2.DeadLetter.FromString(m.value) for m in consumer]
    consumer.close()
    return out


def test_a_refused_batch_is_dead_lettered_and_the_processor_goes_on(tmp_path: Path) -> None:
    topo = tmp_path / "fabric8.yaml"
    topo.write_text(generate(FabricSpec(hosts=8, leaves=2, spines=2, name="ft8")).to_yaml())
    with WriteServer() as store:
        store.answer(*[401] * REFUSED_REQUESTS)
        pipeline = LocalPipeline(PipelineOptions(topology=topo, partitions=2, resolvers=("hash",),
                                                 influx_url=store.url), tmp_path / "run")
        pipeline.env["INFLUX_TOKEN"] = "e2e-not-a-secret"
        with pipeline:
            pipeline.wait(RUN_S)  # raises if any stage (the processor above all) exited
            pipeline.stop_stages()
            letters = _dead_letters(pipeline.bootstrap)
        stored = store.lines()
    refused = [d for d in letters if d.sink == "influx"]
    assert refused, "no refused points in the dead-letter topic"
    assert {d.http_status for d in refused} == {401}
    assert all(d.reason.endswith(f"HTTP 401: {REFUSAL.decode()}") and d.worker for d in refused)
    refused_lines = [line for d in refused for line in d.value.decode().split("\n")]
    assert all(line_timestamp_ns(line) == d.window_end_ns for d in refused for line in d.value.decode().split("\n"))
    per_window = [sum(d.window_end_ns == end for d in refused) for end in {d.window_end_ns for d in refused}]
    assert max(per_window) <= REFUSED_REQUESTS  # one record per window of each refused batch
    assert len(refused_lines) == len(set(refused_lines))  # nothing dead-lettered twice
    assert not set(refused_lines) & set(stored)  # refused, not also written (no replay rewrote them)
    assert max(map(line_timestamp_ns, stored)) > max(d.window_end_ns for d in refused)  # writing went on
