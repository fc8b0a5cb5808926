"""The kernel transport against a namespace fabric: traced paths are the kernels' own ECMP choices.

Needs root and network namespaces (skipped otherwise). Every namespace has a random run prefix
and is deleted in the fixture's teardown.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from ns_fabric import NsFabric

from flowtracer.collectors.agent.tracing.budget import RateGovernor, TokenBucket
from flowtracer.collectors.agent.tracing.plan import TraceFlow, TracePlanner
from flowtracer.collectors.agent.tracing.trace import ProbeConfig, Prober
from flowtracer.collectors.agent.tracing.tracer import Tracer
from flowtracer.collectors.agent.tracing.udp_probe import KernelTransport
from flowtracer.fabric.addressing import port_by_address
from flowtracer.fabric.topology import load_topology
from flowtracer.schemas.v1 import traces_pb2 as tpb

TOPO = Path(__file__).parents[3] / "fabric" / "tiny_topology.yaml"
SPORTS = range(49152, 49152 + 32)


def _netns_usable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "needs iproute2's ip"
    probe = subprocess.run(["ip", "netns", "add", f"ftprobe{os.getpid()}"], capture_output=True, text=True)
    if probe.returncode:
        return f"cannot create network namespaces: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"ftprobe{os.getpid()}"], capture_output=True)
    return None


_WHY = _netns_usable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")


@pytest.fixture
def fabric() -> Iterator[NsFabric]:
    f = NsFabric(load_topology(TOPO))
    try:
        yield f.build()
    finally:
        f.close()


def flows(sports: range = SPORTS) -> list[TraceFlow]:
    return [TraceFlow(f"h1:mlx5_0/{s}/1", "h1", "h1:mlx5_0", "leaf1", "10.0.0.1", "10.0.0.2", s, dst_leaf="leaf2")
            for s in sports]


def tracer(fab: NsFabric, rate: float = 500, burst: float = 50, timeout_ms: int = 300,
           retries: int = 2) -> tuple[Tracer, dict[str, tpb.PathTrace | None]]:
    got: dict[str, tpb.PathTrace | None] = {}
    prober = Prober(KernelTransport({h.name: fab.ns(h.name) for h in fab.topology.hosts}),
                    ProbeConfig(max_ttl=6, timeout_ns=timeout_ms * 1_000_000, retries=retries),
                    port_by_address(fab.topology), TokenBucket(rate, burst), RateGovernor(rate), "test")
    t = Tracer(prober, TracePlanner(refresh_ns=600 * 10**9, retry_ns=(500_000_000, 2 * 10**9)),
               lambda fid, _leaf, tr: got.__setitem__(fid, tr))
    return t, got


def hops(t: tpb.PathTrace) -> list[tuple[str, str]]:
    return [(h.switch, h.port) for h in t.hops]


def test_traced_paths_are_the_kernels_choices(fabric: NsFabric) -> None:
    t, got = tracer(fabric)
    fl = flows()
    t.observe(fl)
    t.run_until_idle(30)
    spines = set()
    for f in fl:
        tr = got[f.flow_id]
        assert tr is not None and tr.status == tpb.TRACE_STATUS_COMPLETE, tr
        want = fabric.kernel_path("h1", f.src_ip, f.dst_ip, f.udp_src_port)
        assert hops(tr) == want, f.udp_src_port
        assert [h.icmp_type for h in tr.hops] == [11, 11, 11] and tr.probes_lost == 0
        spines.add(want[1][0])
    assert spines == {"spine1", "spine2"}  # 32 ports spread over both uplinks


def test_icmp_rate_limiting_backs_off_and_gives_partial_not_wrong(fabric: NsFabric) -> None:
    for sw in ("leaf1", "spine1", "spine2", "leaf2"):
        fabric.set_icmp_limits(sw, 1000, 2)
    t, got = tracer(fabric, timeout_ms=150, retries=1)
    fl = flows()
    t.observe(fl)
    t.run_until_idle(6)
    assert t.prober.governor.cuts > 0 and t.prober.governor.rate("10.0.0.2", t.clock()) < 500
    statuses = {tr.status for tr in got.values() if tr is not None}
    assert tpb.TRACE_STATUS_PARTIAL in statuses or tpb.TRACE_STATUS_FAILED in statuses
    for f in fl:
        tr = got[f.flow_id]
        assert tr is not None
        want = fabric.kernel_path("h1", f.src_ip, f.dst_ip, f.udp_src_port)
        for h in tr.hops:  # what answered is the flow's own hop, never another path's
            if h.icmp_type == 11:
                assert (h.switch, h.port) == want[h.ttl - 1]


def test_link_down_retraces_affected_flows_onto_the_new_path(fabric: NsFabric) -> None:
    t, got = tracer(fabric)
    fl = flows(range(50000, 50016))
    t.observe(fl)
    t.run_until_idle(30)
    via2 = [f for f in fl if got[f.flow_id] is not None and hops(got[f.flow_id])[1][0] == "spine2"]  # type: ignore[index]
    assert via2
    subprocess.run(["ip", "-n", fabric.ns("leaf1"), "link", "set", "Ethernet4", "down"], check=True)
    assert t.link_changed(["leaf1", "spine2"]) == len(fl)  # every flow passes leaf1: its group shrank
    got.clear()
    t.run_until_idle(30)
    for f in fl:
        tr = got[f.flow_id]
        assert tr is not None and tr.reason == tpb.TRACE_REASON_LINK_CHANGE and tr.status == tpb.TRACE_STATUS_COMPLETE
        assert hops(tr) == fabric.kernel_path("h1", f.src_ip, f.dst_ip, f.udp_src_port)
        assert hops(tr)[1][0] == "spine1"
