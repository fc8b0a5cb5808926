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

from stage_latency import STAGES, breakdown, marks, read_run

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
DOC = ROOT / "docs" / "benchmarks.md"
ARTIFACTS = ROOT / "artifacts"
BUDGET_S = 570.0
"""The whole run stays under 10 minutes: pipeline sizes that would not fit are skipped (and said so)."""
S = 1_000_000_000
KEPT = ("## Congestion counters on and off", "## Catch-up: workers of one app id on a recorded backlog",
        "## Output producer: batches per partition (issue 30)",
        "## The worker's hot path: batches, one step per batch, metrics at scrape time (issue 30)",
        "## Latency by stage: the fetch wait", "## Failover at the short fetch wait", "## Simulator (test bed)",
        "## Whole pipeline at 256 and 512 hosts")
"""Headings of the sections measured by hand (paired on/off runs, the catch-up of bench_catchup.py, before/after
runs of stage_latency.py, bench_failover.py and bench_sim.py, the pipeline at sizes ``--pipeline-at`` runs: longer
than ``make bench`` can afford): kept as they are, at the end, when the report is rewritten."""


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


@dataclass
class Result:
    name: str
    ok: bool
    seconds: float
    peak_rss_mib: float | None
    data: Any = None
    error: str = ""


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


# -- the report ------------------------------------------------------------------------------------


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


def _g(d: Any, *path: Any) -> Any:
    for p in path:
        if d is None:
            return None
        d = d[p] if isinstance(d, list) and isinstance(p, int) and p < len(d) else \
            d.get(p) if isinstance(d, dict) else None
    return d


def _n(x: Any, fmt: str = ",.0f") -> str:
    return "n/a" if x is None else format(x, fmt)


def component_rows(res: dict[str, Result]) -> list[list[str]]:
    """One row per component: what it does per second, the raw limit, ours/raw, peak RSS."""
    rows = []

    def row(name: str, r: Result | None, ours: str, raw: str, ratio: Any, note: str = "") -> None:
        if r is None or not r.ok:
            rows.append([name, "failed" if r else "not run", (" ".join(r.error[:80].split()) if r else ""), "", "", ""])
            return
        rows.append([name, ours, raw, _n(ratio, ".3f"), _n(r.peak_rss_mib, ".0f"), note])

    c = res.get("collector")
    d = c.data if c and c.ok else {}
    row("gNMI collector (decode, deltas, batches, Kafka)", c,
        f"{_n(_g(d, 'collector', 'updates_per_s'))} counter updates/s",
        f"{_n(_g(d, 'raw', 'updates_per_s'))}/s grpc.aio receive + protobuf decode",
        _g(d, "ratio", "updates_per_s"), f"per CPU-s: {_n(_g(d, 'ratio', 'updates_per_cpu_s'), '.3f')}")
    a = res.get("agent")
    d = a.data if a and a.ok else {}
    pb = _g(d, "parse_build")
    row("host agent (parse `rdma -j`, build FlowBatch)", a,
        f"10k QPs in {_n(_g(pb, 'parse_plus_build_ms'), '.0f')} ms",
        f"{_n(_g(pb, 'json_loads_ms'), '.0f')} ms stdlib json.loads of the same text",
        1 / pb["ratio_to_json_loads"] if pb and pb.get("ratio_to_json_loads") else None,
        f"CPU at 1 s, 2k QPs: {_g(d, 'agent_cpu', 'cpu_share_at_1s_interval')}")
    p = res.get("processor")
    d = p.data if p and p.ok else {}
    row("stream processor, one worker (pure stages + encoding)", p,
        f"{_n(_g(d, 'worker', 'flows_per_s'))} flow records/s + {_n(_g(d, 'worker', 'counters_per_s'))} "
        f"interface counter sets/s ({_n(_g(d, 'worker', 'batches_per_s'))} batches/s)",
        f"{_n(_g(d, 'decode', 'batches_per_s'))} batches/s protobuf ParseFromString",
        _g(d, "ratio"), f"{_n(_g(d, 'realtime_share'), '.2f')} CPU-s per 1 s window of "
        f"{_g(d, 'fabric', 'nics')} NICs / {_g(d, 'fabric', 'switches')} switches")
    s = res.get("sink")
    d = s.data if s and s.ok else {}
    row("InfluxDB sink (to VictoriaMetrics)", s, f"{_n(_g(d, 'sink_pts_per_s'))} points/s",
        f"{_n(_g(d, 'raw_pts_per_s'))} points/s influxdb-client batching WriteApi", _g(d, "sink_ratio"),
        f"line encoding {_n(_g(d, 'encode_ratio'), '.2f')}x influxdb-client Point")
    g = res.get("gnmi_server")
    d = g.data if g and g.ok else {}
    r0 = _g(d, "results", 0)
    lib = _g(r0, "ratio_to_library")
    row("simulated gNMI servers (test bed)", g,
        f"{_n(_g(r0, 'updates_per_s'))} updates/s, {_n(_g(r0, 'server_cpu_us_per_update'), '.2f')} us CPU/update",
        f"{_n(_g(r0, 'naive_build_us_per_update'), '.2f')} us/update building the messages with the library",
        1 / lib if lib else None, f"{_g(d, 'scenario', 'switches')} switches, latency p99 "
        f"{_n(_g(r0, 'latency_ms_p99'), '.0f')} ms")
    i = res.get("infer")
    d = i.data if i and i.ok else []
    runs = [x for x in (d if isinstance(d, list) else [d]) if isinstance(x, dict)]
    large = next((x for x in runs if x.get("fabric") == "large"), runs[-1] if runs else None)
    row("infer resolver, steady window", i,
        f"{_n(_g(large, 'steady_ms', 'p50'), '.0f')} ms/window ({_g(large, 'nics')} NICs, {_g(large, 'flows')} flows)",
        f"{_n(_g(large, 'floor_ms'), '.1f')} ms: a dict lookup per flow (the hash resolver's cost)",
        1 / large["steady_vs_floor"] if large and large.get("steady_vs_floor") else None,
        f"accuracy {_g(large, 'accuracy')}")
    return rows


def _section_data(res: dict[str, Result], name: str) -> tuple[Any, str]:
    """A benchmark's parsed output, or why there is none ("" when there is)."""
    r = res.get(name)
    if r is None:
        return None, "Not run."
    if not r.ok:
        return None, f"Failed: {r.error[:200]}"
    return r.data, ""


def tracing_section(res: dict[str, Result]) -> list[str]:
    """Path tracing: probes/s and tracer CPU per probe on both transports vs raw socket loops, and the time
    to first placement (bench_tracing)."""
    d, why = _section_data(res, "tracing")
    if why:
        return [why]
    rows = []
    for side, name in (("sim", "sim (responder in another process)"), ("kernel", "kernel (namespace fabric)")):
        x = d.get(side) or {}
        if "skipped" in x:
            rows.append([name, "skipped", x["skipped"], "", "", ""])
            continue
        raw, ours = x.get("raw") or {}, x.get("tracer_unlimited") or {}
        rows.append([name + ", unlimited budget", f"{_n(ours.get('probes_per_s'))}",
                     f"{_n(ours.get('cpu_us_per_probe'), '.1f')}",
                     f"{_n(raw.get('probes_per_s'))} probes/s, {_n(raw.get('cpu_us_per_probe'), '.1f')} us/probe",
                     _n(x.get("ratio_probes_per_s"), ".3f"), _n(x.get("ratio_cpu_per_probe"), ".2f")])
        if "tracer_2000" in x:
            t = x["tracer_2000"]
            rows.append([name + ", budget 2,000/s", _n(t["probes_per_s"]), _n(t["cpu_us_per_probe"], ".1f"),
                         "", "", ""])
    ttfp = []
    for x in _g(d, "sim", "time_to_first_placement") or []:
        hi, lo = x["high"], x["default"]
        ttfp.append([f"{x['flows']:,}", f"{lo['first_complete_s'] * 1e3:.0f} ms" if lo["first_complete_s"] else "n/a",
                     f"{_n(lo.get('all_traced_s_projected'), ',.0f')} s (projected from {lo['traced']} traces in "
                     f"{lo['seconds']:.0f} s; arithmetic {x['flows']:,} x {hi['probes_per_trace']} / 50 = "
                     f"{_n(lo.get('all_traced_s_arithmetic'), ',.0f')} s)",
                     f"{_n(hi['budget_per_s'])}/s: {hi['first_complete_s'] * 1e3:.0f} ms" if hi["first_complete_s"]
                     else "n/a", f"{_n(hi['all_traced_s'], '.1f')} s measured ({_n(hi['probes_per_s'])} probes/s)"])
    return [md_table(["transport", "tracer probes/s", "tracer CPU us/probe", "raw loop (same run)",
                      "ours / raw probes/s", "CPU/probe ours / raw"], rows), "",
            "Raw loops: sim = 64 JSON requests in flight on one loopback socket to the same responder; kernel = 64",
            "sockets in the host's namespace with a TTL-1 probe each in flight (`send` + `poll` +",
            "`recvmsg(MSG_ERRQUEUE)`). The tracer's CPU per probe on the kernel transport includes opening one socket",
            "per trace inside the host namespace (a thread that enters it); 256 flows, ~2.5 probes each.", "",
            "**Time to first placement** (sim transport, one host's flows seen at once, 64 traces at once):", "",
            md_table(["flows", "first complete trace, default 50 probes/s", "all flows traced, default budget",
                      "first complete, high budget", "all flows traced, high budget"], ttfp)]


def kernel_section(res: dict[str, Result]) -> list[str]:
    """The kernel data plane's largest real-time fabric (bench_kernel_dataplane)."""
    d, why = _section_data(res, "kernel_dataplane")
    if why:
        return [why]
    if "skipped" in d:
        return [f"Skipped: {d['skipped']}"]
    raw = d.get("raw_sendto") or {}
    rows = []
    for x in [*d.get("runs", []), *([d["low_scale_run"]] if d.get("low_scale_run") else [])]:
        if "skipped" in x:
            rows.append([x["size"], "", "skipped: " + x["skipped"], "", "", "", "", ""])
            continue
        if "tick_late_ms_max" not in x:
            rows.append([f"{x['hosts']} / {x['leaves']} / {x['spines']}", _n(x.get("scale"), ",.0f"), "error", "",
                         "", "", "", ""])
            continue
        rows.append([f"{x['hosts']} / {x['leaves']} / {x['spines']} ({x['namespaces']} ns)", _n(x["scale"], ",.0f"),
                     "yes" if x["keeps_real_time"] else "**no**",
                     f"{_n(x['tick_late_ms_p50'], '.0f')} / {_n(x['tick_late_ms_max'], '.0f')} ms; "
                     f"{x['ticks_done']} / {x['ticks_due']} ticks",
                     f"{x['cpu_cores']:.2f} (machine busy {x['machine_busy_share']:.0%})",
                     f"{_n(x['frames_sent_per_s'])} / {_n(x['switch_veth_rx_packets_per_s'])}",
                     f"{_n(x['frames_sent_per_s'] / raw['packets_per_s'], '.3f')}" if raw.get("packets_per_s") else "",
                     f"{x['setup_s']:.2f} / {x['teardown_s']:.2f}"])
    big = d.get("largest_real_time")
    head = ("**Largest real-time fabric**: " + (f"{big['hosts']} hosts / {big['leaves']} leaves / {big['spines']} "
            f"spines at scale {big['scale']:,.0f}" if big else "none") +
            f". Raw limit (same run): one Python thread `sendto` of 1 KiB datagrams through a veth fabric: "
            f"{_n(raw.get('packets_per_s'))} packets/s ({_n(raw.get('cpu_us_per_packet'), '.1f')} us CPU each).")
    return [head, "", md_table(["hosts / leaves / spines", "scale", "keeps real time",
                                "tick completed late p50 / max; ticks done / due", "CPU (cores) of the sim process",
                                "frames sent/s / switch veth rx packets/s", "frames sent / raw sendto",
                                "setup / teardown s"], rows), "",
            "`flowtracer.sim.runner.SimRunner` with `RunnerOptions(dataplane=\"kernel\")`, default ring all-reduce",
            "over every host, 1 s ticks; a tick is computed at its wall-clock end, so \"late\" is how long after its",
            "end it completed (traffic update + `ip -s -j link show` of every switch). A size keeps real time when no",
            "steady tick completed more than one tick late and no tick was lost; the first that does not ends the",
            "series, and it (else the largest) is run again at a coarser scale (fewer real frames per modelled byte).",
            "Namespaces are removed by the fabric's own run record."]


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def pipeline_tables(pipes: list[dict[str, Any]]) -> tuple[str, str]:
    """The whole-pipeline table (one row per size) and the per-stage latency table."""
    prow = []
    for x in pipes:
        if "latency" not in x:
            prow.append([f"{x['hosts']} / {x['leaves']} / {x['spines']}", "", "", "", "",
                         x.get("error") or f"skipped: {x.get('skipped')}"])
            continue
        st = x["stages"]
        cpu = ", ".join(f"{k.split('-')[0]} {v['cpu_share']:.2f}" for k, v in st.items())
        mem = ", ".join(f"{k.split('-')[0]} {v['peak_rss_mib']:.0f}" for k, v in st.items())
        prow.append([f"{x['hosts']} / {x['leaves']} / {x['spines']}",
                     "yes" if x["keeps_up"] else f"**no**: {x['limited_by']}",
                     f"{_n(x['latency']['p50_s'], '.2f')} / {_n(x['latency']['p99_s'], '.2f')}",
                     _n(x["lag_at_stop_s"], ".1f"), f"{x['fabric_windows_steady']} / {x['expected_windows']}",
                     f"CPU (cores): {cpu}; RSS MiB: {mem}"])
    ptable = md_table(["hosts / leaves / spines", "keeps up", "latency p50 / p99 s", "lag at stop s",
                       "fabric windows / expected", "stages"], prow)
    srow = []
    for x in pipes:
        b = x.get("stage_latency") or {}
        if not b.get("windows"):
            continue
        srow.append([f"{x['hosts']} / {x['leaves']} / {x['spines']}", str(b["windows"])]
                    + [f"{b['marks'][k]['p50_s']:.2f} / {b['marks'][k]['p99_s']:.2f}" for k in STAGES])
    stable = md_table(["hosts / leaves / spines", "windows", *(f"{k} p50 / p99 s" for k in STAGES)], srow)
    return ptable, stable


def report(m: dict[str, Any], res: dict[str, Result], pipes: list[dict[str, Any]], total_s: float) -> str:
    rows = component_rows(res)
    table = md_table(["component", "measured", "raw library limit (same run)", "ours / raw", "peak RSS MiB",
                      "notes"], rows)
    first = next((x for x in pipes if "latency" in x), None)
    lat = first["latency"] if first else {}
    ok = [x for x in pipes if x.get("keeps_up")]
    largest = ok[-1] if ok else None
    bad = next((x for x in pipes if "latency" in x and not x["keeps_up"]), None)
    err = next((x for x in pipes if "error" in x or "skipped" in x), None)
    proc = res["processor"].data if "processor" in res and res["processor"].ok else None
    share = _g(proc, "realtime_share")
    cap_nics = _g(proc, "fabric", "nics") / share if share else None
    cap_flows = _g(proc, "per_window", "flows") / share if share else None
    summary = [
        f"- **End-to-end latency** (switch sample instant = window end -> LinkLoad produced to Kafka and written "
        f"to the store), 16-host fabric, steady state: p50 {_n(lat.get('p50_s'), '.2f')} s, "
        f"p99 {_n(lat.get('p99_s'), '.2f')} s, max {_n(lat.get('max_s'), '.2f')} s over {lat.get('samples', 0)} "
        "link loads.",
        "- **Largest real-time fabric** (whole pipeline on this machine, one processor worker): "
        + (f"{largest['hosts']} hosts / {largest['switches']} switches kept up" if largest else "none kept up")
        + (f"; {bad['hosts']} hosts / {bad['switches']} switches lagged (lag at stop "
           f"{_n(bad['lag_at_stop_s'], '.1f')} s), limited by the {bad['limited_by']}"
           + (f" (its engine fell up to {bad['sim_ticks_behind_max']} ticks behind real time)"
              if bad["limited_by"].startswith("simulator") else "") if bad else "")
        + (f"; {err['hosts']} hosts: {err.get('error') or 'skipped (' + err['skipped'] + ')'}" if err else "")
        + ".",
        "- **Processor alone** (bench_processor, one worker, in process): "
        + (f"{_n(_g(proc, 'realtime_share'), '.2f')} CPU-s per 1 s window for {_n(_g(proc, 'fabric', 'nics'))} NICs "
           f"/ {_n(_g(proc, 'per_window', 'flows'))} flows / {_g(proc, 'fabric', 'switches')} switches, so one "
           f"worker with a whole core keeps up with about {_n(cap_nics)} NICs ({_n(cap_flows)} flows) of this "
           "density; more workers split the partitions (docs/stream.md)." if cap_nics else "not measured.")
        ,
        "- **Peak memory**: per component in the table (largest process of each benchmark, from wait4); "
        "per pipeline stage below (VmHWM).",
    ]
    ptable, stable = pipeline_tables(pipes)
    mrows = [["CPU", f"{m['nproc']} x {m['cpu']}"], ["memory", f"{m['memory_gib']} GiB"],
             ["Python", m["python"]], ["kernel", m["kernel"]],
             ["load average at start (1/5/15 min)", " / ".join(f"{x:.2f}" for x in m["load_avg_start"])],
             ["packages", ", ".join(f"{k} {v}" for k, v in m["packages"].items())],
             ["commit", m["commit"] or "n/a"], ["date", m["date"]], ["whole run", f"{total_s:.0f} s"]]
    times = ", ".join(f"{r.name} {r.seconds:.0f} s" for r in res.values())
    return "\n".join([
        "# Benchmarks",
        "",
        "Generated by `make bench` (`bench/run_all.py`); do not edit by hand, except the sections after \"Whole",
        "pipeline\" (measured by hand, too long for `make bench`, which carries them over). Every throughput is a",
        "ratio to a raw library limit measured in the same run on the same machine, because absolute numbers on a",
        "shared 2-core machine move with whatever else runs (compare the load average). Each component's own script",
        "documents its scenario in its docstring; run one alone with `.venv/bin/python bench/bench_<name>.py`.",
        "",
        "## Machine",
        "",
        md_table(["", ""], mrows),
        "",
        "## Components",
        "",
        table,
        "",
        "`ours / raw` is throughput relative to the library limit (1 = as fast as the library alone; for the agent,",
        "the gNMI servers and infer it is the inverse of the cost ratio their scripts print).",
        "",
        "## Path tracing",
        "",
        *tracing_section(res),
        "",
        "## Kernel data plane",
        "",
        *kernel_section(res),
        "",
        "## Whole pipeline",
        "",
        *summary,
        "",
        ptable,
        "",
        "Each size runs the simulator (`--no-ground-truth`, ring all-reduce over every host), the gNMI collector,",
        "the host agents, Tansu and one processor worker writing line protocol, all on this machine, for",
        f"{first['seconds'] if first else 30:.0f} s; steady state = windows ending 12 s after the start. A size",
        "keeps up when the newest fabric window at stop is at most 8 s old, at least 80% of the expected fabric",
        "windows were finalized and the p99 latency is at most 10 s. The first size that does not ends the series,",
        "and the stage that could not keep up is named: the simulator when its engine fell behind real time",
        "(`sim.log`), the collector when switch streams stalled, else the processor. CPU is per stage in cores",
        "(1.0 = one core); on a shared machine a stage can fall behind below one core because others hold the CPUs.",
        "",
        "### Where the latency goes",
        "",
        stable,
        "",
        "Per window ending at E, seconds after E from the Kafka timestamps of one run's topics",
        "(`bench/stage_latency.py`, which also runs alone): `sampled` every switch sampled past E;",
        "`counters_in_kafka` the newest of those samples' CounterBatches in Kafka; `flows_in_kafka` the newest",
        "FlowBatch of the window; `attributions` the flows stage released the window; `link_loads` the links stage",
        "did (the latency above); `fabric` the fabric stage's FimSample, the end of the chain. Over windows that",
        "have every mark, from 12 s after the start.",
        "",
        f"Script times: {times}.",
        "",
    ])


def kept_section(old: str) -> str:
    """The hand-measured sections of the old report, each from its heading to the next ``## `` heading ("" if
    none), in ``KEPT`` order."""
    out = []
    for heading in KEPT:
        start = old.find(heading + "\n")
        if start < 0:
            continue
        end = old.find("\n## ", start + len(heading))
        out.append((old[start:] if end < 0 else old[start:end + 1]).rstrip("\n") + "\n")
    return "\n".join(out)


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
