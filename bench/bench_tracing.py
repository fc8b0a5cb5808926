"""Tracing cost: trace N flows over the simulator's trace responder (sim transport) and report probes/s,
the tracer's CPU (its own thread's CPU time, responder excluded) and time to the first complete trace.

    .venv/bin/python bench/bench_tracing.py [flows] [probes_per_second]
"""

from __future__ import annotations

import random
import sys
import time

from flowtracer.collectors.agent.tracing.budget import RateGovernor, TokenBucket
from flowtracer.collectors.agent.tracing.plan import TraceFlow, TracePlanner
from flowtracer.collectors.agent.tracing.sim_probe import SimTransport
from flowtracer.collectors.agent.tracing.trace import ProbeConfig, Prober
from flowtracer.collectors.agent.tracing.tracer import Tracer
from flowtracer.schemas.addressing import port_by_address
from flowtracer.schemas.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import traces_pb2 as tpb
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import validate_workload
from flowtracer.sim.hosts.trace_responder import TraceResponder

G = 1_000_000_000


def main(n: int = 1000, rate: float = 2000.0) -> None:
    topo = generate(FabricSpec(hosts=32, nics_per_host=1, leaves=8, spines=4, link_speed_bps=400 * G,
                               host_speed_bps=400 * G))
    engine = Engine(topo, validate_workload({"seed": 1, "jobs": []}, "bench"), tick_s=1.0)
    responder = TraceResponder(engine)
    host, port = responder.start().rsplit(":", 1)
    rng = random.Random(1)
    nics = [(h.name, n_.rdma_device, n_.ip, n_.leaf.split(":")[0]) for h in topo.hosts for n_ in h.nics]
    flows = []
    for i in range(n):
        a, b = rng.sample(nics, 2)
        flows.append(TraceFlow(f"{a[0]}:{a[1]}/{i}/1", a[0], f"{a[0]}:{a[1]}", a[3], a[2], b[2],
                               rng.randrange(49152, 65536), dst_leaf=b[3]))
    prober = Prober(SimTransport((host, int(port))), ProbeConfig(timeout_ns=G // 2), port_by_address(topo),
                    TokenBucket(rate, 20), RateGovernor(rate))
    tracer = Tracer(prober, TracePlanner(refresh_ns=600 * G), lambda *_: None, max_concurrent=64)
    t0, c0 = time.monotonic(), time.thread_time()
    tracer.observe(flows)
    first = None
    done = 0
    while done < n:
        for t in tracer.step(0.05):
            done += 1
            if first is None and t.status == tpb.TRACE_STATUS_COMPLETE:
                first = time.monotonic() - t0
    wall, cpu = time.monotonic() - t0, time.thread_time() - c0
    responder.stop()
    print(f"{n} flows, budget {rate:g} probes/s: {prober.probes_sent} probes in {wall:.2f} s = "
          f"{prober.probes_sent / wall:.0f} probes/s; tracer CPU {cpu:.2f} s ({cpu / wall:.0%} of a core, "
          f"{cpu / prober.probes_sent * 1e6:.0f} us/probe); first complete trace after {first * 1e3:.1f} ms; "
          f"{tracer.completed}/{n} complete")


if __name__ == "__main__":
    main(*(int(sys.argv[1]),) if len(sys.argv) > 1 else (), *(float(sys.argv[2]),) if len(sys.argv) > 2 else ())
