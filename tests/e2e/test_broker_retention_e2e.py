"""The embedded broker's retention in compressed time (issue 27): the whole pipeline on the object store with a
retention of seconds, for many retention periods.

The default demo keeps the broker's records in the object store and deletes what each topic's retention lets go
(``--broker-storage objects``, ``--broker-retention``): that is what bounds the embedded broker, whose memory
storage frees nothing. Here the retention is ``RETENTION_S`` and the sweeper runs every ``SWEEP_S``; over
``END_S`` (at least six retention periods) the test checks after every sweep that no batch object of a
delete-policy topic outlived its retention (but the newest of its partition, which Kafka keeps too), so what the
store holds is bounded by the retention whatever the rate; and that the processor, reading while objects are
deleted under it, still puts every flow on its true path in every window (the simulator's ground truth).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.demo.scoring import truth_path_bytes
from flowtracer.embedded.bucket_client import LAST_MODIFIED_RESOLUTION_S, BucketClient
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.sim.fabric.ground_truth import GroundTruth

pytestmark = pytest.mark.slow

S = 1_000_000_000
RETENTION_S = 4.0
SWEEP_S = 1.0
WARMUP_S = 8  # collectors and agents settle; windows before are not scored
END_S = 30  # windows are scored up to here: seven retention periods


def test_retention_bounds_the_store_and_the_outputs_stay_exact(tmp_path: Path) -> None:
    topo = tmp_path / "fabric16.yaml"
    topo.write_text(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="ft16", hash_seed=3)).to_yaml())
    options = PipelineOptions(topology=topo, partitions=2, resolvers=("hash",), broker_storage="objects",
                              broker_retention_s=RETENTION_S, sweep_interval_s=SWEEP_S)
    with LocalPipeline(options, tmp_path / "run") as pipeline:
        assert pipeline.sweeper is not None and pipeline.object_store is not None
        start_ns = pipeline.ready["start_ns"]
        bucket = BucketClient(pipeline.object_store.endpoint, pipeline.object_store.bucket)
        root = f"clusters/{pipeline.broker.cluster_id}/topics/"  # type: ignore[union-attr]
        timed = {name: p.retention_ms / 1000 for name, p in pipeline.sweeper.policies.items()
                 if p.retention_ms is not None}
        assert topics.FLOWS.name in timed and topics.PATH_LOADS.name in timed
        consumer = KafkaConsumer(topics.PATH_LOADS.name, bootstrap_servers=pipeline.bootstrap,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        loads: dict[int, dict[int, int]] = defaultdict(dict)
        checked_sweeps = 0
        seen_sweep = 0
        try:
            deadline = time.monotonic() + END_S + 90
            # until windows three past the last scored one arrive: partitions are finalized independently, so a
            # later window's first records do not prove an earlier one whole; three windows on, it is
            while not loads or max(loads) < start_ns + (END_S + 3) * S:
                assert time.monotonic() < deadline, f"no window ending {END_S} s in; got {len(loads)} windows"
                for batch in consumer.poll(timeout_ms=500).values():
                    for m in batch:
                        pl = analytics_pb2.PathLoad.FromString(m.value)
                        loads[pl.window_end_ns][pl.path_id] = pl.bytes
                pipeline.check()
                st = pipeline.sweeper.stats()
                if st.sweeps == seen_sweep or st.last_sweep_at_s is None:
                    continue
                seen_sweep = st.sweeps
                # What the last sweep judged: each partition's batches are deleted oldest first up to the first one
                # still within the retention at its time (as Kafka deletes from the log start; the store reports
                # whole seconds at worst), never the partition's newest. Nothing may be left before that point.
                for topic, keep_s in timed.items():
                    parts: dict[str, list[tuple[int, float]]] = defaultdict(list)
                    for o in bucket.objects(f"{root}{topic}/partitions/"):
                        if o.key.endswith(".batch"):
                            part, name = o.key.rsplit("/records/", 1)
                            parts[part].append((int(name.removesuffix(".batch")), o.last_modified_s))
                    cutoff_s = st.last_sweep_at_s - keep_s
                    for part, batches in parts.items():
                        batches.sort()
                        young = next((i for i, (_, lm) in enumerate(batches)
                                      if lm + LAST_MODIFIED_RESOLUTION_S >= cutoff_s), len(batches) - 1)
                        assert young == 0, (f"{part}: {young} batches left before the first one within {keep_s} s "
                                            f"of the sweep at {st.last_sweep_at_s:.1f}: {batches[:young]}")
                checked_sweeps += 1
        finally:
            consumer.close()
        state = pipeline.broker_state()
    assert checked_sweeps >= END_S / SWEEP_S / 3, checked_sweeps
    assert state["objects_deleted"] > state["objects_kept"] > 0, state
    assert state["sweep_errors"] == 0, state

    # The processor read on while its inputs were deleted behind it: every window exact, path by path.
    gt = GroundTruth.load(pipeline.ready["ground_truth"])
    ends = [e for e in sorted(loads) if start_ns + WARMUP_S * S <= e <= min(start_ns + END_S * S, gt.tick_ends[-1])]
    assert len(ends) >= END_S - WARMUP_S - 2, ends
    for end in ends:
        truth = truth_path_bytes(gt, end - S, end)
        right = sum(min(loads[end].get(p, 0), t) for p, t in truth.items()) / max(1, sum(truth.values()))
        assert right >= 0.999, f"window ending {(end - start_ns) / S:.0f} s: {right:.4f} of bytes on their true paths"
