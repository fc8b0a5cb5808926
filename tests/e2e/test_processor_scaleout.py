"""Two processor workers give the same output as one, and killing one mid-run loses nothing.

Traffic is recorded once through the real pipeline (sim, collectors, agents into Tansu). Then the
same recording is processed by one worker, and again by a group of two workers, one of which is
SIGKILLed while the backlog is being processed. Every output record is keyed by (kind, entity,
window): the two-worker run must produce every key the single worker did, and only identical
values for it (replays rewrite the same records, they never change them), from the time every
source is streaming (flowtracer.demo.failover). Rolling FIM samples too: the survivor continues from the stage
state (last published window, rolling history, resolver knowledge) the victim saved in the Faust tables.

Both resolvers run side by side (their own app ids; outputs are told apart by their ``resolver``
field): ``hash``, whose state is the stages' alone, and ``infer``, whose learned assignments and
window history must also survive the kill for the survivor to give the single worker's output.

The workers read at the embedded broker's short fetch wait (100 ms). There a survivor's reader often handed over,
after the takeover's seek to the committed offsets, a batch fetched before it: Faust counted the offsets up to it
as acked and dropped them when they came again, and windows lost records (3 of 4 runs before the driver dropped
such batches, stream/runtime/faust_driver.py). bench/bench_failover.py repeats this scenario.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from flowtracer.demo import failover
from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.runtime.config import TANSU_FETCH_WAIT_MS

pytestmark = pytest.mark.slow

RECORD_S = 20
RESOLVERS = ("hash", "infer")


def test_two_workers_and_a_failover_give_the_single_worker_output(tmp_path: Path) -> None:
    topo = tmp_path / "fabric16.yaml"
    topo.write_text(generate(FabricSpec(hosts=16, leaves=4, spines=2)).to_yaml())
    pipeline = LocalPipeline(PipelineOptions(topology=topo, partitions=4, resolvers=(),
                                             processor_args=("--fetch-wait-ms", str(TANSU_FETCH_WAIT_MS))),
                             tmp_path / "run")
    with pipeline:
        pipeline.wait(RECORD_S)
        pipeline.stop_stages()  # the recording stays in the broker
        consumer = failover.output_reader(pipeline.bootstrap)

        singles = [w for r in RESOLVERS for w in pipeline.start_processors([r], workers=1, app_id=f"single-{r}")]
        one = failover.drain(consumer, quiet_s=15, until=time.monotonic() + 150)
        for w in singles:
            w.stop()
        for r in RESOLVERS:
            assert failover.fabric_windows(one, r) >= RECORD_S - 8, f"the single {r} worker processed the recording"

        apps = {f"pair-{r}": pipeline.start_processors([r], workers=2, app_id=f"pair-{r}") for r in RESOLVERS}
        two: failover.Outputs = defaultdict(set)
        # Kill a worker as soon as one of the partitions it owns has saved stage state (it has published
        # a window there): the backlog goes fast, and the survivor must continue from that state.
        killed = failover.kill_first_to_save(pipeline.bootstrap, apps, two, consumer, until=time.monotonic() + 60)
        for app, kill in killed.items():
            assert kill.windows_done < failover.fabric_windows(one, failover.resolver_of(kill.victim)), \
                f"{app}: the kill must happen mid-run"
        failover.drain(consumer, quiet_s=20, until=time.monotonic() + 150, into=two)
        survivors = [w for app, ws in apps.items() for w in ws if w is not killed[app].victim]
        for w in survivors:
            w.stop()
        consumer.close()
    for w in survivors:
        assert "restored, continuing after window end" in w.log_path.read_text(errors="replace"), \
            f"the {failover.resolver_of(w)} survivor restored the victim's stages"

    assert {k[4] for k in failover.steady(one)} >= set(RESOLVERS), "both resolvers' outputs are compared"
    diff = failover.compare(one, two)
    by_window = Counter((k[0].split(".")[1], k[2]) for k in diff.missing)
    assert not diff.missing, (f"{len(diff.missing)} outputs of the single worker never came from the pair: "
                              f"{diff.missing[:3]}; per (topic, window end): {sorted(by_window.items())}")
    if diff.changed:
        first = diff.changed[0]
        cls, _ = failover.OUTPUTS[first[0]]
        windows = diff.windows_lost()
        raise AssertionError(f"{len(diff.changed)} outputs differ in windows {windows[:5]}..{windows[-1:]} of "
                             f"{sorted({k[2] for k in one})[:1]}, e.g.\nsingle worker:\n"
                             + "\n---\n".join(str(cls.FromString(v)) for v in sorted(one[first]))
                             + "\npair:\n" + "\n---\n".join(str(cls.FromString(v)) for v in sorted(two[first])))
