"""Benchmark: how fast 1, 2 (and 4) processor workers of one app id catch up on a recorded backlog.

Scenario: the input topics of a rail-optimized fabric (default 512 hosts x 8 NICs on 8 rails = 4,096 NICs,
128 leaves, 32 spines; ``--qps`` RC QPs per NIC) are recorded once, synthetically, with
``bench_processor``'s record builders (the agents' FlowBatches, one per host and leaf, and the collectors'
CounterBatches, one per switch, per 1 s window: exact deltas, the leaves' next hops), stamped in the past
(ending a few seconds before the recording). The simulator is not used: at 4,096 NICs it runs far
behind real time on this 2-core machine (docs/benchmarks.md), and the builders give the same records in
seconds. For each worker count the benchmark then

1. starts a Tansu broker (``flowtracer.embedded.tansu``), creates the topic plan (``ensure_topics`` with
   the run's app id) and produces the recording into it (aiokafka, each record to its key's partition);
2. measures the raw library limit on the same topics, same broker, same moment: one aiokafka consumer
   reading every input partition from the beginning (``getmany``), messages/s and its CPU;
3. starts N ``flowtracer process --tansu`` workers with the same app id (no sink: Kafka outputs only)
   and polls their ``/metrics`` until every partition's links stage and the fabric stage have finalized
   every window; the time from the workers' start to that point is the catch-up time (it includes
   Faust's start-up and the group join); the steady rate is taken between 10% and 90% of the partition
   windows finalized;
4. stops the workers (SIGTERM), reads every output topic back and stops the broker.

Reported per worker count: catch-up time, windows/s (fabric windows finalized per second of wall time:
the real-time factor at a 1 s hop), per worker, input messages/s against the aiokafka limit, CPU of each
worker and of the broker, and the load average before and after (the machine is shared). The outputs of
every run are compared with those of one worker: the same set of values per (topic, key, window end).
Scaling efficiency = rate(N) / (N x rate(1)). The workers' counts of windows released incomplete and of late
records are reported too: on a backlog they say whether the rates compare the same work (docs/benchmarks.md).

    .venv/bin/python bench/bench_catchup.py                       # 512 x 8, 1 and 2 workers
    .venv/bin/python bench/bench_catchup.py --workers 1 2 4 --windows 20
    .venv/bin/python bench/bench_catchup.py --hosts 64 --leaves 16 --spines 4 --windows 6   # quick check
    .venv/bin/python bench/bench_catchup.py --profile 1           # py-spy (else cProfile) on worker 0
    .venv/bin/python bench/bench_catchup.py --grace 60            # wait longer for a window's records

py-spy is not a dependency: ``.venv/bin/pip install py-spy`` to profile with it (sampling, 20 Hz or
``--profile-hz``); without it ``--profile`` runs the worker under cProfile, which slows it several times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from bench_processor import S, build_qps, build_window
from google.protobuf.json_format import MessageToDict

from flowtracer.embedded.managed_process import free_port
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.plumbing.topic_admin import ensure_topics
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, flows_pb2, traces_pb2

FLOWTRACER = Path(sys.executable).parent / "flowtracer"
Record = tuple[str, int, bytes, bytes]
"""(topic, partition, key, value) of one recorded input message."""


@dataclass
class Recording:
    """The recorded input topics: messages in production order (window by window)."""

    records: list[Record]
    windows: int
    first_end_ns: int
    last_end_ns: int
    topology_yaml: str
    nics: int
    switches: int
    flows_per_window: int
    build_s: float
    per_partition: dict[int, int] = field(default_factory=dict)

    @property
    def mib(self) -> float:
        return sum(len(v) for *_, v in self.records) / 2**20


def record(spec: FabricSpec, qps: int, windows: int, partitions: int, seed: int, start_s: int | None = None
           ) -> Recording:
    """Build ``windows`` 1 s windows of the fabric's input records, the last ending 5 s before now (or the first
    starting at ``start_s``, Unix seconds: two runs of the same recording give comparable outputs)."""
    started = time.process_time()
    rng = random.Random(seed)
    fabric = Fabric(generate(spec))
    flows = build_qps(fabric, qps, rng)
    t0 = start_s * S if start_s is not None else (time.time_ns() // S - windows - 5) * S
    records: list[Record] = []
    per_partition: dict[int, int] = defaultdict(int)
    for k in range(1, windows + 1):
        w = build_window(fabric, flows, k, rng, t0=t0)
        for topic, key, value in w.records:
            p = topics.partition_for(key, partitions)
            per_partition[p] += 1
            records.append((topic, p, topics.key(key), value))
    return Recording(records, windows, t0 + S, t0 + windows * S, fabric.topology.to_yaml(), len(fabric.nics),
                     len(fabric.switch_names), len(flows), time.process_time() - started, dict(per_partition))


async def produce(bootstrap: str, rec: Recording) -> float:
    """Produce the recording; return the seconds it took."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=1 << 20,
                                max_request_size=16 << 20, enable_idempotence=False, acks=1)
    await producer.start()
    started = time.monotonic()
    try:
        futures = [await producer.send(t, value=v, key=k, partition=p) for t, p, k, v in rec.records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return time.monotonic() - started


async def consume_all(bootstrap: str, names: list[str], partitions: dict[str, int], expect: int | None,
                      idle_s: float = 3.0) -> tuple[list[tuple[str, bytes | None, bytes]], float, float]:
    """Read the topics from the beginning (manual assignment, no group): until ``expect`` messages, else
    until ``idle_s`` without any (Tansu's end offsets are wrong). Returns the (topic, key, value) read, the
    wall seconds and the CPU seconds of this process it took (to the last message)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                auto_offset_reset="earliest", max_partition_fetch_bytes=8 << 20,
                                fetch_max_bytes=64 << 20)
    await consumer.start()
    out: list[tuple[str, bytes | None, bytes]] = []
    try:
        tps = [TopicPartition(t, p) for t in names for p in range(partitions[t])]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        started, cpu0 = time.monotonic(), time.process_time()
        last, last_cpu, quiet_since = started, cpu0, time.monotonic()
        while (expect is None or len(out) < expect) and time.monotonic() - quiet_since < idle_s:
            got = await consumer.getmany(timeout_ms=200, max_records=10_000)
            for msgs in got.values():
                out.extend((m.topic, m.key, m.value) for m in msgs)
            if got:
                last, last_cpu, quiet_since = time.monotonic(), time.process_time(), time.monotonic()
    finally:
        await consumer.stop()
    return out, last - started, last_cpu - cpu0


def raw_consume(bootstrap: str, rec: Recording, partitions: int) -> dict[str, Any]:
    """The library limit: aiokafka reading every recorded message once."""
    names = sorted({t for t, *_ in rec.records})
    got, wall, cpu = asyncio.run(consume_all(bootstrap, names, dict.fromkeys(names, partitions), len(rec.records)))
    if len(got) != len(rec.records):
        raise SystemExit(f"raw consumer read {len(got)} of {len(rec.records)} recorded messages")
    return {"messages": len(got), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "msgs_per_s": round(len(got) / wall), "msgs_per_cpu_s": round(len(got) / cpu)}


def metrics(port: int) -> dict[str, float]:
    """The worker's Prometheus samples we poll (name{labels} -> value); empty while it is not up."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("flowtracer_processor_") and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children) from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    tick = os.sysconf("SC_CLK_TCK")
    return sum(int(x) for x in fields[11:15]) / tick


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path


def start_workers(n: int, bootstrap: str, topology: Path, partitions: int, app_id: str, tmp: Path,
                  profile: str | None, grace_s: float) -> list[Worker]:
    out = []
    for i in range(n):
        port = free_port()
        log = tmp / f"worker{i}.log"
        argv = [str(FLOWTRACER), "process", "--topology", str(topology), "--kafka", bootstrap, "--tansu",
                "--partitions", str(partitions), "--app-id", app_id, "--metrics-port", str(port),
                "--grace", str(grace_s)]
        if i == 0 and profile == "cprofile":
            argv = [sys.executable, "-m", "cProfile", "-o", str(tmp / "worker0.prof"), str(FLOWTRACER), *argv[1:]]
        cwd = tmp / f"worker{i}"  # its own Faust data dir (.flowtracer-processor)
        cwd.mkdir()
        out.append(Worker(subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=cwd,
                                           start_new_session=True), port, log))
    return out


def stop_workers(workers: list[Worker], timeout_s: float = 20.0) -> None:
    for w in workers:
        if w.proc.poll() is None:
            w.proc.send_signal(signal.SIGTERM)
    for w in workers:
        try:
            w.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            w.proc.kill()
            w.proc.wait()


def input_records(sample: dict[str, float]) -> int:
    """Input records (flows and counters) a worker has read."""
    return int(sum(sample.get(f'flowtracer_processor_records_total{{topic="{t.name}"}}', 0)
                   for t in (topics.FLOWS, topics.COUNTERS)))


def total(samples: list[dict[str, float]], name: str) -> float:
    return sum(s.get(name, 0.0) for s in samples)


def run(rec: Recording, n: int, partitions: int, timeout_s: float, profile: str | None, grace_s: float,
        profile_hz: int = 20) -> dict[str, Any]:
    """One catch-up: a fresh broker, the recording, n workers; returns the figures and the outputs."""
    app_id = f"catchup-{n}w-{os.getpid()}"
    tmp = Path(tempfile.mkdtemp(prefix=f"flowtracer-catchup-{n}-"))
    topology = tmp / "fabric.yaml"
    topology.write_text(rec.topology_yaml)
    load_before = os.getloadavg()
    result: dict[str, Any] = {"workers": n}
    with TansuBroker(log_dir=tmp) as broker:
        ensure_topics(broker.bootstrap, partitions, app_id=app_id)
        result["produce_s"] = round(asyncio.run(produce(broker.bootstrap, rec)), 1)
        result["raw"] = raw_consume(broker.bootstrap, rec, partitions)
        broker_cpu0 = cpu_s(broker.pid or 0)
        started = time.monotonic()
        workers = start_workers(n, broker.bootstrap, topology, partitions, app_id, tmp, profile, grace_s)
        spy = None
        if profile == "py-spy":
            spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid",
                                    str(workers[0].proc.pid), "--format", "raw", "--rate", str(profile_hz),
                                    "--nonblocking",
                                    "--output", str(tmp / "worker0.pyspy.txt")],
                                   stdout=subprocess.DEVNULL, stderr=(tmp / "py-spy.log").open("wb"))
        goal = partitions * rec.windows
        progress: list[tuple[float, float]] = []
        last: list[dict[str, float]] = []
        done_at = None
        idle_cpu = [0.0] * n  # each worker's CPU before it read its first record: start-up, group join, recovery
        reading = [False] * n
        try:
            while time.monotonic() - started < timeout_s:
                # Each scrape costs the worker ~1-3 %; polled faster until every worker has read, for its start-up CPU.
                time.sleep(1.0 if all(reading) else 0.2)
                for w in workers:
                    if w.proc.poll() is not None:
                        raise SystemExit(f"worker exited {w.proc.returncode}; see {w.log}")
                before = [cpu_s(w.proc.pid) for w in workers]
                last = [metrics(w.port) for w in workers]
                for i, s in enumerate(last):
                    if s and not input_records(s):
                        idle_cpu[i] = before[i]
                    reading[i] = reading[i] or bool(s and input_records(s))
                links = total(last, 'flowtracer_processor_windows_total{stage="links"}')
                fabric = total(last, 'flowtracer_processor_windows_total{stage="fabric"}')
                read = sum(input_records(s) for s in last)
                progress.append((time.monotonic() - started, links))
                if links >= goal and fabric >= rec.windows and read >= len(rec.records):
                    done_at = time.monotonic() - started
                    break
            cpu = [cpu_s(w.proc.pid) for w in workers]
            broker_cpu = cpu_s(broker.pid or 0) - broker_cpu0
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                try:
                    spy.wait(30)
                except subprocess.TimeoutExpired:
                    spy.kill()
            stop_workers(workers)
        load_after = os.getloadavg()
        names = [t.name for t in topics.OUTPUT_TOPICS]
        outputs, _, _ = asyncio.run(consume_all(broker.bootstrap, names, dict.fromkeys(names, partitions), None))
    if done_at is None:
        raise SystemExit(f"{n} workers did not finish in {timeout_s} s: {progress[-1:]}, logs in {tmp}")
    lo = next(t for t, x in progress if x >= 0.1 * goal)
    hi = next(t for t, x in progress if x >= 0.9 * goal)
    steady = 0.8 * goal / partitions / (hi - lo) if hi > lo else float("nan")
    rate = rec.windows / done_at
    result.update({
        "catchup_s": round(done_at, 1),
        "first_10pct_s": round(lo, 1),
        "windows_per_s": round(rate, 3),
        "windows_per_s_steady": round(steady, 3),
        "windows_per_s_per_worker": round(rate / n, 3),
        "realtime_factor": round(rate * 1.0, 3),  # 1 s hop: fabric seconds per wall second
        "msgs_per_s": round(len(rec.records) / done_at),
        "ours_over_raw": round(len(rec.records) / done_at / result["raw"]["msgs_per_s"], 4),
        "worker_cpu_s": [round(c, 1) for c in cpu],
        "broker_cpu_s": round(broker_cpu, 1),
        "cpu_ms_per_msg": round(1000 * sum(cpu) / len(rec.records), 3),
        "startup_cpu_s": [round(c, 1) for c in idle_cpu],
        # Without the start-up: what reading, windowing and publishing cost, against the raw consumer's CPU.
        "cpu_ms_per_msg_running": round(1000 * (sum(cpu) - sum(idle_cpu)) / len(rec.records), 3),
        "running_cpu_over_raw": round((sum(cpu) - sum(idle_cpu)) / result["raw"]["cpu_s"], 1),
        "records_per_worker": [input_records(s) for s in last],
        "incomplete_windows": total(last, "flowtracer_processor_incomplete_windows"),
        "late_records": total(last, "flowtracer_processor_late_records"),
        "overflowed_windows": total(last, "flowtracer_processor_overflowed_windows"),
        "dead_letters": total(last, "flowtracer_processor_dead_letters_total"),
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "grace_s": grace_s, "tmp": str(tmp),
    })
    result["outputs"] = by_key_and_window(outputs)
    return result


OUTPUT_TYPES = {t.name: getattr(mod, t.message) for t in topics.OUTPUT_TOPICS
                for mod in (analytics_pb2, flows_pb2, traces_pb2) if hasattr(mod, t.message)}
"""Every output topic's message (trace requests are in traces.proto, collective profiles in flows.proto)."""


def by_key_and_window(outputs: list[tuple[str, bytes | None, bytes]]) -> dict[tuple[str, bytes, int], set[bytes]]:
    """Output values grouped by (topic, key, window end): a redelivered duplicate is the same value."""
    out: dict[tuple[str, bytes, int], set[bytes]] = defaultdict(set)
    for topic, key, value in outputs:
        msg = OUTPUT_TYPES[topic]()
        msg.ParseFromString(value)
        if isinstance(msg, analytics_pb2.DeadLetter):  # which worker wrote it, and when: not the outputs' content
            msg.ClearField("worker")
            msg.ClearField("received_ns")
            value = msg.SerializeToString()
        end = getattr(msg, "window_end_ns", 0)
        out[(topic, key or b"", end)].add(value)
    return out


def compare(ref: dict[tuple[str, bytes, int], set[bytes]], got: dict[tuple[str, bytes, int], set[bytes]]
            ) -> dict[str, Any]:
    """How the outputs of a run differ from the reference run's, per (topic, key, window end)."""
    only_ref = ref.keys() - got.keys()
    only_got = got.keys() - ref.keys()
    differ = [k for k in ref.keys() & got.keys() if ref[k] != got[k]]
    per_topic: dict[str, int] = defaultdict(int)
    for t, *_ in ref:
        per_topic[t] += 1
    return {"keys_windows": len(ref), "per_topic": dict(per_topic), "missing": len(only_ref), "extra": len(only_got),
            "different": len(differ), "identical": not (only_ref or only_got or differ),
            "examples": [repr(k) for k in [*only_ref, *only_got][:3]],
            "differences": [field_differences(k, ref[k], got[k]) for k in differ[:3]]}


def field_differences(k: tuple[str, bytes, int], ref: set[bytes], got: set[bytes]) -> str:
    """The fields in which two runs' values of one (topic, key, window end) differ, for the report."""
    def fields(values: set[bytes]) -> list[dict[str, Any]]:
        out = []
        for v in sorted(values):
            msg = OUTPUT_TYPES[k[0]]()
            msg.ParseFromString(v)
            out.append(MessageToDict(msg))
        return out
    a, b = fields(ref), fields(got)
    names = sorted({n for d in a + b for n in d})
    diff = {n: ([d.get(n) for d in a], [d.get(n) for d in b]) for n in names
            if [d.get(n) for d in a] != [d.get(n) for d in b]}
    return f"{k!r}: {diff}"[:600]


def stop_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(f"stopped by signal {signum}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=512)
    ap.add_argument("--nics-per-host", type=int, default=8)
    ap.add_argument("--rails", type=int, default=8)
    ap.add_argument("--leaves", type=int, default=128)
    ap.add_argument("--spines", type=int, default=32)
    ap.add_argument("--qps", type=int, default=4, help="QPs per NIC")
    ap.add_argument("--windows", type=int, default=20, help="recorded 1 s windows")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="profile worker 0 of the N-worker run (py-spy when installed, else cProfile)")
    ap.add_argument("--profile-hz", type=int, default=20, help="py-spy's samples per second (--profile)")
    ap.add_argument("--grace", type=float, default=3.0,
                    help="the workers' --grace (s), the processor's default; on a backlog a window's records can "
                         "take longer than that to be read, and it is waited out (docs/benchmarks.md, Catch-up)")
    ap.add_argument("--keep", action="store_true", help="keep each run's directory (logs, profiles)")
    ap.add_argument("--start", type=int, default=None, metavar="UNIX_S",
                    help="the recording's first window starts here (default: it ends 5 s before now); with the same "
                         "--start and seed, another checkout's outputs can be compared (--save-outputs, "
                         "--compare-outputs)")
    ap.add_argument("--save-outputs", type=Path, default=None, metavar="FILE",
                    help="write the first run's outputs (by topic, key and window end) to FILE")
    ap.add_argument("--compare-outputs", type=Path, default=None, metavar="FILE",
                    help="compare the first run's outputs with those --save-outputs wrote (same --start and seed)")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, stop_on_sigterm)  # workers and broker are stopped on the way out
    spec = FabricSpec(hosts=a.hosts, nics_per_host=a.nics_per_host, rails=a.rails, leaves=a.leaves,
                      spines=a.spines, name="bench-catchup")
    rec = record(spec, a.qps, a.windows, a.partitions, a.seed, a.start)
    report: dict[str, Any] = {
        "fabric": {"hosts": a.hosts, "nics": rec.nics, "switches": rec.switches, "flows": rec.flows_per_window},
        "recording": {"windows": rec.windows, "messages": len(rec.records), "mib": round(rec.mib, 1),
                      "build_cpu_s": round(rec.build_s, 1), "per_partition": rec.per_partition},
        "partitions": a.partitions, "runs": []}
    profiler = "py-spy" if shutil.which("py-spy", path=str(Path(sys.executable).parent)) else "cprofile"
    ref = None
    for n in a.workers:
        r = run(rec, n, a.partitions, a.timeout, profiler if a.profile == n else None, a.grace,
                a.profile_hz)
        outputs = r.pop("outputs")
        if ref is None:
            ref = outputs
            r["outputs"] = {"keys_windows": len(ref)}
            if a.save_outputs is not None:
                a.save_outputs.write_bytes(pickle.dumps(dict(outputs)))
            if a.compare_outputs is not None:
                r["outputs_vs_file"] = compare(pickle.loads(a.compare_outputs.read_bytes()), outputs)
        else:
            r["outputs_vs_first"] = compare(ref, outputs)
        if not a.keep and a.profile != n:
            shutil.rmtree(r.pop("tmp"), ignore_errors=True)
        report["runs"].append(r)
        print(json.dumps(r), file=sys.stderr, flush=True)
    runs = report["runs"]
    if len(runs) > 1:
        base = runs[0]["windows_per_s"] / runs[0]["workers"]
        report["scaling"] = {str(r["workers"]): {"speedup": round(r["windows_per_s"] / runs[0]["windows_per_s"], 3),
                                                 "efficiency": round(r["windows_per_s"] / (r["workers"] * base), 3),
                                                 "steady_speedup": round(r["windows_per_s_steady"]
                                                                         / runs[0]["windows_per_s_steady"], 3)}
                             for r in runs[1:]}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
