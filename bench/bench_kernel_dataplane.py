"""The kernel data plane's largest real-time fabric on this machine (docs/kernel-dataplane.md).

For each fabric size (hosts / leaves / spines, one NIC per host) a ``SimRunner`` with
``RunnerOptions(dataplane="kernel")`` runs the default ring all-reduce for ``--seconds``: namespaces and
veths built by ``flowtracer.sim.kernel`` (``KernelFabric``; torn down by its own run record), traffic
paced into them, the switches' veth counters read at every tick end. Measured per size:

- setup (``SimRunner.start``: namespaces, veths, routes, sysctls) and teardown (``stop``) seconds;
- real time: each tick's completion time minus its wall-clock end (the engine computes a tick at its
  end), p50/max over the steady part, and ticks done vs ticks due at the stop (the engine's lag);
- CPU: this process (engine, traffic threads, ``ip`` children) in cores, and the whole machine's busy
  share (the veth forwarding runs in softirq, accounted wherever it lands);
- packets: frames the traffic sender sent per second and packets counted on all switch veths per second.

A size keeps real time when no steady tick completed more than one tick late and no tick was lost.
The raw limit of the same run: one Python thread ``sendto`` of the same frames into a veth of a small
kernel fabric (host -> leaf -> host), packets/s. Prints one JSON document.

    .venv/bin/python bench/bench_kernel_dataplane.py [--seconds 20] [--sizes 16/4/2 32/8/2 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from flowtracer.cmd_sim import build_workload
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.kernel.netns import KernelFabric, missing_capability, run_in_netns
from flowtracer.sim.runner import RunnerOptions, SimRunner

S = 1_000_000_000
SIZES = ("16/4/2", "32/8/2", "64/8/4", "128/16/4", "256/32/8")


def _machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def _cpu_s() -> float:
    """This process's CPU seconds plus its waited children's (the ``ip`` calls)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def raw_sendto(seconds: float = 1.5, frame_payload: int = 1024) -> dict[str, Any]:
    """One Python thread sending UDP datagrams from a host namespace to another host of a 2-host fabric
    (through the leaf's veths): the raw packets/s one sender thread reaches."""
    topo = generate(FabricSpec(hosts=2, nics_per_host=1, leaves=1, spines=1, name="raw"))
    a, b = (topo.hosts[0].nics[0], topo.hosts[1].nics[0])
    with KernelFabric(topo) as kf:
        def make(_p: Path | None) -> socket.socket:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((a.ip, 49152))
            return s

        (s,) = run_in_netns([kf.netns_path(topo.hosts[0].name)], make)
        data, dst, n = b"\0" * frame_payload, (b.ip, 4791), 0
        c0, t0 = time.thread_time(), time.monotonic()
        end = t0 + seconds
        try:
            while time.monotonic() < end:
                for _ in range(100):
                    try:
                        s.sendto(data, dst)
                        n += 1
                    except OSError:  # the receiver's port unreachable reported back: keep going
                        pass
        finally:
            s.close()
        wall, cpu = time.monotonic() - t0, time.thread_time() - c0
    return {"packets_per_s": round(n / wall), "cpu_us_per_packet": round(cpu / n * 1e6, 2),
            "payload_bytes": frame_payload}


def run_size(hosts: int, leaves: int, spines: int, seconds: float, scale: float | None, work: Path) -> dict[str, Any]:
    topo = generate(FabricSpec(hosts=hosts, nics_per_host=1, leaves=leaves, spines=spines, name=f"k{hosts}"))
    wl = build_workload("ring-allreduce", {})
    opts = RunnerOptions(dataplane="kernel", scale=scale, gnmi_ports="free", shared_port=0, ground_truth=False,
                         host_views=False, coll_log=False)
    runner = SimRunner(topo, wl, work, opts)
    late: list[tuple[int, int]] = []  # (tick end ns, completed - tick end ns)
    t0 = time.monotonic()
    runner.start()
    setup_s = time.monotonic() - t0
    out: dict[str, Any] = {"hosts": hosts, "leaves": leaves, "spines": spines, "scale": None,
                           "setup_s": round(setup_s, 2)}
    try:
        eng, dp = runner.engine, runner.dataplane
        assert eng is not None and dp is not None
        out["scale"] = dp.scale
        out["namespaces"] = len(dp.kf.plan.namespaces)
        eng.add_tick_listener(lambda t1: late.append((t1, time.time_ns() - t1)))
        time.sleep(min(4.0, seconds / 4))  # the job opens its QPs; the first ticks route them
        c0, b0, w0 = _cpu_s(), _machine_busy(), time.time_ns()
        p0 = dp.sender.packets_sent if dp.sender else 0
        k0 = sum(v[2] for v in dp.kf.read_counters().values())
        time.sleep(seconds)
        w1, c1, b1 = time.time_ns(), _cpu_s(), _machine_busy()
        p1 = dp.sender.packets_sent if dp.sender else 0
        k1 = sum(v[2] for v in dp.kf.read_counters().values())
        tick_ns = eng.tick_ns
        due = (w1 - eng.start_ns) // tick_ns
        done = (eng.now_ns - eng.start_ns) // tick_ns
        steady = sorted(d for t, d in late if w0 <= t <= w1)
        span = (w1 - w0) / S
        out.update({
            "seconds": round(span, 1), "tick_s": tick_ns / S, "ticks_due": int(due), "ticks_done": int(done),
            "tick_late_ms_p50": round(steady[len(steady) // 2] / 1e6, 1) if steady else None,
            "tick_late_ms_max": round(steady[-1] / 1e6, 1) if steady else None,
            "counter_read_ms_last": round(dp.read_s * 1e3, 1),
            "cpu_cores": round((c1 - c0) / span, 3),
            "machine_busy_share": round((b1[0] - b0[0]) / max(1, b1[1] - b0[1]), 3),
            "frames_sent_per_s": round((p1 - p0) / span),
            "switch_veth_rx_packets_per_s": round((k1 - k0) / span),
            "send_errors": dp.sender.send_errors if dp.sender else 0,
        })
        out["keeps_real_time"] = bool(steady) and steady[-1] <= tick_ns and due - done <= 1
    finally:
        t1 = time.monotonic()
        runner.stop()
        out["teardown_s"] = round(time.monotonic() - t1, 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--sizes", nargs="*", default=list(SIZES), help="hosts/leaves/spines")
    ap.add_argument("--low-scale", type=float, default=1_000_000.0,
                    help="also run the first size that fell behind (else the largest) at this scale")
    ap.add_argument("--budget-s", type=float, default=170.0, help="stop starting sizes after this long")
    a = ap.parse_args()
    missing = missing_capability()
    if missing:
        print(json.dumps({"skipped": missing}))
        return 0
    started = time.monotonic()
    raw = raw_sendto()
    runs: list[dict[str, Any]] = []
    first_bad = None
    with tempfile.TemporaryDirectory(prefix="flowtracer-kbench-") as tmp:
        for i, size in enumerate(a.sizes):
            if time.monotonic() - started + a.seconds + 15 > a.budget_s:
                runs.append({"size": size, "skipped": "time budget"})
                break
            h, lv, sp = (int(x) for x in size.split("/"))
            print(f"bench_kernel_dataplane: {size} ...", file=sys.stderr, flush=True)
            r = run_size(h, lv, sp, a.seconds, None, Path(tmp) / f"k{i}")
            runs.append(r)
            if not r.get("keeps_real_time"):
                first_bad = (h, lv, sp)
                break
        trade: dict[str, Any] | None = None
        last = first_bad or next(((r["hosts"], r["leaves"], r["spines"]) for r in reversed(runs) if "hosts" in r),
                                 None)
        if last and a.low_scale and time.monotonic() - started + a.seconds + 15 <= a.budget_s + 30:
            print(f"bench_kernel_dataplane: {last} at scale {a.low_scale:g} ...", file=sys.stderr, flush=True)
            trade = run_size(*last, a.seconds, a.low_scale, Path(tmp) / "low")
    ok = [r for r in runs if r.get("keeps_real_time")]
    print(json.dumps({"raw_sendto": raw, "runs": runs, "low_scale_run": trade,
                      "largest_real_time": ok[-1] if ok else None, "threads": threading.active_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
