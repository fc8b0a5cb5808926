"""Benchmark: the simulator (test bed) per tick, part by part, and whether it keeps real time.

Scenarios (issue #20 item 4): ring all-reduce over every host of generated fabrics of 64, 128, 256 and 512 hosts
(one NIC each), and an all-to-all over 16 hosts with 2 NICs each (about 1,900 flows, the densest event load),
all on the model data plane with no ground truth, as the pipeline bench runs ``flowtracer sim --no-ground-truth``.

In process (``--mode parts``, default): the engine runs ``--ticks`` 1 s ticks after ``--warmup`` ticks, and after each
tick every host's view is written (``write_host_view``, as the runner's view thread does). Reported per tick, in
CPU ms of the thread doing it (``time.thread_time``, so other load on the shared machine does not count): each part
the engine times (``Engine.phase_ns``: traffic = jobs, events and progress, of which maxmin = max-min rate
computation; congestion; accounting = whole bytes per flow and link; counters = switch totals into the gNMI
servers' SwitchStates; hosts = HostStates; ground_truth) and ``views`` (host-view files). ``cpu_ms`` is their
sum and ``realtime_x`` = tick length / that: above 1, one core keeps real time with that much room. The gNMI
servers' encoding for subscribers is not here: bench_gnmi_server.py measures it (per update, per switch).

As users run it (``--mode cli``): ``flowtracer sim --no-ground-truth`` on the same fabrics, measured for ``--seconds``
after ``--cli-warmup`` s (a host's first 20 snapshots are built afresh, later ones rewrite retired ones: the steady
state is what a long run sees); reported are its CPU share (cores, all threads: engine, host-view writer, gNMI
servers) and the most ticks its engine fell behind real time (its own log warning).

Raw baselines in the same run, so results read as ratios on a shared machine: ``numpy_add_at_us`` (np.add.at of
1,000 entries into 100 bins: the engine's kind of small vector op) and ``file_write_us`` (open, write, close of a
small file in the same directory: what a host-view file costs at least).

    .venv/bin/python bench/bench_sim.py                    # ~2 min on 2 cores
    .venv/bin/python bench/bench_sim.py --mode cli --seconds 20
    .venv/bin/python bench/bench_sim.py --only 512 --profile   # cProfile of the tick loop, top functions
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import PHASES, Engine
from flowtracer.sim.fabric.workload import preset
from flowtracer.sim.hosts.views import write_host_view

#: name -> (hosts, leaves, spines, NICs per host, workload preset)
SCENARIOS: dict[str, tuple[int, int, int, int, str]] = {
    "64": (64, 8, 4, 1, "ring-allreduce"),
    "128": (128, 16, 8, 1, "ring-allreduce"),
    "256": (256, 32, 8, 1, "ring-allreduce"),
    "512": (512, 64, 16, 1, "ring-allreduce"),
    "a2a16x2": (16, 4, 2, 2, "alltoall"),
}


def raw_baselines(work: Path) -> dict[str, float]:
    """Library / OS limits measured now: us per np.add.at of 1,000 entries, us per small file written."""
    rng = np.random.default_rng(1)
    idx, vals, acc = rng.integers(0, 100, 1000), rng.random(1000), np.zeros(100)
    n = 2000
    t = time.thread_time()
    for _ in range(n):
        np.add.at(acc, idx, vals)
    add_at = (time.thread_time() - t) / n * 1e6
    d = Path(tempfile.mkdtemp(dir=work, prefix="raw-"))
    n = 2000
    t = time.thread_time()
    for i in range(n):
        with open(d / f"f{i % 100}", "w", encoding="ascii") as f:
            f.write(f"{i * 12345}\n")
    write = (time.thread_time() - t) / n * 1e6
    return {"numpy_add_at_us": round(add_at, 2), "file_write_us": round(write, 2)}


def _engine(name: str, tick_s: float) -> Engine:
    hosts, leaves, spines, nics, workload = SCENARIOS[name]
    topo = generate(FabricSpec(hosts=hosts, leaves=leaves, spines=spines, nics_per_host=nics, name=f"bench-{name}"))
    return Engine(topo, preset(workload), tick_s=tick_s, start_ns=0)


def parts_run(name: str, ticks: int, warmup: int, work: Path, tick_s: float, profile: bool) -> dict[str, Any]:
    """Run one scenario in process; CPU ms per tick of each part (see module doc)."""
    eng = _engine(name, tick_s)
    root = Path(tempfile.mkdtemp(dir=work, prefix=f"views-{name}-"))
    for hs in eng.host_states.values():
        write_host_view(hs, root)
    for _ in range(warmup):
        eng.step()
        for hs in eng.host_states.values():
            write_host_view(hs, root)
    before = dict(eng.phase_ns)
    views_s = 0.0
    prof = cProfile.Profile() if profile else None
    wall0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    for _ in range(ticks):
        eng.step()
        t = time.thread_time()
        for hs in eng.host_states.values():
            write_host_view(hs, root)
        views_s += time.thread_time() - t
    if prof is not None:
        prof.disable()
    wall = (time.perf_counter() - wall0) / ticks
    ms = {k: round((eng.phase_ns[k] - before[k]) / 1e6 / ticks, 2) for k in PHASES if k != "listeners"}
    ms["views"] = round(views_s * 1e3 / ticks, 2)
    cpu = sum(v for k, v in ms.items() if k != "maxmin")  # maxmin is part of traffic
    hosts, leaves, spines, nics, workload = SCENARIOS[name]
    out: dict[str, Any] = {
        "scenario": name, "hosts": hosts, "nics_per_host": nics, "switches": leaves + spines, "workload": workload,
        "flows": len(eng.flows), "ticks": ticks, "tick_s": tick_s, "cpu_ms": round(cpu, 1), "parts_ms": ms,
        "wall_ms": round(wall * 1e3, 1), "ticks_per_s": round(1e3 / cpu, 2) if cpu else None,
        "realtime_x": round(tick_s * 1e3 / cpu, 2) if cpu else None,
    }
    eng.close()
    if prof is not None:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        out["profile"] = buf.getvalue()
    return out


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cli_run(name: str, seconds: float, warmup_s: float, work: Path, tick_s: float) -> dict[str, Any]:
    """``flowtracer sim --no-ground-truth`` as users run it: CPU share and the most ticks it fell behind, over
    ``seconds`` after ``warmup_s`` (the first ``KEEP`` + ``SPARES`` snapshots of each host are built afresh)."""
    hosts, leaves, spines, nics, workload = SCENARIOS[name]
    topo = generate(FabricSpec(hosts=hosts, leaves=leaves, spines=spines, nics_per_host=nics, name=f"bench-{name}"))
    d = Path(tempfile.mkdtemp(dir=work, prefix=f"cli-{name}-"))
    (d / "fabric.yaml").write_text(topo.to_yaml())
    cmd = [sys.executable, "-m", "flowtracer", "sim", "--topology", str(d / "fabric.yaml"), "--workload", workload,
           "--out", str(d / "out"), "--no-ground-truth", "--gnmi-ports", "free", "--tick", str(tick_s),
           "--duration", str(warmup_s + seconds)]
    with open(d / "sim.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log)
        assert proc.stdout is not None
        proc.stdout.readline()  # the ready line: from here the engine runs
        time.sleep(warmup_s)
        log.flush()
        log_from = (d / "sim.log").stat().st_size
        cpu0, t0 = _cpu_s(proc.pid), time.perf_counter()
        cpu1 = cpu0
        while proc.poll() is None:
            try:
                cpu1 = _cpu_s(proc.pid)
            except (OSError, IndexError):
                break
            time.sleep(0.2)
        proc.wait()
    behind = [int(x) for x in re.findall(r"engine is (\d+) ticks behind", (d / "sim.log").read_text()[log_from:])]
    return {"scenario": name, "hosts": hosts, "nics_per_host": nics, "workload": workload, "seconds": seconds,
            "warmup_s": warmup_s,
            "cpu_cores": round((cpu1 - cpu0) / (time.perf_counter() - t0), 3),
            "ticks_behind_max": max(behind, default=0), "exit": proc.returncode}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("parts", "cli"), default="parts")
    ap.add_argument("--only", nargs="*", choices=list(SCENARIOS), help="scenarios (default: all)")
    ap.add_argument("--ticks", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=22)
    ap.add_argument("--tick-s", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=20.0, help="cli mode: seconds measured")
    ap.add_argument("--cli-warmup", type=float, default=25.0, help="cli mode: seconds run before measuring")
    ap.add_argument("--profile", action="store_true", help="parts mode: print cProfile's top functions")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        work = Path(tmp)
        result: dict[str, Any] = {"load_avg": [round(x, 2) for x in os.getloadavg()], "mode": a.mode,
                                  "raw": raw_baselines(work), "runs": []}
        for name in a.only or list(SCENARIOS):
            r = (parts_run(name, a.ticks, a.warmup, work, a.tick_s, a.profile) if a.mode == "parts"
                 else cli_run(name, a.seconds, a.cli_warmup, work, a.tick_s))
            if "profile" in r:
                print(r.pop("profile"), file=sys.stderr)
            result["runs"].append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
        result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
