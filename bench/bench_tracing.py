"""Path tracing cost (docs/tracing.md): the tracer's probes/s and CPU per probe on both transports, each
against a raw loop of the same sockets in the same run, and the time to first placement.

- **sim transport**: the simulator's trace responder (``sim/hosts/trace_responder.py``) runs in a child
  process (as ``flowtracer sim`` would); 1,000 flows of one host, 64 traces at once, at a 2,000 probes/s
  budget and an unlimited one. Raw limit: a bare loop keeping 64 requests in flight on one loopback UDP
  socket to the same responder (``send`` + ``recv`` + JSON), probes/s and CPU per probe.
- **kernel transport**: a 16-host namespace fabric built with ``flowtracer.sim.kernel.KernelFabric`` (torn
  down by its run record); 256 flows of one host, real UDP probes from its namespace, answered by the
  switches' ICMP time exceeded. Raw limit: 64 sockets in the same namespace, each with a TTL-1 probe in
  flight, ``send`` + ``poll`` + ``recvmsg(MSG_ERRQUEUE)``.
- **time to first placement**, sim transport, flows of one host seen at once by ``Tracer.observe``: (a) the
  first complete trace, (b) every flow traced. At a high budget (b) is measured; at the default 50
  probes/s it is measured for ``--window`` seconds and the rest projected as flows x probes per trace /
  achieved probes/s (the arithmetic: flows x ~2.8 / 50).

CPU is the tracer thread's own (``thread_time``). Prints one JSON document.

    .venv/bin/python bench/bench_tracing.py [--quick] [--no-kernel]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import random
import select
import socket
import sys
import time
from typing import Any

from flowtracer.collectors.agent.tracing.budget import RateGovernor, TokenBucket
from flowtracer.collectors.agent.tracing.plan import TraceFlow, TracePlanner
from flowtracer.collectors.agent.tracing.trace import ProbeConfig, Prober, Transport
from flowtracer.collectors.agent.tracing.tracer import Tracer
from flowtracer.fabric.addressing import port_by_address
from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import traces_pb2 as tpb

G = 1_000_000_000
SIM_FABRIC = FabricSpec(hosts=32, nics_per_host=1, leaves=8, spines=4, link_speed_bps=400 * G,
                        host_speed_bps=400 * G)


def _serve_responder(conn: Any) -> None:
    """Child process: a trace responder on the bench fabric until the parent closes the pipe."""
    from flowtracer.sim.fabric.engine import Engine
    from flowtracer.sim.fabric.workload import validate_workload
    from flowtracer.sim.hosts.trace_responder import TraceResponder

    engine = Engine(generate(SIM_FABRIC), validate_workload({"seed": 1, "jobs": []}, "bench"), tick_s=1.0)
    r = TraceResponder(engine)
    conn.send(r.start())
    with contextlib.suppress(EOFError):
        conn.recv()
    r.stop()


def one_host_flows(topo: Topology, n: int, seed: int = 1) -> list[TraceFlow]:
    """``n`` flows of the first host to random other NICs, random UDP source ports (unique)."""
    rng = random.Random(seed)
    h = topo.hosts[0]
    nic = h.nics[0]
    others = [(x, x.leaf.split(":")[0]) for hh in topo.hosts[1:] for x in hh.nics]
    ports = rng.sample(range(1024, 65536), n)
    out = []
    for i in range(n):
        d, leaf = rng.choice(others)
        out.append(TraceFlow(f"{h.name}:{nic.rdma_device}/{i}/1", h.name, f"{h.name}:{nic.rdma_device}",
                             nic.leaf.split(":")[0], nic.ip, d.ip, ports[i], dst_leaf=leaf))
    return out


def run_tracer(transport: Transport, topo: Topology, flows: list[TraceFlow], rate: float, burst: float = 20,
               max_s: float = 120.0, stop_after_s: float | None = None) -> dict[str, Any]:
    """Trace ``flows`` (seen at once) to the end or for ``stop_after_s``; probes/s, CPU, first/all times."""
    prober = Prober(transport, ProbeConfig(timeout_ns=G // 2), port_by_address(topo), TokenBucket(rate, burst),
                    RateGovernor(rate))
    tracer = Tracer(prober, TracePlanner(refresh_ns=3600 * G), lambda *_: None, max_concurrent=64)
    t0, c0 = time.monotonic(), time.thread_time()
    tracer.observe(flows)
    first = None
    done = 0
    end = t0 + (stop_after_s if stop_after_s is not None else max_s)
    while done < len(flows) and time.monotonic() < end:
        for t in tracer.step(0.05):
            done += 1
            if first is None and t.status == tpb.TRACE_STATUS_COMPLETE:
                first = time.monotonic() - t0
    wall, cpu = time.monotonic() - t0, time.thread_time() - c0
    sent = prober.probes_sent
    probes_per_trace = sent / done if done else None
    return {"flows": len(flows), "budget_per_s": rate, "traced": done, "complete": tracer.completed,
            "probes": sent, "seconds": round(wall, 2), "probes_per_s": round(sent / wall),
            "cpu_share": round(cpu / wall, 3), "cpu_us_per_probe": round(cpu / sent * 1e6, 1) if sent else None,
            "probes_per_trace": round(probes_per_trace, 2) if probes_per_trace else None,
            "first_complete_s": round(first, 4) if first is not None else None,
            "all_traced_s": round(wall, 2) if done == len(flows) else None}


def raw_sim(address: tuple[str, int], flows: list[TraceFlow], probes: int, window: int = 64) -> dict[str, Any]:
    """The bare loop: ``window`` JSON requests in flight on one socket to the responder, one new per answer."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(address)
    s.setblocking(False)
    sent = got = 0

    def send() -> None:
        nonlocal sent
        f = flows[sent % len(flows)]
        s.send(json.dumps({"id": sent, "src": f.src_ip, "dst": f.dst_ip, "sport": f.udp_src_port,
                           "dport": f.udp_dst_port, "ttl": 1 + sent % 3}).encode())
        sent += 1

    t0, c0 = time.monotonic(), time.thread_time()
    for _ in range(window):
        send()
    while got < probes and time.monotonic() - t0 < 30:
        r, _, _ = select.select([s], [], [], 0.5)
        if not r:
            break
        while True:
            try:
                json.loads(s.recv(2048))
            except BlockingIOError:
                break
            got += 1
            if sent < probes:
                send()
    wall, cpu = time.monotonic() - t0, time.thread_time() - c0
    s.close()
    return {"probes": got, "probes_per_s": round(got / wall), "cpu_us_per_probe": round(cpu / got * 1e6, 1)}


def sim_part(quick: bool, window_s: float) -> dict[str, Any]:
    from flowtracer.collectors.agent.tracing.sim_probe import SimTransport

    topo = generate(SIM_FABRIC)
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve_responder, args=(child,), daemon=True)
    proc.start()
    try:
        host, port = parent.recv().rsplit(":", 1)
        addr = (host, int(port))
        out: dict[str, Any] = {}
        flows = one_host_flows(topo, 1000)
        out["raw"] = raw_sim(addr, flows, 3000)
        out["tracer_2000"] = run_tracer(SimTransport(addr), topo, flows, 2000)
        out["tracer_unlimited"] = run_tracer(SimTransport(addr), topo, one_host_flows(topo, 1000, seed=2), 1e6,
                                             burst=64)
        ttfp = []
        for n in (1000,) if quick else (1000, 10_000):
            fl = one_host_flows(topo, n, seed=3)
            hi = run_tracer(SimTransport(addr), topo, fl, 20_000, burst=64)
            lo = run_tracer(SimTransport(addr), topo, fl, 50, stop_after_s=window_s)
            ppt = hi["probes_per_trace"] or 0
            lo["all_traced_s_projected"] = round(n * ppt / lo["probes_per_s"], 1) if lo["probes_per_s"] else None
            lo["all_traced_s_arithmetic"] = round(n * ppt / 50, 1)
            ttfp.append({"flows": n, "high": hi, "default": lo})
        out["time_to_first_placement"] = ttfp
        return out
    finally:
        parent.close()
        proc.join(10)
        if proc.is_alive():
            proc.kill()


def raw_kernel(kf: Any, topo: Topology, flows: list[TraceFlow], probes: int, window: int = 64) -> dict[str, Any]:
    """``window`` sockets in the host's namespace, each with one TTL-1 probe in flight; answer -> next probe."""
    import select as sel

    from flowtracer.collectors.agent.tracing.udp_probe import IP_RECVERR, MSG_ERRQUEUE
    from flowtracer.sim.kernel.netns import run_in_netns

    def make(f: TraceFlow) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_IP, IP_RECVERR, 1)
        s.setsockopt(socket.SOL_IP, socket.IP_TTL, 1)
        s.bind((f.src_ip, 0))
        s.connect((f.dst_ip, f.udp_dst_port))
        s.setblocking(False)
        return s

    ns = kf.netns_path(flows[0].host)
    socks = run_in_netns([ns], lambda _p: [make(f) for f in flows[:window]])[0]
    by_fd = {s.fileno(): s for s in socks}
    p = sel.poll()
    for s in socks:
        p.register(s.fileno(), sel.POLLERR)
    sent = got = 0
    t0, c0 = time.monotonic(), time.thread_time()
    for s in socks:
        s.send(b"\0" * 16)
        sent += 1
    while got < probes and time.monotonic() - t0 < 30:
        ev = p.poll(500)
        if not ev:
            break
        for fd, _ in ev:
            s = by_fd[fd]
            try:
                s.recvmsg(64, 512, MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except OSError:
                continue
            got += 1
            if sent < probes:
                s.send(b"\0" * 16)
                sent += 1
    wall, cpu = time.monotonic() - t0, time.thread_time() - c0
    for s in socks:
        s.close()
    return {"probes": got, "probes_per_s": round(got / wall), "cpu_us_per_probe": round(cpu / got * 1e6, 1)}


def kernel_part() -> dict[str, Any]:
    from flowtracer.collectors.agent.tracing.udp_probe import KernelTransport
    from flowtracer.sim.kernel.netns import KernelFabric, missing_capability

    missing = missing_capability()
    if missing:
        return {"skipped": missing}
    topo = generate(FabricSpec(hosts=16, nics_per_host=1, leaves=4, spines=2, name="trace"))
    with KernelFabric(topo) as kf:
        flows = one_host_flows(topo, 256)
        raw = raw_kernel(kf, topo, flows, 3000)
        netns = {h.name: str(kf.netns_path(h.name)) for h in topo.hosts}
        tr = KernelTransport(netns)
        try:
            ours = run_tracer(tr, topo, flows, 1e6, burst=64)
        finally:
            for s in list(tr._socks.values()):
                tr.close(s)
    return {"fabric": "16 hosts / 4 leaves / 2 spines", "raw": raw, "tracer_unlimited": ours}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1k flows only for the time to first placement")
    ap.add_argument("--no-kernel", action="store_true")
    ap.add_argument("--window", type=float, default=6.0, help="seconds measured at the default budget")
    a = ap.parse_args()
    out = {"sim": sim_part(a.quick, 3.0 if a.quick else a.window)}
    out["kernel"] = {"skipped": "--no-kernel"} if a.no_kernel else kernel_part()
    for side in ("sim", "kernel"):
        d = out[side]
        if "raw" in d and "tracer_unlimited" in d:
            d["ratio_probes_per_s"] = round(d["tracer_unlimited"]["probes_per_s"] / d["raw"]["probes_per_s"], 3)
            d["ratio_cpu_per_probe"] = round(d["tracer_unlimited"]["cpu_us_per_probe"] / d["raw"]["cpu_us_per_probe"],
                                             2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
