"""The sim transport against a real SimRunner on the fluid model: traced paths are the simulator's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_runs import running_sim

from flowtracer.collectors.agent.tracing.budget import RateGovernor, TokenBucket
from flowtracer.collectors.agent.tracing.plan import TraceFlow, TracePlanner
from flowtracer.collectors.agent.tracing.sim_probe import SimTransport, responder_address
from flowtracer.collectors.agent.tracing.trace import ProbeConfig, Prober
from flowtracer.collectors.agent.tracing.tracer import Tracer
from flowtracer.fabric.addressing import port_by_address
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import traces_pb2 as tpb
from flowtracer.sim.fabric.workload import validate_workload
from flowtracer.sim.hosts.trace_responder import ResponderLimits
from flowtracer.sim.runner import SimRunner

G = 1_000_000_000


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimRunner, Path]]:
    topo = generate(FabricSpec(hosts=8, nics_per_host=1, leaves=4, spines=4, link_speed_bps=100 * G,
                               host_speed_bps=100 * G))
    wl = validate_workload({"seed": 3, "jobs": [{"channels": 4, "compute_gap": "20ms",
                                                "ops": [{"collective": "allreduce", "size": "64MiB"}]}]}, "t")
    # 5 s at most for the job to open its QPs
    end = time.monotonic() + 5
    with running_sim(topo, wl, tmp_path_factory.mktemp("sim"),
                     lambda r: bool(r.engine.flows) or time.monotonic() > end) as run:  # type: ignore[union-attr]
        yield run


def truth(runner: SimRunner) -> dict[str, tuple[TraceFlow, list[tuple[str, str]]]]:
    """Every routed flow direction of the simulator: as a TraceFlow, and its (switch, ingress port) hops."""
    eng = runner.engine
    assert eng is not None
    out = {}
    for f in list(eng.flows.values()):
        if f.path is None:
            continue
        links = [eng.fabric.links[eng.link_ids[i]] for i in f.path]
        h = f.headers
        src = eng.fabric.nic_by_ip[h.src_ip]
        tf = TraceFlow(f"{src.name}/{f.id}/1", src.host, src.name, src.leaf, h.src_ip, h.dst_ip,
                       h.udp_src_port, h.udp_dst_port, dst_leaf=eng.fabric.nic_by_ip[h.dst_ip].leaf)
        out[tf.flow_id] = (tf, [(lk.dst_node, lk.dst_port) for lk in links[:-1]])
    return out


def trace_all(runner: SimRunner, ready: Path, flows: list[TraceFlow], retries: int = 2, timeout_ms: int = 100,
              rate: float = 2000, max_s: float = 30) -> tuple[dict[str, tpb.PathTrace], Tracer]:
    got: dict[str, tpb.PathTrace] = {}
    prober = Prober(SimTransport(responder_address(ready)), ProbeConfig(timeout_ns=timeout_ms * 1_000_000,
                                                                         retries=retries),
                    port_by_address(runner.topology), TokenBucket(rate, 100), RateGovernor(rate), "sim-test")
    t = Tracer(prober, TracePlanner(refresh_ns=600 * G, retry_ns=(200_000_000, G)),
               lambda fid, _leaf, tr: got.__setitem__(fid, tr) if tr is not None else None, max_concurrent=256)
    t.observe(flows)
    end = time.monotonic() + max_s
    while time.monotonic() < end and not (len(got) == len(flows) and all(
            g.status == tpb.TRACE_STATUS_COMPLETE for g in got.values())):
        t.step(0.05)
    return got, t


def test_traced_paths_equal_the_simulators(sim: tuple[SimRunner, Path]) -> None:
    runner, ready = sim
    gt = truth(runner)
    assert len(gt) >= 32
    got, _ = trace_all(runner, ready, [f for f, _ in gt.values()])
    for fid, (_f, want) in gt.items():
        assert got[fid].status == tpb.TRACE_STATUS_COMPLETE
        assert [(h.switch, h.port) for h in got[fid].hops] == want


def test_icmp_loss_converges_with_retries(sim: tuple[SimRunner, Path]) -> None:
    runner, ready = sim
    assert runner.responder is not None
    runner.responder.set_limits(ResponderLimits(loss=0.2))
    try:
        gt = truth(runner)
        got, t = trace_all(runner, ready, [f for f, _ in gt.values()], retries=3, timeout_ms=50)
    finally:
        runner.responder.set_limits(ResponderLimits())
    assert t.prober.probes_lost > 0
    for fid, (_f, want) in gt.items():
        assert got[fid].status == tpb.TRACE_STATUS_COMPLETE
        assert [(h.switch, h.port) for h in got[fid].hops] == want


def test_rate_limited_responder_partial_then_complete(sim: tuple[SimRunner, Path]) -> None:
    runner, ready = sim
    assert runner.responder is not None
    runner.responder.set_limits(ResponderLimits(icmp_rate=20, icmp_burst=5))
    try:
        gt = truth(runner)
        flows = [f for f, _ in gt.values()][:24]
        got, t = trace_all(runner, ready, flows, retries=1, timeout_ms=50, max_s=40)
    finally:
        runner.responder.set_limits(ResponderLimits())
    assert t.prober.governor.cuts > 0
    assert t.traces > len(flows)  # some first traces were partial and were retried
    for f in flows:
        assert got[f.flow_id].status == tpb.TRACE_STATUS_COMPLETE
        assert [(h.switch, h.port) for h in got[f.flow_id].hops] == gt[f.flow_id][1]
