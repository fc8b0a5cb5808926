"""One agent per host, as on a real cluster: each sees only its own QPs and learns where they go
from the QP ends the others publish through a real Kafka-protocol broker (Tansu).

16 simulated hosts, one agent each (its ready JSON lists only its host), in lockstep with the
engine (0.5 s ticks, 1 s windows, QPs recreated every 9 s); at each boundary the 16 agents run
their windows at once, in threads, as hosts do. Every flow's dst_ip is checked against the
simulator's ground truth, a new QP's first window included: its agent waits (``peer_wait``) for
the peer's table of the same boundary.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from waiting import wait_for

from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.peers.exchange import PeerExchange
from flowtracer.collectors.agent.sources.registry import SimSource
from flowtracer.collectors.kafka_sink import KafkaSink
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import validate_workload
from flowtracer.sim.hosts.views import host_view_dir, write_host_view

G = 1_000_000_000
START = 1_700_000_000 * G
WINDOWS = 20


class ListSink:
    def __init__(self) -> None:
        self.batches: list[pb.FlowBatch] = []

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.batches.append(pb.FlowBatch.FromString(value))

    def flush(self, timeout: float | None = None) -> bool:
        return True

    def close(self, timeout: float = 10.0) -> None:
        pass


def _caught_up(exchanges: dict[str, PeerExchange], max_s: float = 20.0) -> None:
    """Wait until every agent holds every other host's latest published table."""
    def behind() -> list[tuple[str, str]]:
        latest = {h: ex.publisher.last(h) for h, ex in exchanges.items()}
        return [(h, o) for h, ex in exchanges.items() for o, t in latest.items()
                if o != h and t is not None and ex.remote.seen().get(o) != t]

    try:
        wait_for(lambda: not behind(), max_s, "every agent to hold every other host's latest QP table")
    except AssertionError as e:
        raise AssertionError(f"{e}; not delivered: {behind()[:5]}") from None


@pytest.fixture(scope="module")
def run(kafka: TansuBroker) -> Iterator[tuple[GroundTruth, ListSink, dict[str, PeerExchange]]]:
    topo = generate(FabricSpec(hosts=16, nics_per_host=1, leaves=4, spines=2, link_speed_bps=100 * G,
                               host_speed_bps=100 * G))
    wl = validate_workload({
        "seed": 5,
        "jobs": [{"channels": 2, "compute_gap": "100ms", "recreate_every": "9s",
                  "ops": [{"collective": "allreduce", "size": "2GiB"}]}],
        "background": [{"flows": 3, "rate": "5G"}]}, "peers")
    topic = f"qp-ends-{time.time_ns()}"
    kafka.create_topics({topic: 1})
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    publish = KafkaSink(kafka.bootstrap, client_id="peer-exchange-test", enable_idempotence=False)
    flows = ListSink()
    exchanges: dict[str, PeerExchange] = {}
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        root = Path(tmp)
        engine = Engine(topo, wl, tick_s=0.5, start_ns=START, ground_truth=root / "gt")
        agents: list[Agent] = []
        hosts = sorted(engine.host_states)
        try:
            for hs in engine.host_states.values():
                write_host_view(hs, root / "views")
            for h in hosts:
                ready = root / f"ready-{h}.json"
                ready.write_text(json.dumps({"host_view_dirs": {h: str(host_view_dir(root / "views", h))}}))
                cfg = AgentConfig(source="sim", sim_endpoints=ready, agent_id=f"agent-{h}", kafka=kafka.bootstrap,
                                  peer_exchange=True, peer_wait="500ms")
                ex = exchanges[h] = PeerExchange(kafka.bootstrap, publish, [h], hosts, cfg.agent_id,
                                                 refresh_ns=30 * G, max_age_ns=90 * G, topic=topic).start()
                agents.append(Agent(cfg, SimSource(cfg), flows, topo, exchange=ex))
            pool = ThreadPoolExecutor(len(agents))

            def windows(t_ns: int) -> None:
                for f in [pool.submit(a.window, t_ns) for a in agents]:
                    f.result()
                _caught_up(exchanges)

            windows(START)  # baselines; each publishes its table

            def tick(t_ns: int) -> None:
                for hs in engine.host_states.values():
                    write_host_view(hs, root / "views")
                if t_ns % G == 0:
                    windows(t_ns)

            engine.add_tick_listener(tick)
            engine.advance(2 * WINDOWS)
            engine.close()
            pool.shutdown()
            yield GroundTruth.load(root / "gt"), flows, exchanges
        finally:
            for ex in exchanges.values():
                ex.close()
            publish.close(timeout=5)


def test_every_flow_gets_its_destination_from_the_other_agents(
        run: tuple[GroundTruth, ListSink, dict[str, PeerExchange]]) -> None:
    gt, flows, _ = run
    resolved = first_windows = 0
    unresolved = []
    for b in flows.batches:
        start, end = b.window_start_ns, b.window_end_ns
        truth = {(w.flow.src_host, w.flow.src_device, w.flow.src_qpn): w.flow for w in gt.flows_in(start, end)}
        for f in b.flows:
            if not f.tx_bytes:
                continue
            fi = truth[(b.host, f.rdma_device, f.lqpn)]
            first_windows += fi.created_ns >= start
            if f.dst_ip:
                assert (f.src_ip, f.dst_ip, f.udp_src_port, f.rqpn) == (fi.src_ip, fi.dst_ip, fi.udp_src_port,
                                                                        fi.dst_qpn)
                resolved += 1
            else:
                # A QP older than the window is in its peer's table of the previous boundary, which
                # every agent held (_caught_up): it must resolve. In the window the QP was made in,
                # its agent waited up to peer_wait for the peer's table; on a loaded machine that can
                # run out, rarely (without the wait, every first window would miss).
                assert fi.created_ns >= start, (b.host, start, f.lqpn)
                unresolved.append((b.host, start, f.lqpn))
    # every host's peers are remote (one NIC per host): without the exchange none would resolve
    assert resolved > WINDOWS * 16 and first_windows > 100
    assert len(unresolved) <= first_windows // 10, unresolved


def test_each_agent_holds_every_other_hosts_table_and_only_those(
        run: tuple[GroundTruth, ListSink, dict[str, PeerExchange]]) -> None:
    _, _, exchanges = run
    hosts = set(exchanges)
    for h, ex in exchanges.items():
        assert set(ex.remote.seen()) == hosts - {h}
        assert ex.remote.ignored >= 1 and ex.remote.malformed == 0  # its own tables came back and were ignored
