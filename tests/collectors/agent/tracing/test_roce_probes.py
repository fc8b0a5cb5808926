"""RoCE-formed probes on a fabric whose leaves hash on the BTH destination QP, against a real SimRunner (its gNMI
servers and trace responder): plain UDP probes of the 5-tuple are placed by the leaves as no flow's packets are
and trace the wrong uplink; probes carrying the flow's destination QP in a BTH trace the flow's own path, and
none reaches a destination NIC."""

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
from flowtracer.collectors.agent.tracing.wiring import switch_hops
from flowtracer.fabric.addressing import port_by_address
from flowtracer.fabric.ecmp_hash import HashMode
from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import traces_pb2 as tpb
from flowtracer.sim.fabric.workload import validate_workload
from flowtracer.sim.runner import SimRunner

G = 1_000_000_000


def bth_leaves(topo: Topology) -> Topology:
    """Every leaf hashes the 5-tuple plus the BTH destination QP (Junos EVO's RoCEv2 default, Meta's E-ECMP)."""
    switches = tuple(s.model_copy(update={"hash_mode": HashMode.FIVE_TUPLE_BTH_DQP}) if s.role == "leaf" else s
                     for s in topo.switches)
    return topo.model_copy(update={"switches": switches})


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimRunner, Path]]:
    topo = bth_leaves(generate(FabricSpec(hosts=8, nics_per_host=1, leaves=4, spines=4, link_speed_bps=100 * G,
                                          host_speed_bps=100 * G, hash_seed=11)))
    wl = validate_workload({"seed": 5, "jobs": [{"channels": 4, "compute_gap": "20ms",
                                                "ops": [{"collective": "allreduce", "size": "64MiB"}]}]}, "t")
    # wait until the job opened its QPs and moved bytes
    with running_sim(topo, wl, tmp_path_factory.mktemp("sim"), lambda r: any(
            f.reported_payload for f in list(r.engine.flows.values()))) as run:  # type: ignore[union-attr]
        yield run


def flows_and_truth(runner: SimRunner) -> dict[str, tuple[TraceFlow, list[tuple[str, str]], int]]:
    """Every routed data flow: as the agent would trace it (with its destination QP), its true (switch, ingress
    port) hops, and its payload so far (bytes)."""
    eng = runner.engine
    assert eng is not None
    out = {}
    for f in list(eng.flows.values()):
        if f.path is None or f.spread is not None:
            continue
        links = [eng.fabric.links[eng.link_ids[i]] for i in f.path]
        h = f.headers
        src, dst = eng.fabric.nic_by_ip[h.src_ip], eng.fabric.nic_by_ip[h.dst_ip]
        tf = TraceFlow(f"{src.name}/{f.id}/1", src.host, src.name, src.leaf, h.src_ip, h.dst_ip, h.udp_src_port,
                       h.udp_dst_port, dst_leaf=dst.leaf, dst_qpn=h.dst_qpn)
        out[tf.flow_id] = (tf, [(lk.dst_node, lk.dst_port) for lk in links[:-1]], f.reported_payload)
    return out


def trace_all(runner: SimRunner, ready: Path, flows: list[TraceFlow], roce: bool) -> dict[str, tpb.PathTrace]:
    got: dict[str, tpb.PathTrace] = {}
    prober = Prober(SimTransport(responder_address(ready)), ProbeConfig(timeout_ns=100_000_000, retries=2, roce=roce),
                    port_by_address(runner.topology), TokenBucket(2000, 100), RateGovernor(2000), "roce-test",
                    switch_hops=switch_hops(runner.topology))
    t = Tracer(prober, TracePlanner(refresh_ns=600 * G, retry_ns=(200_000_000, G)),
               lambda fid, _leaf, tr: got.__setitem__(fid, tr) if tr is not None else None, max_concurrent=256)
    t.observe(flows)
    end = time.monotonic() + 60
    while time.monotonic() < end and not (len(got) == len(flows) and all(
            g.status == tpb.TRACE_STATUS_COMPLETE for g in got.values())):
        t.step(0.05)
    prober.transport.shutdown()  # type: ignore[attr-defined]
    return got


def share_on_true_path(got: dict[str, tpb.PathTrace], truth: dict[str, tuple[TraceFlow, list, int]]) -> float:
    """Share of the flows' bytes whose trace found their true hops."""
    right = sum(b for fid, (_f, want, b) in truth.items()
                if fid in got and [(h.switch, h.port) for h in got[fid].hops] == want)
    return right / sum(b for _f, _w, b in truth.values())


def test_roce_probes_trace_the_flows_path_and_plain_ones_do_not(sim: tuple[SimRunner, Path]) -> None:
    runner, ready = sim
    assert runner.responder is not None
    truth = flows_and_truth(runner)
    assert len(truth) >= 32
    flows = [f for f, _w, _b in truth.values()]

    plain = trace_all(runner, ready, flows, roce=False)
    assert all(t.status == tpb.TRACE_STATUS_COMPLETE for t in plain.values())
    # Complete, consistent, confidently wrong: the leaves hash a probe without BTH elsewhere for many flows
    # (those within one leaf have one path, so they are right whatever the probe).
    assert share_on_true_path(plain, truth) < 0.9

    before = runner.responder.nic_roce_probes
    roce = trace_all(runner, ready, flows, roce=True)
    assert share_on_true_path(roce, truth) >= 0.98
    assert runner.responder.nic_roce_probes == before == 0, "a RoCE-formed probe reached a destination NIC"
    # RoCE-formed traces end at the destination leaf: no hop is the destination NIC's port unreachable.
    assert all(h.icmp_type == 11 for t in roce.values() for h in t.hops)


def test_switch_hops_count_both_leaves(sim: tuple[SimRunner, Path]) -> None:
    hops = switch_hops(sim[0].topology)
    assert hops("leaf01", "leaf01") == 1
    assert hops("leaf01", "leaf02") == 3  # leaf, spine, leaf
    assert hops("leaf01", "nowhere") == 0
