"""Agent against the simulator: 16 hosts, 30 one-second windows, checked against ground truth.

The engine runs in virtual time (0.5 s ticks); after every tick each host's view is written twice,
with per-QP counters (Linux >= 6.15) and without (PSN estimates), and at every 1 s boundary two
agents (one per view root, each acting for all 16 hosts) sample through the real parsers. Lockstep
keeps the run short (seconds) and exact: every window is sampled at its boundary.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.sources.registry import SimSource
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import validate_workload
from flowtracer.sim.hosts.views import host_view_dir, write_host_view

G = 1_000_000_000
START = 1_700_000_000 * G
WINDOWS = 30


class ListSink:
    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, pb.FlowBatch]] = []

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.records.append((topic, key, pb.FlowBatch.FromString(value)))

    def flush(self, timeout: float | None = None) -> bool:
        return True

    def close(self, timeout: float = 10.0) -> None:
        pass


@pytest.fixture(scope="module")
def run() -> Iterator[tuple[GroundTruth, dict[str, ListSink], object]]:
    topo = generate(FabricSpec(hosts=16, nics_per_host=1, leaves=4, spines=2, link_speed_bps=100 * G,
                               host_speed_bps=100 * G))
    wl = validate_workload({
        "seed": 11,
        "jobs": [{"channels": 2, "compute_gap": "100ms", "recreate_every": "9s",
                  "ops": [{"collective": "allreduce", "size": "2GiB"}]}],
        "background": [{"flows": 3, "rate": "5G"}]}, "e2e")
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None  # host views are metadata-heavy: tmpfs
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        root = Path(tmp)
        engine = Engine(topo, wl, tick_s=0.5, start_ns=START, ground_truth=root / "gt")
        sinks: dict[str, ListSink] = {}
        agents: dict[str, Agent] = {}
        for mode in ("counters", "psn"):
            views = root / mode
            for hs in engine.host_states.values():
                write_host_view(hs, views, qp_counters=mode == "counters")
            ready = root / f"ready-{mode}.json"
            ready.write_text(json.dumps({"host_view_dirs": {h: str(host_view_dir(views, h))
                                                            for h in engine.host_states}}))
            cfg = AgentConfig(source="sim", sim_endpoints=ready, agent_id=f"e2e-{mode}")
            sinks[mode] = ListSink()
            agents[mode] = Agent(cfg, SimSource(cfg), sinks[mode], topo)
            agents[mode].window(START)  # baselines

        def tick(t_ns: int) -> None:
            for mode in ("counters", "psn"):
                for hs in engine.host_states.values():
                    write_host_view(hs, root / mode, qp_counters=mode == "counters")
            if t_ns % G == 0:
                for a in agents.values():
                    a.window(t_ns)

        engine.add_tick_listener(tick)
        engine.advance(2 * WINDOWS)
        engine.close()
        yield GroundTruth.load(root / "gt"), sinks, topo


def _by_window(sink: ListSink) -> dict[int, list[pb.FlowBatch]]:
    out: dict[int, list[pb.FlowBatch]] = {}
    for _topic, key, b in sink.records:
        assert key.decode() == b.leaf  # keyed by the leaf the NICs attach to
        out.setdefault(b.window_start_ns, []).append(b)
    return out


def _check(gt: GroundTruth, sink: ListSink, exact: bool) -> tuple[int, int]:
    windows = _by_window(sink)
    assert sorted(windows) == [START + i * G for i in range(WINDOWS)]
    checked = tagged = 0
    for start, batches in windows.items():
        end = start + G
        assert len(batches) == 16 and {b.window_end_ns for b in batches} == {end}
        truth = {(w.flow.src_host, w.flow.src_device, w.flow.src_qpn): w for w in gt.flows_in(start, end)}
        seen = set()
        for b in batches:
            for f in b.flows:
                if not f.tx_bytes:
                    continue  # a QP that only received: its bytes are its peer's flow
                w = truth[(b.host, f.rdma_device, f.lqpn)]
                seen.add((b.host, f.rdma_device, f.lqpn))
                fi = w.flow
                assert (f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, f.rqpn) == (
                    fi.src_ip, fi.dst_ip, fi.udp_src_port, fi.udp_dst_port, fi.dst_qpn)
                assert f.job_id == fi.job  # read from the host view's proc/<pid>/cgroup, as on a Slurm host
                if exact:
                    assert (f.byte_source, f.tx_bytes, f.tx_packets) == (pb.BYTE_SOURCE_QP_COUNTER, w.bytes, w.packets)
                else:
                    assert f.byte_source == pb.BYTE_SOURCE_PSN_ESTIMATE and f.tx_packets == w.packets
                    assert abs(f.tx_bytes - w.bytes) <= f.byte_error_bound < f.tx_packets * 4096
                if fi.direction == "data" and fi.kind != "background":
                    assert (f.nccl.comm_id, f.nccl.rank, f.nccl.peer_rank, f.nccl.channel) == (
                        fi.comm_id, fi.src_rank, fi.dst_rank, fi.channel)
                    assert f.nccl.collective == "AllReduce"
                    tagged += 1
                checked += 1
        # Every flow whose QP lived through the whole window is reported.
        for key, w in truth.items():
            fi = w.flow
            lived = fi.created_ns <= start and (fi.destroyed_ns is None or fi.destroyed_ns > end)
            if lived:
                assert key in seen, (start, key)
    return checked, tagged


def test_per_flow_bytes_equal_ground_truth_with_per_qp_counters(run: tuple[GroundTruth, dict[str, ListSink],
                                                                           object]) -> None:
    gt, sinks, _ = run
    checked, tagged = _check(gt, sinks["counters"], exact=True)
    assert checked > 30 * 16 and tagged > 30 * 16


def test_psn_estimates_stay_within_their_error_bound(run: tuple[GroundTruth, dict[str, ListSink], object]) -> None:
    gt, sinks, _ = run
    checked, _ = _check(gt, sinks["psn"], exact=False)
    assert checked > 30 * 16


def test_port_totals_and_sequences(run: tuple[GroundTruth, dict[str, ListSink], object]) -> None:
    gt, sinks, _ = run
    sent: dict[tuple[int, str], int] = {}
    for i in range(WINDOWS):
        start = START + i * G
        for w in gt.flows_in(start, start + G):
            sent[(start, w.flow.src_host)] = sent.get((start, w.flow.src_host), 0) + w.bytes
    for sink in sinks.values():
        seqs: dict[tuple[str, str], list[int]] = {}
        for _t, _k, b in sink.records:
            seqs.setdefault((b.host, b.leaf), []).append(b.sequence)
            (p,) = b.ports
            # sysfs counts 4-byte words: the window's bytes are known to within 4
            assert abs(p.tx_bytes - sent.get((b.window_start_ns, b.host), 0)) < 4
        assert all(v == list(range(1, WINDOWS + 1)) for v in seqs.values())
