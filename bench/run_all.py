"""Run every benchmark of bench/, print one table, and write docs/benchmarks.md (``make bench``).

Each ``bench/bench_*.py`` runs as its own subprocess with a time cap; its printed result (JSON, JSON
lines, or a Python dict) is parsed, and its peak RSS comes from ``wait4``. Then the whole pipeline
runs on the simulator (LocalPipeline: Tansu, ``flowtracer sim --no-ground-truth``, collector, agents,
one processor worker writing line protocol) on generated fabrics of growing size, to measure the
end-to-end latency (switch sample instant = window end -> the LinkLoad produced to Kafka, written
to the store in the same step) and the largest fabric one worker keeps up with on this machine.

Throughput figures are ratios to a raw library limit measured in the same run (same machine, same
load), because absolute numbers on a shared 2-core machine move with whatever else runs.

    .venv/bin/python bench/run_all.py            # < 10 min on 2 cores; rewrites docs/benchmarks.md
    .venv/bin/python bench/run_all.py --quick    # smoke run (~2 min), does not touch docs/
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from report_doc import Result, component_rows, kept_section, pipeline_tables, report
from stage_latency import breakdown, marks, read_run

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
DOC = ROOT / "docs" / "benchmarks.md"
ARTIFACTS = ROOT / "artifacts"
BUDGET_S = 570.0
"""The whole run stays under 10 minutes: pipeline sizes that would not fit are skipped (and said so)."""
S = 1_000_000_000


@dataclass(frozen=True)
class Bench:
    """One benchmark script: how to run it quickly and fully, and its time cap (s)."""

    name: str
    script: str
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()
    cap_s: float = 150.0


BENCHES = (
    Bench("gnmi_server", "bench_gnmi_server.py", (), ("--switches", "8", "--seconds", "4", "--warmup", "1"), 120),
    Bench("collector", "bench_collector.py", (), ("--targets", "4", "--seconds", "3", "--memory-targets", "20"), 150),
    Bench("agent", "bench_agent.py", ("--repeat", "10"), ("--qps", "2000", "--repeat", "3", "--windows", "5"), 120),
    Bench("sink", "bench_sink.py", ("--repeat", "2"), ("--points", "20000", "--repeat", "1"), 120),
    Bench("processor", "bench_processor.py", (), ("--hosts", "32", "--leaves", "8", "--spines", "4", "--windows",
                                                  "2"), 120),
    Bench("infer", "bench_infer.py", (), ("--only", "small", "--windows", "20"), 200),
    Bench("tracing", "bench_tracing.py", (), ("--quick", "--window", "2"), 120),
    Bench("kernel_dataplane", "bench_kernel_dataplane.py", ("--seconds", "15", "--budget-s", "140"),
          ("--seconds", "5", "--sizes", "16/4/2", "32/8/2", "--low-scale", "0", "--budget-s", "40"), 220),
)

PIPELINE_SIZES = ((16, 4, 2), (64, 8, 4), (128, 16, 8), (256, 32, 8))
"""(hosts, leaves, spines) tried in order; one NIC per host, ring all-reduce over every host."""


def parse_output(text: str) -> Any:
    """A benchmark's printed result: one JSON document, JSON lines (a list), or a Python dict literal."""
    text = text.strip()
    with contextlib.suppress(ValueError):
        return json.loads(text)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    with contextlib.suppress(ValueError):
        return [json.loads(ln) for ln in lines]
    for ln in reversed(lines):
        with contextlib.suppress(ValueError, SyntaxError):
            v = ast.literal_eval(ln.strip())
            if isinstance(v, dict):
                return v
    raise ValueError(f"no JSON or dict in the output: {text[-300:]!r}")


def run_script(b: Bench, quick: bool, log_dir: Path) -> Result:
    """Run one script with its cap; peak RSS of the script's process tree's largest waited process."""
    args = b.quick_args if quick else b.args
    out_path, err_path = log_dir / f"{b.name}.out", log_dir / f"{b.name}.err"
    started = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, str(BENCH / b.script), *args], stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
                time.sleep(5)
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(b.cap_s, kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    rss = round(usage.ru_maxrss / 1024, 1)
    if timed_out.is_set():
        return Result(b.name, False, seconds, rss, error=f"killed after its {b.cap_s:.0f} s cap")
    if proc.returncode != 0:
        tail = err_path.read_text(errors="replace")[-600:]
        return Result(b.name, False, seconds, rss, error=f"exit {proc.returncode}: {tail}")
    try:
        return Result(b.name, True, seconds, rss, parse_output(out_path.read_text()))
    except ValueError as e:
        return Result(b.name, False, seconds, rss, error=str(e))


# -- the whole pipeline ----------------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of a live process from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        hwm = next((int(ln.split()[1]) for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if ln.startswith("VmHWM:")), 0)
        return cpu, round(hwm / 1024, 1)
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0


def pipeline_run(hosts: int, leaves: int, spines: int, seconds: float, work: Path) -> dict[str, Any]:
    """Run the whole pipeline on a generated fabric for ``seconds``; latency, lag, CPU and memory per stage."""
    from kafka import KafkaConsumer, TopicPartition

    from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
    from flowtracer.demo.status import Observed
    from flowtracer.fabric.topology_generate import FabricSpec, generate
    from flowtracer.schemas import topics

    spec = FabricSpec(hosts=hosts, leaves=leaves, spines=spines, name=f"bench-{hosts}")
    topo = generate(spec)
    work.mkdir(parents=True, exist_ok=True)
    topo_path = work / "fabric.yaml"
    topo_path.write_text(topo.to_yaml())
    opts = PipelineOptions(topology=topo_path, workload="ring-allreduce", sim_args=("--no-ground-truth",),
                           partitions=4, line_protocol_file=work / "out.lp", log_level="warning")
    obs = Observed(switch_names=frozenset(s.name for s in topo.switches))
    stages: dict[str, dict[str, float]] = {}
    run_dir = work / "run"
    with LocalPipeline(opts, run_dir) as p:
        started = time.time_ns()
        cpu0 = {st.name: _proc_stat(st.proc.pid)[0] for st in p.stages}
        p.wait(seconds)
        stop_ns = time.time_ns()
        for st in p.stages:
            cpu, hwm = _proc_stat(st.proc.pid)
            stages[st.name] = {"cpu_share": round((cpu - cpu0.get(st.name, 0.0)) / seconds, 3), "peak_rss_mib": hwm}
        p.stop_stages()
        consumer = KafkaConsumer(bootstrap_servers=p.bootstrap, enable_auto_commit=False, group_id=None,
                                 consumer_timeout_ms=3000)
        parts = [TopicPartition(t, q) for t in (topics.FIM.name, topics.LINK_LOADS.name)
                 for q in sorted(consumer.partitions_for_topic(t) or ())]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        for m in consumer:
            obs.add(m.topic, m.value, m.timestamp if m.timestamp_type == 0 else 0)
        consumer.close()
        per_window = marks(read_run(p.bootstrap, "flowtracer-hash"), len(topo.switches), len(topo.hosts))
    steady_from = started + 12 * S
    lat = obs.latency_stats(steady_from)
    newest = max(obs.fabric_fim, default=0)
    lag_at_stop = (stop_ns - newest) / S if newest else None
    # Windows that had time to be finalized before the stop (the grace is 3 s, plus a hop).
    until = stop_ns - 4 * S
    expected = max(1, int((until - steady_from) / S))
    windows = sum(1 for e in obs.fabric_fim if steady_from <= e <= until)
    keeps_up = lag_at_stop is not None and lag_at_stop <= 8.0 and windows >= 0.8 * expected \
        and (lat["p99_s"] or 99) <= 10.0
    # Which stage could not keep up: the simulator says when its engine falls behind real time, the
    # collector when a switch stream stalls; otherwise it is the processor.
    behind = [int(x) for x in re.findall(r"engine is (\d+) ticks behind", _read(run_dir / "sim.log"))]
    stalls = _read(run_dir / "collect.log").count("stalled:")
    limited_by = None
    if not keeps_up:
        limited_by = "simulator (test bed)" if max(behind, default=0) >= 3 else "collector" if stalls else "processor"
    return {"hosts": hosts, "leaves": leaves, "spines": spines, "switches": leaves + spines,
            "sim_ticks_behind_max": max(behind, default=0), "collector_stalls": stalls, "limited_by": limited_by,
            "seconds": seconds, "fabric_windows_steady": windows, "expected_windows": expected,
            "lag_at_stop_s": None if lag_at_stop is None else round(lag_at_stop, 2),
            "latency": lat, "keeps_up": keeps_up, "stages": stages,
            "stage_latency": breakdown(per_window, steady_from)}


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def pipeline_series(budget_left: Callable[[], float], seconds: float, sizes: Sequence[tuple[int, int, int]],
                    tmp: Path) -> list[dict[str, Any]]:
    """Grow the fabric until the pipeline lags or the time budget runs out (each run ~seconds + 25 s)."""
    out: list[dict[str, Any]] = []
    for hosts, leaves, spines in sizes:
        if budget_left() < seconds + 30:
            out.append({"hosts": hosts, "leaves": leaves, "spines": spines, "skipped": "time budget"})
            break
        print(f"bench: pipeline {hosts} hosts / {leaves} leaves / {spines} spines, {seconds:.0f} s ...", flush=True)
        try:
            r = pipeline_run(hosts, leaves, spines, seconds, tmp / f"pipeline-{hosts}")
        except Exception as e:  # a stage that dies at a size is a result too
            out.append({"hosts": hosts, "leaves": leaves, "spines": spines, "error": f"{type(e).__name__}: {e}"[:400]})
            break
        out.append(r)
        if not r["keeps_up"]:
            break
    return out


# -- the machine ------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor() or "unknown")
    mem_kib = next((int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
                    if ln.startswith("MemTotal:")), 0)
    versions = {}
    for dist in ("grpcio", "protobuf", "faust-streaming", "aiokafka", "kafka-python", "influxdb-client", "pygnmi"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    commit = ""
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
    return {"nproc": os.cpu_count(), "memory_gib": round(mem_kib / 2**20, 1), "cpu": cpu,
            "python": platform.python_version(), "kernel": platform.release(), "load_avg_start": os.getloadavg(),
            "packages": versions, "commit": commit, "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small, fast runs; does not rewrite docs/benchmarks.md")
    ap.add_argument("--only", nargs="*", help="benchmark names to run (default: all)")
    ap.add_argument("--pipeline-seconds", type=float, default=30.0)
    ap.add_argument("--no-pipeline", action="store_true")
    ap.add_argument("--pipeline-at", nargs="+", metavar="H/L/S", default=[],
                    help="only run the whole pipeline at these sizes (hosts/leaves/spines), print its rows and leave "
                    "docs/benchmarks.md alone (for the hand-measured sections)")
    ap.add_argument("--doc", type=Path, default=DOC, help="where to write the report")
    a = ap.parse_args()
    started = time.monotonic()

    def budget_left() -> float:
        return BUDGET_S - (time.monotonic() - started)

    m = machine()
    print(f"bench: {m['nproc']} x {m['cpu']}, {m['memory_gib']} GiB, Python {m['python']}, load "
          f"{m['load_avg_start'][0]:.2f}", flush=True)
    ARTIFACTS.mkdir(exist_ok=True)
    results: dict[str, Result] = {}
    if a.pipeline_at:
        sizes = [tuple(int(v) for v in size.split("/")) for size in a.pipeline_at]
        with tempfile.TemporaryDirectory(prefix="flowtracer-bench-") as tmp:
            pipes = [pipeline_run(h, lv, sp, a.pipeline_seconds, Path(tmp) / f"pipeline-{h}") for h, lv, sp in sizes]
        (ARTIFACTS / "pipeline_at.json").write_text(json.dumps({"machine": m, "pipeline": pipes}, indent=1,
                                                               default=str))
        print("\n\n".join(pipeline_tables(pipes)))
        return 0
    with tempfile.TemporaryDirectory(prefix="flowtracer-bench-") as tmp:
        for b in BENCHES:
            if a.only and b.name not in a.only:
                continue
            print(f"bench: {b.name} ...", flush=True)
            r = run_script(b, a.quick, Path(tmp))
            results[b.name] = r
            print(f"bench: {b.name} {'ok' if r.ok else 'FAILED: ' + r.error[:200]} ({r.seconds:.0f} s, "
                  f"peak RSS {r.peak_rss_mib} MiB)", flush=True)
        pipes: list[dict[str, Any]] = []
        if not a.no_pipeline and not a.only:
            sizes = PIPELINE_SIZES[:2] if a.quick else PIPELINE_SIZES
            pipes = pipeline_series(budget_left, 15.0 if a.quick else a.pipeline_seconds, sizes, Path(tmp))
    total = time.monotonic() - started
    text = report(m, results, pipes, total)
    raw = {"machine": m, "results": {k: vars(v) for k, v in results.items()}, "pipeline": pipes}
    (ARTIFACTS / "benchmarks.json").write_text(json.dumps(raw, indent=1, default=str))
    rows = component_rows(results)
    width = [max(len(str(r[i])) for r in [["component", "measured", "raw limit", "ours/raw", "RSS MiB"], *rows])
             for i in range(5)]
    print()
    for r in [["component", "measured", "raw limit", "ours/raw", "RSS MiB"], *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r[:5], width, strict=True)))
    print()
    for line in text.split("## Whole pipeline", 1)[1].split("\n")[2:6]:
        print(line)
    print(f"\nbench: done in {total:.0f} s; raw results in {ARTIFACTS / 'benchmarks.json'}")
    if not a.quick and not a.only:
        kept = kept_section(a.doc.read_text()) if a.doc.exists() else ""
        a.doc.write_text(text.rstrip("\n") + "\n" + ("\n" + kept.rstrip("\n") + "\n" if kept else ""))
        print(f"bench: wrote {a.doc}")
    return 0 if all(r.ok for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
