"""The sim source reads each host as soon as its view for the boundary lands (``SimSource.poll``,
``Agent.window_as_ready``), not after the slowest host's: what a host's FlowBatch waits for is its own data and
the cross-host QP matching, nothing else. The batches are the ones the all-hosts-at-once ``window`` makes.
Virtual time, lockstep, as test_agent_sim_e2e.py."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.host_window import HostSample
from flowtracer.collectors.agent.sources.registry import PerHostSource, SimSource
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import validate_workload
from flowtracer.sim.hosts.state import HostState
from flowtracer.sim.hosts.views import host_view_dir, write_host_view

G = 1_000_000_000
START = 1_700_000_000 * G
GUARD_S = 120.0  # a hang guard only: each wait ends as soon as the agent has read the host


class Batches(list[pb.FlowBatch]):
    def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.append(pb.FlowBatch.FromString(value))

    def flush(self, timeout: float | None = None) -> bool:
        return True

    close = flush


class Watched(SimSource):
    """The sim source, telling which hosts it has read for which boundary."""

    def __init__(self, cfg: AgentConfig) -> None:
        super().__init__(cfg)
        self.read: set[tuple[int, str]] = set()
        self.cond = threading.Condition()

    def sample_hosts(self, at_ns: int, hosts: list[str]) -> list[HostSample]:  # type: ignore[override]
        out = super().sample_hosts(at_ns, hosts)
        with self.cond:
            self.read.update((at_ns, h) for h in hosts)
            self.cond.notify_all()
        return out


def _ready_file(path: Path, views: Path, hosts: list[str]) -> Path:
    path.write_text(json.dumps({"host_view_dirs": {h: str(host_view_dir(views, h)) for h in hosts}}))
    return path


def test_each_host_is_read_when_its_view_lands_and_the_batches_are_the_all_at_once_ones(tmp_path: Path) -> None:
    topo = generate(FabricSpec(hosts=6, nics_per_host=1, leaves=3, spines=2, link_speed_bps=100 * G,
                               host_speed_bps=100 * G))
    wl = validate_workload({"seed": 3, "jobs": [{"channels": 2, "compute_gap": "100ms", "recreate_every": "2s",
                                                 "ops": [{"collective": "allreduce", "size": "1GiB"}]}]}, "t")
    engine = Engine(topo, wl, tick_s=0.5, start_ns=START)
    hosts = list(engine.host_states)
    roots = {"all": tmp_path / "all", "each": tmp_path / "each"}
    for root in roots.values():
        for hs in engine.host_states.values():
            write_host_view(hs, root)
    cfg_all = AgentConfig(source="sim", sim_endpoints=_ready_file(tmp_path / "all.json", roots["all"], hosts),
                          agent_id="t")
    cfg_each = AgentConfig(source="sim", sim_endpoints=_ready_file(tmp_path / "each.json", roots["each"], hosts),
                           agent_id="t")
    src = Watched(cfg_each)
    assert isinstance(src, PerHostSource)
    sinks = {"all": Batches(), "each": Batches()}
    at_once = Agent(cfg_all, SimSource(cfg_all), sinks["all"], topo)
    as_ready = Agent(cfg_each, src, sinks["each"], topo)
    stop = threading.Event()
    at_once.window(START)  # baselines
    assert as_ready.window_as_ready(START, stop)
    waited: list[int] = []  # per boundary, hosts whose view was written while the agent still waited for others

    def host_by_host(boundary: int, states: list[HostState]) -> None:
        done: list[bool] = []
        t = threading.Thread(target=lambda: done.append(as_ready.window_as_ready(boundary, stop)))
        t.start()
        early = 0
        for i, hs in enumerate(states):
            write_host_view(hs, roots["each"])
            with src.cond:  # the next host's view is written only once the agent has read this one
                assert src.cond.wait_for(lambda h=hs.name: (boundary, h) in src.read, GUARD_S), hs.name
            early += i < len(states) - 1 and not done  # the last one's read may already have finished the window
        t.join(GUARD_S)
        assert done == [True]
        waited.append(early)

    def tick(t_ns: int) -> None:
        for hs in engine.host_states.values():
            write_host_view(hs, roots["all"])
        if t_ns % G:
            for hs in engine.host_states.values():
                write_host_view(hs, roots["each"])
            return
        at_once.window(t_ns)
        host_by_host(t_ns, list(engine.host_states.values()))

    engine.add_tick_listener(tick)
    engine.advance(12)  # 6 windows; the job's QPs are made anew every 2 s
    engine.close()
    assert waited == [len(hosts) - 1] * 6  # every host but the last read while the agent still waited for the rest
    assert len(sinks["each"]) == len(sinks["all"]) > 6 * len(hosts) - 1
    for b in sinks["each"]:
        b.received_ns = 0  # the agent's wall clock at the read: the only field that may differ
    for b in sinks["all"]:
        b.received_ns = 0
    key = lambda b: (b.window_end_ns, b.host, b.leaf)  # noqa: E731
    assert sorted(sinks["each"], key=key) == sorted(sinks["all"], key=key)
    assert any(f.dst_ip for b in sinks["each"] for f in b.flows)  # QPs matched across hosts


def test_poll_reads_hosts_in_the_writers_order_and_does_not_wait_for_a_stopped_one(tmp_path: Path) -> None:
    names = ["h1", "h2", "h3"]
    states = {h: HostState(h, timestamp_ns=START) for h in names}
    for hs in states.values():
        write_host_view(hs, tmp_path)
    cfg = AgentConfig(source="sim", sim_endpoints=_ready_file(tmp_path / "r.json", tmp_path, names), interval="1s")
    src = SimSource(cfg)

    def write(t_ns: int, *hosts: str) -> None:
        for h in hosts:
            states[h].timestamp_ns = t_ns
            write_host_view(states[h], tmp_path)

    b1 = START + G
    assert src.poll(b1, set(names)) == ([], [])  # nothing written for the boundary yet
    write(b1, "h3")
    assert src.poll(b1, set(names)) == ([], [])  # h1 comes first until learned otherwise: h3 waits its turn
    write(b1, "h1", "h2")
    assert src.poll(b1, set(names)) == (["h1", "h2", "h3"], [])
    # the writer's order for b1 was learned (h1, h2, h3 as polled); h2 now stops writing
    b2 = b1 + G
    write(b2, "h1")
    assert src.poll(b2, {"h2", "h3"}) == ([], [])  # h2 is one interval behind: still waited for
    write(b2 + G, "h1", "h3")  # the newest host is two intervals past h2's view: h2 is not waited for
    ready, gone = [], []
    for _ in range(SimSource.FULL_SCAN_EVERY):  # at the latest after a full scan, which refreshes "newest"
        r, g = src.poll(b2, {"h2", "h3"} - set(ready) - set(gone))
        ready += r
        gone += g
    assert (ready, gone) == (["h3"], ["h2"])
