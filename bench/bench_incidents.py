"""Score the incident diagnosis (stream/diagnosis/) against the simulator's fault log.

Run: ``.venv/bin/python bench/bench_incidents.py`` (``--json FILE``, ``--seeds 1,2``, ``--only NAME``).

Each scenario runs the simulator in virtual time (no servers) with the RoCE congestion model on, and
feeds the diagnosis one :class:`WindowView` per 1 s window built from the simulator's own record of
what the counters showed: link bytes per window, each egress queue's ECN marks and watermark, each
switch's availability and boot epoch (a reboot is a reset: no trusted delta that window), whether its gNMI
server was silent (fault ``gnmi_silent``: no batch, so no trusted delta and no oper status, as for a reboot), the
rolling FIM of every ECMP group, and the flows' paths, without those of a host whose agent was stopped (fault
``agent_stop``: its view was not written at one of the window's ends, so its agent has nothing for that window).
Attributed bytes come from the topology's hash model
(the ``hash`` resolver's placement), so a switch hashing with another seed than its configuration
leaves bytes unexplained. So this measures the diagnosis given perfect collection; the pipeline's own
errors (resolver, late windows) are not in it (the demo's end-to-end test covers one scenario through
the real pipeline).

Scored per fault: an incident *detects* it when its kind is the fault's and the faulty component is
among its suspects (rank 1 = top); time to detect = the window the incident opened in - the fault's
time. Precision = incidents matching a fault / incidents opened after the warm-up; recall = faults
detected / faults. An incident opened before the first fault is the workload's own condition (the ring's
collision: a real ``persistent_imbalance``) and is neither counted nor, later, held against the diagnosis.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import EcmpHashConfig, Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import preset, validate_workload
from flowtracer.stream.analytics.fim import fim
from flowtracer.stream.diagnosis.incidents import Diagnoser, Incident
from flowtracer.stream.diagnosis.localize import IncidentKind
from flowtracer.stream.diagnosis.window import CongestionObs, FabricModel, LinkObs, PathObs, WindowView, cable_of

S = 1_000_000_000
T0 = 1_800_000_000 * S
ROLLING_S = 10


@dataclass(frozen=True)
class Fault:
    """One injected fault: workload entry, when (s), and what the diagnosis should name."""

    entry: dict[str, Any]
    at_s: float
    kind: str
    component: str


@dataclass(frozen=True)
class Scenario:
    name: str
    spec: FabricSpec
    faults: tuple[Fault, ...]
    duration_s: int = 45
    #: switch -> the seed it really hashes with (its configuration says 0)
    miswired_seeds: tuple[tuple[str, int], ...] = ()


def _cable(fabric: Fabric, end: str) -> str:
    node, port = end.split(":", 1)
    for dl in fabric.links.values():
        if (dl.src_node, dl.src_port) == (node, port):
            return cable_of(dl.id)
    raise KeyError(end)


def scenarios(hosts: int, leaves: int, spines: int) -> list[Scenario]:
    spec = FabricSpec(hosts=hosts, leaves=leaves, spines=spines, name=f"f{hosts}")
    fab = Fabric(generate(spec))
    up = lambda leaf, k: f"leaf{leaf:02d}:Ethernet{hosts // leaves + k}"  # noqa: E731 - leaf uplink k (1-based)
    down = lambda spine, leaf: f"spine{spine:02d}:Ethernet{leaf}"  # noqa: E731 - spine port toward a leaf

    def degrade(end: str, at: float = 15, cap: float = 0.5) -> Fault:
        return Fault({"at": at, "degrade": end, "capacity": cap}, at, IncidentKind.DEGRADED_LINK, _cable(fab, end))

    def fail(end: str, at: float = 15) -> Fault:
        return Fault({"at": at, "link_down": end}, at, IncidentKind.FAILED_LINK, _cable(fab, end))

    def reboot(sw: str, at: float = 15, for_s: float = 4) -> Fault:
        return Fault({"at": at, "reboot": sw, "down_for": for_s}, at, IncidentKind.SWITCH_SILENT, f"switch:{sw}")

    def stop_agent(host: str, at: float = 15) -> Fault:
        return Fault({"at": at, "agent_stop": host}, at, IncidentKind.AGENT_MISSING, f"agent:{host}")

    def silence(sw: str, at: float = 15) -> Fault:
        return Fault({"at": at, "gnmi_silent": sw}, at, IncidentKind.SWITCH_SILENT, f"switch:{sw}")

    out = [
        Scenario("healthy", spec, ()),
        Scenario("agent stopped on host03", spec, (stop_agent("host03"),)),
        Scenario(f"gNMI silent on spine{spines:02d}", spec, (silence(f"spine{spines:02d}"),)),
        Scenario("degrade leaf03 uplink 1 (the demo's)", spec, (degrade(up(3, 1)),)),
        Scenario("degrade leaf01 uplink 2", spec, (degrade(up(1, 2)),)),
        Scenario("degrade spine02 downlink to leaf04", spec, (degrade(down(2, 4)),)),
        Scenario("degrade leaf02 uplink 1 to 25%", spec, (degrade(up(2, 1), cap=0.25),)),
        Scenario("fail leaf01 uplink 1", spec, (fail(up(1, 1)),)),
        Scenario("fail leaf04 uplink 2", spec, (fail(up(4, 2)),)),
        Scenario("fail spine01 downlink to leaf02", spec, (fail(down(1, 2)),)),
        Scenario("reboot spine01", spec, (reboot("spine01"),)),
        Scenario("reboot leaf02", spec, (reboot("leaf02"),)),
        Scenario("flap leaf03 uplink 2", spec,
                 tuple(Fault({"at": t, "link_down" if i % 2 == 0 else "link_up": up(3, 2)}, t,
                             IncidentKind.FAILED_LINK, _cable(fab, up(3, 2)))
                       for i, t in enumerate((15, 17, 19, 21, 23, 25)))[:1]
                 + tuple(Fault({"at": t, "link_up" if i % 2 == 0 else "link_down": up(3, 2)}, t, "", "")
                         for i, t in enumerate((17, 19, 21, 23, 25)))),
        Scenario("degrade leaf04 uplink 1 + reboot leaf01 (simultaneous)", spec,
                 (degrade(up(4, 1)), reboot("leaf01", at=15.0))),
        Scenario("degrade leaf03 uplink 1 + reboot leaf01 (simultaneous)", spec,
                 (degrade(up(3, 1)), reboot("leaf01", at=15.0))),
        Scenario("hash misconfiguration leaf02", spec, (), miswired_seeds=(("leaf02", 0x5EED),)),
    ]
    # The misconfigured switch is a fault from the start; score it as such.
    return [s if not s.miswired_seeds else
            Scenario(s.name, s.spec, (Fault({}, 0.0, IncidentKind.HASH_MISCONFIGURATION, "hash:leaf02"),),
                     s.duration_s, s.miswired_seeds) for s in out]


def _sim_topology(topo: Topology, seeds: tuple[tuple[str, int], ...]) -> Topology:
    if not seeds:
        return topo
    wrong = dict(seeds)
    switches = [sw.model_copy(update={"ecmp_hash": EcmpHashConfig(seed=wrong[sw.name])}) if sw.name in wrong else sw
                for sw in topo.switches]
    return topo.model_copy(update={"switches": switches})


def run(sc: Scenario, seed: int, work: Path, baseline: frozenset[tuple[str, str]] = frozenset()) -> dict[str, Any]:
    """One scenario; ``baseline``: (kind, top suspect) of the incidents the fault-free run of the same fabric and
    seed had (the workload's own conditions), not counted here either."""
    topo = generate(sc.spec)
    data = preset("ring-allreduce").model_dump(mode="json")
    data["seed"] = seed
    data["congestion"] = {"pfc": True}
    data["faults"] = [f.entry for f in sc.faults if f.entry]
    wl = validate_workload(data, sc.name)
    gt_dir = work / f"{abs(hash((sc.name, seed)))}"
    engine = Engine(_sim_topology(topo, sc.miswired_seeds), wl, start_ns=T0, ground_truth=gt_dir)
    engine.advance(sc.duration_s)
    engine.close()
    gt = GroundTruth.load(gt_dir)
    fabric = Fabric(topo)  # what the pipeline is told
    model = FabricModel(fabric)
    diag = Diagnoser(model)
    opened: dict[str, Incident] = {}
    first_fault = T0 + round(min((f.at_s for f in sc.faults), default=sc.duration_s) * S)
    pre_existing: set[tuple[str, str]] = set(baseline)
    for k in range(2, sc.duration_s + 1):
        view = window_view(gt, fabric, T0 + k * S)
        for inc in diag.window(view):
            if inc.detected_ns < first_fault:  # a condition of the workload itself (the ring's collision)
                pre_existing.add((inc.kind, inc.top))
            elif (inc.kind, inc.top) not in pre_existing:
                opened.setdefault(inc.id, inc)
    return score(sc, list(opened.values()), observable(sc, gt, fabric)) | {
        "conditions": sorted(pre_existing - baseline)}


def observable(sc: Scenario, gt: GroundTruth, fabric: Fabric) -> list[bool]:
    """Per fault: did it change anything the counters can show? A degraded cable with room to spare for its
    traffic queues nothing and slows nobody (the simulator records no congestion it caused); a wrong seed may
    happen to place every flow as the configured one would."""
    out = []
    for f in sc.faults:
        if f.kind == IncidentKind.DEGRADED_LINK:
            ends = set(f.component.removeprefix("cable:").split("~"))
            out.append(any(port in ends for c in gt.congestion for port in c["causes"]))
        elif f.kind == IncidentKind.HASH_MISCONFIGURATION:
            out.append(any(
                fabric.hash_path(HeaderFields(fw.flow.src_ip, fw.flow.dst_ip, fw.flow.udp_src_port,
                                              fw.flow.udp_dst_port, 17, fw.flow.dst_qpn),
                                 fw.flow.src_nic, fw.flow.dst_nic) not in fw.paths
                for fw in gt.flows_in(T0, T0 + 10 * S)))
        else:
            out.append(True)
    return out


def window_view(gt: GroundTruth, fabric: Fabric, end: int) -> WindowView:
    """One window as the processor would report it with perfect collection and the hash resolver."""
    start = end - S
    view = WindowView(end, S)
    measured = gt.link_bytes(start, end)
    try:
        before = {s: gt.counters_at(s, start) for s in fabric.switch_names}
        after = {s: gt.counters_at(s, end) for s in fabric.switch_names}
    except KeyError:
        return view
    # a batch at both ends of the window: available, not silent, and no reboot in between
    sent = {s: after[s].available and not after[s].silent for s in fabric.switch_names}
    trusted = {s: sent[s] and before[s].available and not before[s].silent
               and after[s].boot_epoch == before[s].boot_epoch for s in fabric.switch_names}
    # the agent reports a window from its host's views at both ends (none written while it is stopped)
    hosts = {h.name for h in fabric.topology.hosts}
    reporting = {h for h in hosts if gt.agent_reporting(h, start) and gt.agent_reporting(h, end)}
    attributed: dict[str, int] = defaultdict(int)
    for fw in gt.flows_in(start, end):
        f = fw.flow
        path = fabric.hash_path(HeaderFields(f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, 17, f.dst_qpn),
                                f.src_nic, f.dst_nic) or ()
        for lk in path:
            attributed[lk] += fw.bytes
        for p in fw.paths if f.src_host in reporting else ():
            view.paths.append(PathObs(f.src_nic, f.dst_nic, f.src_host, f.dst_host, p, fw.bytes // len(fw.paths)))
    for lk, dl in fabric.links.items():
        meas_sw, meas_port = (dl.src_node, dl.src_port) if dl.src_node in fabric.switch_names else (dl.dst_node,
                                                                                                   dl.dst_port)
        m = measured.get(lk, 0) if trusted[meas_sw] else None
        # as the links stage: the measuring end's oper status from the batch that closes the window, none when the
        # switch sent no batch (unavailable or silent)
        oper = after[meas_sw].oper_up.get(meas_port) if sent[meas_sw] else None
        view.links[lk] = LinkObs(lk, dl.src_node, dl.dst_node, dl.speed_bps, m, attributed.get(lk, 0),
                                 (m or 0) - attributed.get(lk, 0) if m is not None else 0, oper)
    cong = gt.congestion_in(start, end)
    for port, c in cong.ports.items():
        node, iface = port.split(":", 1)
        for dl in fabric.out_links.get(node, ()):
            if dl.src_port == iface:
                view.congestion[dl.id] = CongestionObs(c.get("ecn-marked-pkts", 0), c.get("max-queue-len", 0),
                                                       c.get("dropped-pkts", 0))
    for gid, loads in gt.group_loads(end - ROLLING_S * S, end).items():
        view.group_fim[gid] = fim(loads)
    return view


def score(sc: Scenario, incidents: list[Incident], seen: list[bool]) -> dict[str, Any]:
    faults = [f for f, ok in zip(sc.faults, seen, strict=True) if f.kind and ok]
    unobservable = [{"kind": f.kind, "component": f.component}
                    for f, ok in zip(sc.faults, seen, strict=True) if f.kind and not ok]
    matched: set[str] = set()
    per_fault = []
    for f in faults:
        best: tuple[int, Incident] | None = None
        for inc in incidents:
            ranked = [c for c, _ in inc.ranked()]
            if inc.kind == f.kind and f.component in ranked and inc.detected_ns >= T0 + round(f.at_s * S):
                r = ranked.index(f.component) + 1
                if best is None or (r, inc.detected_ns) < (best[0], best[1].detected_ns):
                    best = (r, inc)
        if best is None:
            per_fault.append({"kind": f.kind, "component": f.component, "detected": False})
            continue
        r, inc = best
        matched.add(inc.id)
        per_fault.append({"kind": f.kind, "component": f.component, "detected": True, "rank": r,
                          "time_to_detect_s": round((inc.detected_ns - T0) / S - f.at_s, 1)})
    # an incident naming the fault's component under another kind (a reboot's dead links) is still the fault
    comps = {f.component for f in faults}
    false = [i for i in incidents if i.id not in matched and not comps & set(i.suspects)]
    extra = [i for i in incidents if i.id not in matched and comps & set(i.suspects)]
    return {"scenario": sc.name, "faults": per_fault, "unobservable_faults": unobservable,
            "incidents": [{"kind": i.kind, "top": i.top, "suspects": [c for c, _ in i.ranked()[:3]],
                           "detected_s": round((i.detected_ns - T0) / S, 1)} for i in incidents],
            "false_incidents": len(false), "duplicate_incidents": len(extra)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--fabrics", default="16x4x2,32x8x4", help="hosts x leaves x spines, comma separated")
    ap.add_argument("--only", default=None, help="run scenarios whose name contains this")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-incidents-") as tmp:
        for fab in args.fabrics.split(","):
            h, lv, sp = (int(x) for x in fab.split("x"))
            baseline: dict[int, frozenset[tuple[str, str]]] = {}
            for sc in scenarios(h, lv, sp):  # "healthy" first: its incidents are the workload's conditions
                if args.only and args.only not in sc.name and sc.name != "healthy":
                    continue
                for seed in (int(x) for x in args.seeds.split(",")):
                    r = run(sc, seed, Path(tmp), baseline.get(seed, frozenset())) | {"fabric": fab, "seed": seed}
                    if sc.name == "healthy":
                        baseline[seed] = frozenset(tuple(c) for c in r["conditions"])
                    results.append(r)
                    print(json.dumps(r), flush=True)
    print(json.dumps(summarize(results), indent=1))
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "summary": summarize(results)}, indent=1))


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        for f in r["faults"]:
            by_kind[f["kind"]].append(f)
    out: dict[str, Any] = {}
    for kind, fs in sorted(by_kind.items()):
        hit = [f for f in fs if f["detected"]]
        out[kind] = {"faults": len(fs), "recall": round(len(hit) / len(fs), 3),
                     "top1": sum(f["rank"] == 1 for f in hit), "top3": sum(f["rank"] <= 3 for f in hit),
                     "ttd_s_max": max((f["time_to_detect_s"] for f in hit), default=None),
                     "ttd_s_mean": round(sum(f["time_to_detect_s"] for f in hit) / len(hit), 1) if hit else None}
    n_inc = sum(len(r["incidents"]) for r in results)
    n_false = sum(r["false_incidents"] for r in results)
    out["all"] = {"runs": len(results), "incidents": n_inc, "false_incidents": n_false,
                  "precision": round(1 - n_false / n_inc, 3) if n_inc else None,
                  "healthy_runs_with_incidents": sum(1 for r in results if r["scenario"] == "healthy"
                                                     and r["incidents"]),
                  "unobservable_faults": sum(len(r["unobservable_faults"]) for r in results)}
    return out


if __name__ == "__main__":
    main()
