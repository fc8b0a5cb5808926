"""Benchmark: the failover, repeated at the embedded broker's short fetch wait: does it ever lose or change an output?

Scenario (``flowtracer.demo.failover``, as tests/e2e/test_processor_scaleout.py runs it once): a 16-host fabric
(4 leaves, 2 spines, 4 partitions) is recorded for ``--record-s`` seconds through the real pipeline (sim,
collectors, agents) into Tansu; one worker per resolver (hash, infer) processes the recording: the reference. Then,
``--repeats`` times, two workers per resolver (fresh app ids: a new group, new internal topics and changelogs) start
on the recording at ``--fetch-wait-ms``; per app id the first worker owning a partition whose stage state is saved
is SIGKILLed, and the survivor finishes. Reported per repeat and resolver:

- identical: the pair's outputs equal the single worker's over the steady windows (none missing, extra or changed);
- missing / extra / changed outputs, and windows lost (window ends with an output missing or changed);
- takeover (s): from the SIGKILL until the survivor created the stages of every partition the victim owned (its
  log): the rebalance after the session timeout (4 s), table recovery, the seek and the first record read;
- pre-seek: records the survivor's reader dropped as fetched before their partition's seek (faust_driver.py): how
  often the loss this benchmark guards against would have happened.

Raw limit, same broker and run: the takeover of a plain aiokafka consumer group (same session timeout and heartbeat)
when one of its two members (a subprocess) is SIGKILLed: until the survivor is assigned every partition (median of
``--raw-repeats``; the heartbeat's phase moves each by up to a second). The workers' median takeover is given as a
ratio to it.

    .venv/bin/python bench/bench_failover.py                  # 20 repeats
    .venv/bin/python bench/bench_failover.py --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import Any

from aiokafka import AIOKafkaConsumer
from kafka import KafkaConsumer

from flowtracer.demo import failover
from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.stream.runtime.config import TANSU_FETCH_WAIT_MS

RESOLVERS = ("hash", "infer")
SESSION_TIMEOUT_S = 4.0  # the processor's (ProcessorConfig.session_timeout_s)
PRE_SEEK = re.compile(r"dropped (\d+) records of \S+ fetched before its latest seek")


def _group_member(bootstrap: str, group: str) -> AIOKafkaConsumer:
    """A plain aiokafka member of ``group`` on the counters topic, with the workers' session timeout, heartbeat and
    fetch wait."""
    return AIOKafkaConsumer(topics.COUNTERS.name, bootstrap_servers=bootstrap, group_id=group,
                            session_timeout_ms=int(SESSION_TIMEOUT_S * 1000),
                            heartbeat_interval_ms=int(min(1.0, SESSION_TIMEOUT_S / 4) * 1000),
                            fetch_max_wait_ms=TANSU_FETCH_WAIT_MS, enable_auto_commit=False)


async def _raw_member(bootstrap: str, group: str) -> None:
    """The member the raw takeover kills (a subprocess): prints ``assigned`` once it holds partitions."""
    consumer = _group_member(bootstrap, group)
    await consumer.start()
    announced = False
    while True:
        await consumer.getmany(timeout_ms=200)
        if consumer.assignment() and not announced:
            print("assigned", flush=True)
            announced = True


async def raw_takeover_s(bootstrap: str, group: str, partitions: int) -> float:
    """Seconds from SIGKILLing one of two plain aiokafka members of ``group`` until the other holds every partition."""
    consumer = _group_member(bootstrap, group)
    await consumer.start()
    member = subprocess.Popen([sys.executable, __file__, "--raw-member", bootstrap, group], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert member.stdout is not None
        await asyncio.get_running_loop().run_in_executor(None, member.stdout.readline)  # it holds partitions
        while not 0 < len(consumer.assignment()) < partitions:  # the group is split between the two
            await consumer.getmany(timeout_ms=200)
        member.kill()
        killed = time.monotonic()
        while len(consumer.assignment()) < partitions:
            await consumer.getmany(timeout_ms=100)
        return time.monotonic() - killed
    finally:
        member.kill()
        member.wait()
        await consumer.stop()


def repeat(pipeline: LocalPipeline, consumer: KafkaConsumer, one: failover.Outputs, i: int, quiet_s: float
           ) -> list[dict[str, Any]]:
    """One failover per resolver (their own app ids, at once); a row per resolver. ``consumer`` reads the outputs
    on from where the previous run left them (not from a listed end: Tansu's ListOffsets(latest) is wrong)."""
    apps = {f"pair{i}-{r}": pipeline.start_processors([r], workers=2, app_id=f"pair{i}-{r}") for r in RESOLVERS}
    two: failover.Outputs = defaultdict(set)
    try:
        killed = failover.kill_first_to_save(pipeline.bootstrap, apps, two, consumer, until=time.monotonic() + 120)
        failover.drain(consumer, quiet_s=quiet_s, until=time.monotonic() + 300, into=two)
    finally:
        for workers in apps.values():
            for w in workers:
                if w.alive():
                    w.stop()
    failover.drain(consumer, quiet_s=2.0, until=time.monotonic() + 30, into=two)  # what the stops flushed
    rows = []
    for app, kill in killed.items():
        resolver = failover.resolver_of(kill.victim)
        survivor = next(w for w in apps[app] if w is not kill.victim)
        log = survivor.log_path.read_text(errors="replace")
        diff = failover.compare(one, two, {resolver})
        takeover = failover.takeover_s(log, kill.owned, kill.at_s)
        rows.append({"repeat": i, "resolver": resolver, "identical": diff.identical, "missing": len(diff.missing),
                     "extra": len(diff.extra), "changed": len(diff.changed), "windows_lost": len(diff.windows_lost()),
                     "takeover_s": None if takeover is None else round(takeover, 2),
                     "victim_partitions": sorted(kill.owned),
                     "pre_seek_dropped": sum(int(n) for n in PRE_SEEK.findall(log))})
    return rows


def main() -> int:
    if sys.argv[1:2] == ["--raw-member"]:
        asyncio.run(_raw_member(sys.argv[2], sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--record-s", type=float, default=20.0, help="seconds of traffic recorded")
    ap.add_argument("--fetch-wait-ms", type=int, default=TANSU_FETCH_WAIT_MS)
    ap.add_argument("--quiet-s", type=float, default=20.0, help="a run is over after this long without new outputs")
    ap.add_argument("--raw-repeats", type=int, default=5, help="takeovers of the plain aiokafka group")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run directory (logs) here")
    a = ap.parse_args()
    work = Path(a.keep or tempfile.mkdtemp(prefix="bench-failover-"))
    topo = work / "fabric16.yaml"
    work.mkdir(parents=True, exist_ok=True)
    topo.write_text(generate(FabricSpec(hosts=16, leaves=4, spines=2)).to_yaml())
    options = PipelineOptions(topology=topo, partitions=4, resolvers=(),
                              processor_args=("--fetch-wait-ms", str(a.fetch_wait_ms)))
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    with LocalPipeline(options, work / "run") as pipeline:
        pipeline.wait(a.record_s)
        pipeline.stop_stages()  # the recording stays in the broker
        raws = [asyncio.run(raw_takeover_s(pipeline.bootstrap, f"bench-raw-{i}", options.partitions))
                for i in range(a.raw_repeats)]
        raw = median(raws)
        print(f"raw aiokafka group takeovers: {', '.join(f'{r:.2f}' for r in raws)} s", file=sys.stderr)
        consumer = failover.output_reader(pipeline.bootstrap)
        singles = [w for r in RESOLVERS for w in pipeline.start_processors([r], workers=1, app_id=f"single-{r}")]
        one = failover.drain(consumer, quiet_s=a.quiet_s, until=time.monotonic() + 300)
        for w in singles:
            w.stop()
        failover.drain(consumer, quiet_s=2.0, until=time.monotonic() + 30, into=one)
        for i in range(1, a.repeats + 1):
            t0 = time.monotonic()
            for row in repeat(pipeline, consumer, one, i, a.quiet_s):
                row["repeat_s"] = round(time.monotonic() - t0, 1)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
        consumer.close()
    takeovers = [r["takeover_s"] for r in rows if r["takeover_s"] is not None]
    summary = {
        "repeats": a.repeats, "fetch_wait_ms": a.fetch_wait_ms, "record_s": a.record_s,
        "identical": sum(r["identical"] for r in rows), "runs": len(rows),
        "windows_lost": sum(r["windows_lost"] for r in rows),
        "runs_with_pre_seek_batches": sum(1 for r in rows if r["pre_seek_dropped"]),
        "raw_takeover_s_median": round(raw, 2), "raw_takeovers_s": [round(r, 2) for r in raws],
        "takeover_s_median": round(median(takeovers), 2) if takeovers else None,
        "takeover_s_max": max(takeovers, default=None),
        "takeover_vs_raw_median": round(median(takeovers) / raw, 2) if takeovers and raw else None,
        "seconds": round(time.monotonic() - started), "loadavg": os.getloadavg(), "rows": rows,
    }
    print(json.dumps(summary, indent=1))
    return 0 if summary["identical"] == summary["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
