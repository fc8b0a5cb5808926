"""Where a window's end-to-end latency goes, stage by stage, from the Kafka record timestamps of a pipeline run.

Every stage stamps what it produces (Kafka CreateTime, ms), and the input records carry their own stamps, so one
run's topics give, per window ending at E (ns):

- ``sampled``: the newest of the switches' first counter samples at or after E (CounterBatch ``timestamp_ns``):
  how long until every switch has sampled past the window's end (sampling phase, not a delay of ours);
- ``counters_in_kafka``: the newest Kafka stamp of those batches (gNMI transit + the collector's batching);
- ``flows_read``: the newest ``received_ns`` of the agents' FlowBatches of the window (the agent's wall clock when it
  read the host: the simulator's view writer and the agent's notice of the last host);
- ``flows_in_kafka``: the newest Kafka stamp of the agents' FlowBatches of the window;
- ``attributions``: the newest AttributionBatch of the window (the flows stage released it);
- ``link_loads``: the newest LinkLoad of the window (the links stage released it: what the demo's and
  ``make bench``'s "latency" is);
- ``fabric``: the fabric FimSample of the window (the fabric stage, last of the chain).

All as seconds after E; ``breakdown`` gives p50/p99 of each over the windows where every one exists, and of the
steps between them. Run it on its own (``.venv/bin/python bench/stage_latency.py --hosts 16``) or through
``bench/run_all.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

S = 1_000_000_000
MS = 1_000_000
STAGES = ("sampled", "counters_in_kafka", "flows_read", "flows_in_kafka", "attributions", "link_loads", "fabric")
#: The steps between consecutive marks (what each stage adds), as (name, from mark, to mark).
STEPS = (("switch sampling phase", None, "sampled"),
         ("gNMI + collector to Kafka", "sampled", "counters_in_kafka"),
         ("host views + agents' reads (window end -> last host read)", None, "flows_read"),
         ("agents' windows to Kafka (last host read -> last FlowBatch)", "flows_read", "flows_in_kafka"),
         ("flows stage (last FlowBatch -> attributions)", "flows_in_kafka", "attributions"),
         ("links stage (last input -> LinkLoads)", "inputs", "link_loads"),
         ("fabric stage (LinkLoads -> fabric FIM)", "link_loads", "fabric"))


def marks(records: Iterable[tuple[str, Any, int]], switches: int, hosts: int) -> dict[int, dict[str, float]]:
    """Per window end (ns): each mark in seconds after it, from (kind, decoded record, Kafka ms) triples with kind
    in counters, flows, attributions, link_loads, fim. A window missing a switch's or a host's record gets no
    ``sampled``/``flows_read``/``flows_in_kafka`` mark (it is left out of the breakdown)."""
    samples: dict[str, list[tuple[int, int]]] = defaultdict(list)  # switch -> (sample ns, kafka ms)
    flows: dict[int, list[int]] = defaultdict(list)
    reads: dict[int, list[int]] = defaultdict(list)  # window end -> the agents' received_ns (ns)
    newest: dict[str, dict[int, int]] = {"attributions": {}, "link_loads": {}, "fabric": {}}
    for kind, rec, ts_ms in records:
        if kind == "counters":
            samples[rec.switch].append((rec.timestamp_ns, ts_ms))
        elif kind == "flows":
            flows[rec.window_end_ns].append(ts_ms)
            reads[rec.window_end_ns].append(rec.received_ns)
        elif kind == "fim":
            if rec.group == "fabric":
                newest["fabric"][rec.window_end_ns] = max(ts_ms, newest["fabric"].get(rec.window_end_ns, 0))
        elif kind in newest:
            d = newest[kind]
            d[rec.window_end_ns] = max(ts_ms, d.get(rec.window_end_ns, 0))
    for s in samples.values():
        s.sort()
    out: dict[int, dict[str, float]] = {}
    for end in sorted(newest["link_loads"]):
        m: dict[str, float] = {}
        firsts = [next((x for x in s if x[0] >= end), None) for s in samples.values()]
        if len(samples) == switches and all(f is not None for f in firsts):
            m["sampled"] = (max(f[0] for f in firsts if f) - end) / S
            m["counters_in_kafka"] = (max(f[1] for f in firsts if f) * MS - end) / S
        if len(flows.get(end, ())) >= hosts:
            m["flows_read"] = (max(reads[end]) - end) / S
            m["flows_in_kafka"] = (max(flows[end]) * MS - end) / S
        for k in ("attributions", "link_loads", "fabric"):
            if end in newest[k]:
                m[k] = (newest[k][end] * MS - end) / S
        out[end] = m
    return out


def _p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3)


def breakdown(per_window: dict[int, dict[str, float]], from_end_ns: int = 0) -> dict[str, Any]:
    """p50/p99 (s) of each mark and of each step over the windows that have every mark, ending at or after
    ``from_end_ns``."""
    full = [m for end, m in per_window.items() if end >= from_end_ns and all(k in m for k in STAGES)]
    if not full:
        return {"windows": 0}
    out: dict[str, Any] = {"windows": len(full), "marks": {}, "steps": {}}
    for k in STAGES:
        xs = [m[k] for m in full]
        out["marks"][k] = {"p50_s": round(statistics.median(xs), 3), "p99_s": _p(xs, 0.99)}
    for name, a, b in STEPS:
        if a == "inputs":
            xs = [m[b] - max(m["attributions"], m["counters_in_kafka"]) for m in full]
        else:
            xs = [m[b] - (m[a] if a else 0.0) for m in full]
        out["steps"][name] = {"p50_s": round(statistics.median(xs), 3), "p99_s": _p(xs, 0.99)}
    return out


def read_run(bootstrap: str, app_id: str) -> list[tuple[str, Any, int]]:
    """Every record of the topics ``marks`` reads, decoded, with its Kafka timestamp (ms)."""
    from kafka import KafkaConsumer, TopicPartition

    from flowtracer.schemas import topics
    from flowtracer.schemas.v1 import analytics_pb2, counters_pb2, flows_pb2, internal_pb2

    kinds = {topics.COUNTERS.name: ("counters", counters_pb2.CounterBatch),
             topics.FLOWS.name: ("flows", flows_pb2.FlowBatch),
             topics.internal_name(app_id, topics.ATTRIBUTIONS): ("attributions", internal_pb2.AttributionBatch),
             topics.LINK_LOADS.name: ("link_loads", analytics_pb2.LinkLoad),
             topics.FIM.name: ("fim", analytics_pb2.FimSample)}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=3000)
    try:
        parts = [TopicPartition(t, q) for t in kinds for q in sorted(consumer.partitions_for_topic(t) or ())]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        out = []
        for m in consumer:
            kind, cls = kinds[m.topic]
            out.append((kind, cls.FromString(m.value), m.timestamp))
    finally:
        consumer.close()
    return out


def run(hosts: int, leaves: int, spines: int, seconds: float, work: Path) -> dict[str, Any]:
    """The whole pipeline (as bench/run_all.py runs it) for ``seconds``; the breakdown after a 12 s warm-up."""
    from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
    from flowtracer.fabric.topology_generate import FabricSpec, generate

    topo = generate(FabricSpec(hosts=hosts, leaves=leaves, spines=spines, name=f"bench-{hosts}"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "fabric.yaml").write_text(topo.to_yaml())
    opts = PipelineOptions(topology=work / "fabric.yaml", workload="ring-allreduce", sim_args=("--no-ground-truth",),
                           partitions=4, line_protocol_file=work / "out.lp", log_level="warning")
    with LocalPipeline(opts, work / "run") as p:
        started = time.time_ns()
        p.wait(seconds)
        p.stop_stages()
        records = read_run(p.bootstrap, "flowtracer-hash")
    per = marks(records, len(topo.switches), len(topo.hosts))
    return {"hosts": hosts, "leaves": leaves, "spines": spines, "seconds": seconds,
            **breakdown(per, started + 12 * S)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--leaves", type=int, default=4)
    ap.add_argument("--spines", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=40.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ft-latency-") as d:
        res = run(a.hosts, a.leaves, a.spines, a.seconds, Path(d))
    json.dump(res, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
