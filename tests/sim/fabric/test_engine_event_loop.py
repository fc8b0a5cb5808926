"""The engine's two event loops, the vector one (default) and the plain reference, move the same bytes bit for bit.

Each case runs both on the same topology and workload in virtual time with ground truth, then compares every
ground-truth file byte for byte (flows, per-tick flow and link bytes, switch counters, events, congestion records)
and every host's QP and port counters; after every tick, each running transfer's progress, exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.congestion_scenarios import scenario
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import Workload, validate_workload

G = 1_000_000_000
START = 1_700_000_000 * G


def _mixed() -> tuple[Topology, Workload]:
    """All-to-all and ring all-reduce on two rails with background flows and faults that reroute, degrade, reboot
    and stall: transfers finishing, starting, stalling and being destroyed inside ticks."""
    topo = generate(FabricSpec(hosts=4, nics_per_host=2, leaves=4, spines=2, rails=2, link_speed_bps=100 * G,
                               host_speed_bps=100 * G))
    wl = validate_workload({
        "seed": 5,
        "jobs": [{"channels": 2, "qps_per_connection": 2, "compute_gap": "7ms", "recreate_every": "1s",
                  "ops": [{"collective": "alltoall", "size": "48MiB"}, {"collective": "allreduce", "size": "96MiB"}]}],
        "node_groups": [{"hosts": ["host02"], "nic_rate": "40G"}],
        "background": [{"flows": 3, "rate": "20G"}],
        "faults": [{"at": 0.5, "link_down": "leaf01:Ethernet3"}, {"at": 1.0, "degrade": "spine01:Ethernet2",
                                                                  "capacity": 0.3},
                   {"at": 1.25, "link_up": "leaf01:Ethernet3"}, {"at": 1.5, "reboot": "spine02", "down_for": 0.5},
                   {"at": 1.75, "nic_stall": "host03:mlx5_0"}, {"at": 2.0, "nic_resume": "host03:mlx5_0"}]},
        "event loop")
    return topo, wl


def _progress(e: Engine) -> list[tuple[float, float, float, list[int]]]:
    """Every running transfer's floats as they are (bytes done, rate, size) and its flows' reported payload."""
    return [(t.done, t.rate, t.bytes_per_flow, [f.reported_payload for f in t.flows]) for t in e.transfers]


def _hosts(e: Engine) -> dict[str, object]:
    return {name: (sorted((k, q.tx_bytes, q.rx_bytes, q.tx_packets, q.rx_packets, q.sq_psn, q.rq_psn)
                          for k, q in hs.qps.items()),
                   sorted((k, p.tx_bytes, p.rx_bytes, p.tx_packets, p.rx_packets) for k, p in hs.ports.items()),
                   len(hs.nccl_log))
            for name, hs in e.host_states.items()}


@pytest.mark.parametrize("case", ["mixed", "pause_storm"])
def test_vector_event_loop_equals_the_plain_one(case: str, tmp_path: Path) -> None:
    if case == "mixed":
        (topo, wl), ticks, tick_s = _mixed(), 10, 0.25
    else:  # the congestion model on, with PFC pauses spreading
        sc = scenario("pause_storm", stall_at=1.0, resume_at=2.0)
        topo, wl, ticks, tick_s = sc.topology, sc.workload, 3, 1.0
    fast, plain = (Engine(topo, wl, tick_s=tick_s, start_ns=START, ground_truth=tmp_path / loop, event_loop=loop)
                   for loop in ("vector", "plain"))
    for i in range(ticks):
        fast.step()
        plain.step()
        assert _progress(fast) == _progress(plain), i  # floats compared exactly, not only the whole bytes
    fast.close()
    plain.close()
    files = sorted(p.name for p in (tmp_path / "plain").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "vector").iterdir())
    for name in files:
        assert (tmp_path / "vector" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes(), name
    assert _hosts(fast) == _hosts(plain)
    assert sum(len(ln) for ln in (tmp_path / "plain" / "ticks.jsonl").read_text().splitlines()) > 0
