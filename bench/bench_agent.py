"""Benchmark: host agent parse + FlowBatch build for 10k QPs, and agent CPU at a 1 s interval with 2k QPs.

1. ``parse_build``: 10,000 RC QPs as ``rdma -j resource show qp`` prints them (compact JSON,
   iproute2 key order) and the matching ``rdma -j statistic qp show`` (one counter per QP, Linux
   >= 6.15 optional byte counters). Timed per window (median of ``--repeat``), in this process:
   ``json_loads`` (the stdlib decoder on the QP text alone: the raw library limit the issue's
   figure is compared with; ``msgspec_decode`` too when installed, untyped, the fastest decoder at
   hand), ``parse_res_qp`` (our parser: decode + validate into records and columns; ``parser``
   says which decoder it used), ``build_flowbatch`` (the agent's per-host step: adding the host's
   QP ends to a fresh peer directory, QP generations and deltas, peer lookup, FlowBatch assembly
   into the serialized bytes the agent sends, for one host whose 10k QPs all moved data; the peer
   host's ends are added untimed), ``parse_plus_build`` (the issue's figure, PSN path) and its
   ``ratio_to_json_loads``; then the same with per-QP counters (parsing ``rdma statistic qp show``
   too). The 1-minute load average is printed: on a shared machine the absolute numbers move with
   it, the ratio much less.
2. ``agent_cpu``: one host with 2,000 QPs in the simulator's host-view format (files on tmpfs,
   per-QP counters on), the ``sim`` source reading it through the real parsers, ``Agent.window``
   once per (virtual) second: CPU seconds of this process per window = CPU share at a 1 s interval.
   On a real host add the ``rdma`` tool's own fork/exec and netlink dump (not measured here: no
   RDMA devices on this machine).

    .venv/bin/python bench/bench_agent.py              # ~20 s on 2 cores
    .venv/bin/python bench/bench_agent.py --qps 10000 --repeat 20 --agent-qps 2000 --windows 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.host_pipeline import HostPipeline, HostSample, PipelineConfig
from flowtracer.collectors.agent.peers.matching import Endpoint, PeerDirectory
from flowtracer.collectors.agent.sources import rdma_json
from flowtracer.collectors.agent.sources.inventory import Inventory
from flowtracer.collectors.agent.sources.rdma_json import parse_res_qp, parse_stat_qp
from flowtracer.collectors.agent.sources.registry import SimSource
from flowtracer.collectors.agent.sources.sysfs import Gid, PortView, SysfsView
from flowtracer.fabric.topology import parse_topology
from flowtracer.sim.hosts.state import HostState, NicInfo, PortCounters, QpState
from flowtracer.sim.hosts.views import host_view_dir, write_host_view

T0 = 1_700_000_000_000_000_000
G = 1_000_000_000


def qp_docs(n: int, step: int) -> tuple[bytes, bytes]:
    """``rdma -j`` QP and counter documents of n RC QPs after ``step`` windows of traffic."""
    qps, ctrs = [], []
    for i in range(n):
        lqpn, rqpn = 0x1000 + i, 0x80000 + i
        pk = step * (1000 + i % 97)
        qps.append({"ifindex": 2, "ifname": "mlx5_0", "port": 1, "lqpn": lqpn, "rqpn": rqpn, "type": "RC",
                    "state": "RTS", "rq-psn": (7 * pk) & 0xFFFFFF, "sq-psn": (31 + pk) & 0xFFFFFF,
                    "path-mig-state": "MIGRATED", "pdn": 3, "pid": 4242, "comm": "python3"})
        ctrs.append({"ifindex": 2, "ifname": "mlx5_0", "port": 1, "cntn": 4 + i, "qp-type": "RC", "pid": 4242,
                     "comm": "python3", "rx_write_requests": 0, "out_of_sequence": 0, "rdma_tx_packets": pk,
                     "rdma_tx_bytes": pk * 4158, "rdma_rx_packets": 7 * pk, "rdma_rx_bytes": 7 * pk * 4158,
                     "lqpn": [lqpn]})
    dump = json.dumps
    return dump(qps, separators=(",", ":")).encode(), dump(ctrs, separators=(",", ":")).encode()


def bench_parse_build(n: int, repeat: int) -> dict[str, object]:
    topo = parse_topology("""
switches: [{name: leaf1, role: leaf}]
hosts: [{name: h1, nics: [{rdma_device: mlx5_0, netdev: eth0, ip: 10.0.0.1, leaf: "leaf1:e1"}]}]
""")
    port = PortView("mlx5_0", 1, gids=[Gid(3, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2", "eth0")])
    h2 = Endpoint("h2", "mlx5_0", 1, "10.0.0.2")
    h2_lqpns, h2_rqpns = 0x80000 + np.arange(n), 0x1000 + np.arange(n)
    docs = [qp_docs(n, s) for s in range(repeat + 1)]
    msgspec = rdma_json.msgspec
    times: dict[str, list[float]] = {}
    sizes = {}
    for mode in ("psn", "counters"):
        pipe = HostPipeline("h1", Inventory(topo), PipelineConfig(agent_id="bench"))
        for step, (qp_text, stat_text) in enumerate(docs):
            clock = time.perf_counter
            if msgspec is not None:
                tm = clock()
                msgspec.json.decode(qp_text)
                times.setdefault("msgspec_decode", []).append(clock() - tm)
            t0 = clock()
            json.loads(qp_text)
            t1 = clock()
            q = parse_res_qp(qp_text)
            t2 = clock()
            c = parse_stat_qp(stat_text) if mode == "counters" else None
            t3 = clock()
            sample = HostSample("h1", T0 + step * G, q.records, None if c is None else c.records,
                                SysfsView({("mlx5_0", 1): port}))
            peers = PeerDirectory()  # new every window, as in Agent.window
            peers.add_many(h2, h2_lqpns, h2_rqpns)  # the peer host's ends (its own prepare)
            t_build = clock()
            pipe.prepare(sample, peers)
            batches, stats = pipe.window_encoded(sample, T0 + (step - 1) * G, T0 + step * G, peers)
            out = [b.value for b in batches]
            t4 = clock()
            if step:
                assert stats.flows == n and stats.exact == (n if mode == "counters" else 0), stats
                sizes[mode] = sum(map(len, out))
                for k, v in (("json_loads", t1 - t0), ("parse_res_qp", t2 - t1), (f"parse_stat_qp_{mode}", t3 - t2),
                             (f"build_{mode}", t4 - t_build)):
                    times.setdefault(k, []).append(v)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    total = med["parse_res_qp"] + med["build_psn"]
    total_c = med["parse_res_qp"] + med["parse_stat_qp_counters"] + med["build_counters"]
    return {"qps": n, "qp_json_bytes": len(docs[0][0]), "stat_json_bytes": len(docs[0][1]),
            "flowbatch_bytes": sizes["psn"], "parser": "json" if msgspec is None else "msgspec",
            "json_loads_ms": round(med["json_loads"], 2),
            **({} if msgspec is None else {"msgspec_decode_ms": round(med["msgspec_decode"], 2)}),
            "parse_res_qp_ms": round(med["parse_res_qp"], 2),
            "build_flowbatch_ms": round(med["build_psn"], 2),
            "parse_plus_build_ms": round(total, 2), "ratio_to_json_loads": round(total / med["json_loads"], 2),
            "with_qp_counters": {"parse_stat_qp_ms": round(med["parse_stat_qp_counters"], 2),
                                 "build_flowbatch_ms": round(med["build_counters"], 2),
                                 "total_ms": round(total_c, 2)},
            "loadavg_1min": os.getloadavg()[0]}


def bench_agent_cpu(n: int, windows: int) -> dict[str, object]:
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        root = Path(tmp)
        hs = HostState("h1", timestamp_ns=T0)
        hs.nics.append(NicInfo("mlx5_0", 1, "eth0", "10.0.0.1", 400 * G))
        hs.ports[("mlx5_0", 1)] = PortCounters("mlx5_0", 1, "eth0")
        for i in range(n):
            hs.qps[("mlx5_0", 0x1000 + i)] = QpState("mlx5_0", 1, "eth0", 0x1000 + i, 0x80000 + i, "10.0.0.1",
                                                     "10.0.0.2", 0, 4242, "python3", T0)
        write_host_view(hs, root)
        ready = root / "ready.json"
        ready.write_text(json.dumps({"host_view_dirs": {"h1": str(host_view_dir(root, "h1"))}}))
        cfg = AgentConfig(source="sim", sim_endpoints=ready)

        class Null:
            def send(self, topic: str, key: bytes, value: bytes) -> None: ...
            def flush(self, timeout: float | None = None) -> bool: return True
            def close(self, timeout: float = 10.0) -> None: ...

        agent = Agent(cfg, SimSource(cfg), Null())
        agent.window(T0)
        cpu = []
        for w in range(1, windows + 1):
            with hs.lock:
                hs.timestamp_ns = T0 + w * G
                for q in hs.qps.values():
                    q.sq_psn = (q.sq_psn + 1000) & 0xFFFFFF
                    q.tx_packets += 1000
                    q.tx_bytes += 4_158_000
                p = hs.ports[("mlx5_0", 1)]
                p.tx_packets += 1000 * n
                p.tx_bytes += 4_158_000 * n
            write_host_view(hs, root)
            t = time.process_time()
            agent.window(T0 + w * G)
            cpu.append(time.process_time() - t)
        assert agent.stats.flows == n * windows
    per = statistics.median(cpu)
    return {"qps": n, "windows": windows, "cpu_ms_per_window": round(per * 1e3, 2),
            "cpu_share_at_1s_interval": f"{per * 100:.2f}%"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qps", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--agent-qps", type=int, default=2_000)
    ap.add_argument("--windows", type=int, default=20)
    a = ap.parse_args()
    print(json.dumps({"parse_build": bench_parse_build(a.qps, a.repeat),
                      "agent_cpu": bench_agent_cpu(a.agent_qps, a.windows)}, indent=1))


if __name__ == "__main__":
    main()
