"""How long the ``infer`` resolver takes per window, on a small and on a 512-host x 8-NIC fabric.

Run: ``.venv/bin/python bench/bench_infer.py`` (``--only large``, ``--windows 80``, ``--qps 4``).

Synthetic evidence: every NIC opens ``--qps`` QPs to random NICs of other hosts on its rail; the
true paths come from the fabric's hash with a seed the resolver never sees; per window a flow is
idle with probability 0.3, else sends a random share of its rate (collective phases); counters are
the exact sums over the true paths (``--noise`` adds counter error; ``--coupled K`` makes sets of
K flows move identical bytes, as NCCL coupled sets do). The whole fabric is one flows partition,
the worst case for one call.

Reported per fabric (times in ms): the first window (every group new), the learning windows
(until every group settles) and the steady state (the last third of the run), each as mean / p50
/ max, and steady ms per group. Quality after 30 windows and at the end: ``accuracy`` (share of
flows whose heaviest-weighted path is the true one) and ``path_load_error`` (sum over paths of
|placed - true bytes| / all bytes); at the end also ``member_load_error`` (the same over group
members, against the counters) and the mean confidence; the state size. ``floor_ms`` is what one
dict lookup and one list append per flow cost in the same run (the hash resolver's cost, the
least any resolver pays in Python per flow) and ``steady_vs_floor`` the ratio to it;
``gemm_floor_ms`` the products a steady-state check of every group needs, ``steady_vs_gemm``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import numpy as np

from flowtracer.fabric.ecmp_hash import EcmpHash, HeaderFields
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.resolvers.contract import FlowObs
from flowtracer.stream.resolvers.infer.resolver import InferResolver

FABRICS = {
    "small": FabricSpec(hosts=16, leaves=4, spines=2, name="bench-small"),
    "large": FabricSpec(hosts=512, nics_per_host=8, rails=8, leaves=128, spines=32, name="bench-large"),
}


def build(spec: FabricSpec, qps: int, seed: int) -> tuple[Fabric, list[FlowObs], np.ndarray, list[tuple[str, ...]]]:
    rng = np.random.default_rng(seed)
    fabric = Fabric(generate(spec))
    by_rail: dict[int, list] = {}
    for ref in fabric.nics.values():
        by_rail.setdefault(ref.nic.rail, []).append(ref)
    models = {s.name: EcmpHash(seed=9001) for s in fabric.topology.switches}
    flows, truth = [], []
    for s in fabric.nics.values():
        peers = by_rail[s.nic.rail]
        for _ in range(qps):
            d = peers[int(rng.integers(len(peers)))]
            while d.host == s.host:
                d = peers[int(rng.integers(len(peers)))]
            lqpn, sport = int(rng.integers(1, 1 << 24)), int(rng.integers(49152, 65536))
            f = FlowObs(f"{s.name}/{lqpn}/0", s.name, d.name, str(s.nic.ip), str(d.nic.ip), sport, 4791, lqpn,
                        int(rng.integers(1, 1 << 24)), 0)
            path = fabric.hash_path(HeaderFields(f.src_ip, f.dst_ip, sport, 4791), s.name, d.name,
                                    hash_models=models)
            assert path is not None
            flows.append(f)
            truth.append(path)
    rate = rng.lognormal(0.0, 0.7, len(flows)) * 5e8
    return fabric, flows, rate, truth


def windows(fabric: Fabric, flows: list[FlowObs], rate: np.ndarray, truth: list[tuple[str, ...]], count: int,
            noise: float, seed: int, coupled: int = 1) -> list[tuple[list[FlowObs], dict[str, int]]]:
    """Pre-generated windows, so the timing is the resolver's alone.

    ``coupled`` > 1: consecutive flows of a NIC form sets that always move the same bytes (NCCL
    coupled sets): the evidence cannot tell them apart, only how many sit on each member.
    """
    rng = np.random.default_rng(seed)
    lead = np.arange(len(flows)) // coupled * coupled  # the flow whose bytes each flow copies
    if coupled > 1:
        rate = rate[lead]
    links = sorted(fabric.links)  # switches report idle links too: 0 bytes
    index = {link: i for i, link in enumerate(links)}
    rows = np.repeat(np.arange(len(truth)), [len(p) for p in truth])
    cols = np.array([index[link] for p in truth for link in p])
    out = []
    for _ in range(count):
        b = (rate * (rng.random(len(flows)) >= 0.3) * rng.uniform(0.3, 1.0, len(flows))).astype(np.int64)[lead]
        loads = np.bincount(cols, weights=b[rows], minlength=len(links))
        loads *= 1.0 + rng.uniform(-noise, noise, len(links))
        out.append(([replace(f, bytes=int(v)) for f, v in zip(flows, b, strict=True)],
                    dict(zip(links, loads.astype(np.int64).tolist(), strict=True))))
    return out


def accuracy(flows: list[FlowObs], out: list, truth: list[tuple[str, ...]], fabric: Fabric) -> float:
    """Share of the flows with a choice of path whose heaviest-weighted path is the true one."""
    which = [i for i, f in enumerate(flows) if len(fabric.equal_cost_paths(f.src_nic, f.dst_nic)) > 1]
    right = sum(max(out[i].paths, key=lambda pw: pw[1])[0] == truth[i] for i in which)
    return round(right / max(len(which), 1), 4)


def path_load_error(obs: list[FlowObs], out: list, truth: list[tuple[str, ...]]) -> float:
    """Sum over paths of |placed - true bytes|, over all bytes (0: every path load exact)."""
    placed: dict[tuple[str, ...], float] = {}
    true: dict[tuple[str, ...], float] = {}
    for f, p, path in zip(obs, out, truth, strict=True):
        for q, w in p.paths:
            placed[q] = placed.get(q, 0.0) + w * f.bytes
        true[path] = true.get(path, 0.0) + f.bytes
    err = sum(abs(placed.get(k, 0.0) - true.get(k, 0.0)) for k in placed.keys() | true.keys())
    return round(err / max(sum(true.values()), 1.0), 4)


def stats(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms) if ms else np.zeros(1)
    return {"mean": round(float(a.mean()), 2), "p50": round(float(np.median(a)), 2), "max": round(float(a.max()), 2)}


def bench(name: str, spec: FabricSpec, qps: int, count: int, noise: float, coupled: int) -> dict[str, object]:
    t0 = time.perf_counter()
    fabric, flows, rate, truth = build(spec, qps, seed=1)
    data = windows(fabric, flows, rate, truth, count, noise, seed=2, coupled=coupled)
    setup_s = time.perf_counter() - t0
    res = InferResolver(fabric)
    times, settled_at = [], None
    out: list = []
    at_30: dict[str, float] = {}
    for w, (obs, measured) in enumerate(data):
        t = time.perf_counter()
        out = res.resolve((w + 1) * 1_000_000_000, obs, measured)
        times.append(1000 * (time.perf_counter() - t))
        if settled_at is None and all(d.settled for d in res.diagnostics().values()):
            settled_at = w + 1
        if w + 1 == 30:  # the yardstick: per-path loads after the first 30 s (1 s windows)
            at_30 = {"accuracy": accuracy(flows, out, truth, fabric),
                     "path_load_error": path_load_error(obs, out, truth)}
    diag = res.diagnostics()
    ngroups = len(diag)
    steady = times[-max(1, count // 3):]
    learning = times[1:settled_at] if settled_at else times[1:]
    which = [i for i, p in enumerate(truth) if len(fabric.equal_cost_paths(flows[i].src_nic, flows[i].dst_nic)) > 1]
    members = {mb for g in res._groups.values() for mb in g.members}
    on_member: dict[str, float] = {}
    for f, p in zip(data[-1][0], out, strict=True):
        for q, w in p.paths:
            if q[1] in members:
                on_member[q[1]] = on_member.get(q[1], 0.0) + w * f.bytes
    measured = data[-1][1]
    member_err = sum(abs(on_member.get(mb, 0.0) - measured.get(mb, 0)) for mb in members)
    # Floors measured in the same run.
    obs = data[-1][0]
    lookup = {f.flow_id: f for f in obs}
    t = time.perf_counter()
    sink = []
    for f in obs:
        sink.append(lookup.get(f.flow_id))
    floor_ms = 1000 * (time.perf_counter() - t)
    gemm = 0.0
    for g in res._groups.values():  # the products of one steady-state check, per group
        valid = g.row_seq >= 0
        x = np.ascontiguousarray(g.x[valid][:, g.in_use])
        y = g.y[valid]
        t = time.perf_counter()
        r = y - x @ np.eye(x.shape[1], g.m)
        _ = x.T @ r, (x * x).T @ g.mask[valid]
        gemm += 1000 * (time.perf_counter() - t)
    steady_mean = float(np.mean(steady))
    return {
        "fabric": name, "hosts": spec.hosts, "nics": len(fabric.nics), "flows": len(flows), "groups": ngroups,
        "members": max(len(g.members) for g in res._groups.values()),
        "flows_per_group": round(float(np.mean([d.flows for d in diag.values()])), 1),
        "windows": count, "setup_s": round(setup_s, 1),
        "first_window_ms": round(times[0], 1), "learning_ms": stats(learning), "settled_after": settled_at,
        "steady_ms": stats(steady), "steady_ms_per_group": round(steady_mean / ngroups, 3),
        "at_30_windows": at_30,
        "accuracy": accuracy(flows, out, truth, fabric),
        "path_load_error": path_load_error(data[-1][0], out, truth),
        "member_load_error": round(member_err / max(sum(measured.get(mb, 0) for mb in members), 1), 4),
        "mean_confidence": round(float(np.mean([out[i].confidence for i in which])), 3),
        "reinfers": sum(d.reinfers for d in diag.values()),
        "state_kib": round(len(json.dumps(res.state())) / 1024, 1),
        "floor_ms": round(floor_ms, 2), "steady_vs_floor": round(steady_mean / max(floor_ms, 1e-9), 1),
        "gemm_floor_ms": round(gemm, 2), "steady_vs_gemm": round(steady_mean / max(gemm, 1e-9), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(FABRICS), help="one fabric instead of both")
    ap.add_argument("--windows", type=int, default=48, help="windows per fabric (default 48)")
    ap.add_argument("--qps", type=int, default=4, help="QPs per NIC (default 4)")
    ap.add_argument("--noise", type=float, default=0.0, help="counter error, as a share (default 0)")
    ap.add_argument("--coupled", type=int, default=1, help="flows per set moving identical bytes (default 1)")
    args = ap.parse_args()
    for name, spec in FABRICS.items():
        if args.only in (None, name):
            print(json.dumps(bench(name, spec, args.qps, args.windows, args.noise, args.coupled)), flush=True)


if __name__ == "__main__":
    main()
