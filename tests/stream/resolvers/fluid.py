"""Resolvers against the simulator's fluid model, without servers: the Engine's ticks become windows.

Each tick's flow bytes (wire bytes, as the counters count them) become FlowObs, its link bytes the
measured counters, and the Engine's routed paths the truth. The Engine hashes with the topology's
seed; the resolvers get a topology with another seed (what a wrong or unknown hash configuration
looks like), so ``hash`` is wrong wherever the seeds disagree, ``infer`` learns from counters and
``trace`` is given PathTraces built from the true paths (as an agent would publish them).

Scores per run, over the windows after the warm-up: share of bytes placed on the true path,
per-path load error (sum |placed - true| / sum true, per window, averaged), and collisions found by
the processor's collision rule on the resolver's placements, compared with those it finds on the
true placements (``true``: also a collision of the truth on the same member; ``false``: not).

``python tests/stream/resolvers/fluid.py`` prints the table in docs/stream.md.
"""

from __future__ import annotations

import sys
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from path_traces import make_trace

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import common_pb2
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import preset
from flowtracer.stream.analytics.attribution import attribute, heaviest
from flowtracer.stream.analytics.collisions import CollisionRule, find_collision, group_hop
from flowtracer.stream.resolvers.contract import FlowObs, Placement, Resolver
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.resolvers.trace import TraceConfig, TraceResolver

SEC = 1_000_000_000
START = 1_700_000_000 * SEC
ENGINE_SEED, RESOLVER_SEED = 4242, 0  # hash seeds: the fabric's, and the one the resolvers' topology claims

WORKLOADS: dict[str, dict[str, Any]] = {
    "ring-allreduce": {"name": "ring-allreduce", "size": "2GiB", "channels": 2},
    "alltoall": {"name": "alltoall", "size": "512MiB", "channels": 1},
    "mix": {"name": "ring-allreduce", "size": "2GiB", "channels": 2, "background_flows": 8,
            "background_rate": "50G"},
}


@dataclass
class Score:
    on_true: float = 0.0  # bytes on the true path
    total: float = 0.0
    errors: list[float] = field(default_factory=list)
    true_collisions: int = 0
    false_collisions: int = 0
    truth_collisions: int = 0
    split_flows_in_collisions: int = 0  # must stay 0

    def row(self) -> dict[str, float]:
        return {"on_true_path": round(self.on_true / max(self.total, 1.0), 3),
                "path_load_error": round(sum(self.errors) / max(len(self.errors), 1), 3),
                "true": self.true_collisions, "false": self.false_collisions, "truth": self.truth_collisions,
                "split_in_collisions": self.split_flows_in_collisions}


def windows(workload: str, spines: int, ticks: int) -> tuple[Fabric, list[tuple[int, list[FlowObs], dict[str, int],
                                                                                dict[str, tuple[str, ...]]]]]:
    """Run the Engine; per tick: (window end, flows, measured link bytes, true path per flow id)."""
    spec = FabricSpec(hosts=16, leaves=4, spines=spines, hash_seed=ENGINE_SEED)
    engine = Engine(generate(spec), preset(**WORKLOADS[workload], seed=3), start_ns=START, coll_log=False)
    out = []
    for _ in range(ticks):
        stats = engine.step()
        obs, truth = [], {}
        for fid, (_, wire, _) in stats.flows.items():
            f = engine.flows[fid]
            if not f.forward or f.path is None:
                continue  # CTS messages of the reverse direction: not an RDMA flow record
            h = f.headers
            o = FlowObs(f"{f.src.name}/{f.tx_qp.lqpn}/0", f.src.name, f.dst.name, h.src_ip, h.dst_ip, h.udp_src_port,
                        h.udp_dst_port, f.tx_qp.lqpn, h.dst_qpn, wire)
            obs.append(o)
            truth[o.flow_id] = tuple(engine.link_ids[i] for i in f.path)
        obs.sort(key=lambda o: o.flow_id)
        measured = {lid: int(v) for lid, v in zip(engine.link_ids, stats.link_bytes, strict=True)}
        out.append((engine.now_ns, obs, measured, truth))
    engine.close()
    return Fabric(generate(replace(spec, hash_seed=RESOLVER_SEED))), out


def collisions(fabric: Fabric, obs: list[FlowObs], placed: list[Placement | None], measured: dict[str, int],
               rule: CollisionRule) -> list[Any]:
    """The collision rule's findings on one window, as the links stage computes them."""
    named = {m.id: rule.heavy_share * m.speed_bps / 8 for g in fabric.ecmp_groups.values() for m in g.members}
    att = attribute(obs, placed, keep_flows=named)
    shares = att.links
    member_flows: dict[str, list[common_pb2.FlowRef]] = {lid: heaviest(fl, 16, named[lid])
                                                          for lid, fl in att.link_flows.items()}
    found = []
    for g in fabric.ecmp_groups.values():
        c = find_collision(g, group_hop(g, measured, shares), member_flows, SEC, rule, 0, SEC, "")
        if c is not None:
            found.append(c)
    return found


def score(resolver: str, fabric: Fabric, data: list, warmup: int, rule: CollisionRule | None = None,
          traced_share: float = 1.0, infer_input: str = "residual") -> Score:
    """Score ``resolver`` on ``data``; with ``trace``, only ``traced_share`` of the flows (by flow id) get traces,
    and the fallback is fed ``infer_input``."""
    rule = rule or CollisionRule()
    res: Resolver = (TraceResolver(fabric, TraceConfig(infer_input=infer_input)) if resolver == "trace"
                     else RESOLVERS[resolver](fabric))
    s = Score()
    traced: dict[str, int] = {}
    for n, (end, obs, measured, truth) in enumerate(data):
        if resolver == "trace":
            for f in obs:  # an agent traces each new flow, and again every 30 s
                if zlib.crc32(f.flow_id.encode()) % 1000 >= traced_share * 1000:
                    continue
                if end - traced.get(f.flow_id, -10**20) >= 30 * SEC:
                    traced[f.flow_id] = end
                    res.observe_trace(f.flow_id, make_trace(fabric, f, truth[f.flow_id], end - SEC // 2))  # type: ignore[attr-defined]
        placed = res.resolve(end, obs, measured)
        if n < warmup:
            continue
        est: dict[tuple[str, ...], float] = {}
        true: dict[tuple[str, ...], float] = {}
        for f, p in zip(obs, placed, strict=True):
            t = truth[f.flow_id]
            true[t] = true.get(t, 0.0) + f.bytes
            s.total += f.bytes
            for path, w in (p.paths if p is not None else ()):
                est[path] = est.get(path, 0.0) + w * f.bytes
                if path == t:
                    s.on_true += w * f.bytes
        if true:
            s.errors.append(sum(abs(est.get(k, 0.0) - true.get(k, 0.0)) for k in est.keys() | true.keys())
                            / sum(true.values()))
        real = {(c.group, c.link) for c in collisions(fabric, obs, [Placement.single(truth[f.flow_id]) for f in obs],
                                                      measured, CollisionRule())}
        s.truth_collisions += len(real)
        for c in collisions(fabric, obs, placed, measured, rule):
            s.split_flows_in_collisions += sum(f.link_share < 0.999 for f in c.flows)
            if (c.group, c.link) in real:
                s.true_collisions += 1
            else:
                s.false_collisions += 1
    return s


def table(ticks: int = 40, warmup: int = 10) -> list[dict[str, Any]]:
    rows = []
    for workload in WORKLOADS:
        for spines in (2, 4):
            fabric, data = windows(workload, spines, ticks)
            for resolver in ("hash", "infer", "trace"):
                rows.append({"workload": workload, "members": spines, "resolver": resolver,
                             **score(resolver, fabric, data, warmup).row()})
            for share in (0.5,):
                for feed in ("residual", "all"):
                    rows.append({"workload": workload, "members": spines, "resolver": f"trace {share:.0%} + infer ({feed})",
                                 **score("trace", fabric, data, warmup, traced_share=share, infer_input=feed).row()})
            old = CollisionRule(min_confidence=0.0, whole_share=0.0)  # the rule before certainty counted
            rows.append({"workload": workload, "members": spines, "resolver": "infer, old rule",
                         **score("infer", fabric, data, warmup, old).row()})
    return rows


if __name__ == "__main__":
    cols = ["workload", "members", "resolver", "on_true_path", "path_load_error", "true", "false", "truth"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in table(*(int(a) for a in sys.argv[1:3])):
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
        sys.stdout.flush()
