"""Routing strategies the what-if replays recorded flows under: where each flow's bytes go (pure).

A strategy maps every flow of the replayed range (``FlowDemand``: its identity and bytes over the
range) to a ``Route``: one or more sub-flows (QPs), each a share of the flow's bytes spread over
equal-cost paths with weights. Placements are per flow for the whole range, as they are on a
fabric: a flow keeps its 5-tuple (so its ECMP path) for its life, a plan is configured once.
Strategies that look at load use the flows' bytes over the range as their rates.

Strategies (``NAME[:key=value,...]`` on the command line):

- ``ecmp``: every switch hashes with its configured model: the baseline, what the recording
  measured. ``seed``, ``fields`` (joined with ``+``), ``algorithm`` override every switch's model;
  ``draw`` D > 0 renumbers the QPs as after a job restart (each NIC's numbers shifted by a random
  offset; the UDP source port is Linux's function of the two QP numbers).
- ``e-ecmp``: ECMP whose hash also reads the RoCE destination QP (Meta's E-ECMP); same parameters.
- ``static-dst``: destination-based pinning (FlowTracer's static configuration): at every switch,
  flows to the i-th NIC of a leaf (natural name order) take live member i mod k, whatever the
  traffic. ``by=traffic``: the pinning an operator would configure from the recording: per source
  leaf and destination NIC, heaviest first, the switch path whose busiest fabric link would be
  least utilized (one static route per destination on each leaf; the plan lists them).
- ``sport-plan``: source-port planning (RePaC): heaviest flow first, each to the path whose busiest
  fabric link would be least utilized, then the first UDP source port from its own on that the
  switches' hashes send there (found through the hashes' linearity, verified with the real hash).
  The plan lists the new port and the flow label that sets it; ``field=dst_qpn`` plans
  destination QP numbers instead, for hashes that read them.
- ``qp-scale``: ``n`` QPs per connection (default 4), messages round-robin over them: n sub-flows
  of 1/n of the bytes with QP numbers as the NIC hands them out (a connection's QPs consecutive),
  each hashed by ECMP; the hash parameters of ``ecmp`` apply.
- ``spray``: per-packet spraying (PRIME-like): every switch splits every flow evenly over its live
  members.
- ``spray-adaptive``: congestion-aware spraying: each flow is cut in ``chunks`` equal parts
  (default 32); round by round, heaviest flow first, a part goes to the path whose busiest fabric
  link (load over capacity, a degraded link at its reduced capacity) would be least utilized.
- ``least-utilized``: a performance-aware policy (Contra-like): flows in arrival order, each pinned
  to the path whose busiest fabric link is least utilized given the flows placed before it (load
  information is assumed to travel faster than flows arrive: no herding).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowtracer.fabric.ecmp_hash import EcmpHash, HashAlgorithm, HashField
from flowtracer.fabric.routing import natural_key
from flowtracer.whatif.fabric import ReplayFabric
from flowtracer.whatif.placement import (
    QpNumbers,
    best_path,
    hash_models,
    headers_of,
    place_load,
    single_path,
)
from flowtracer.whatif.routes import FlowDemand, Route, SubFlow
from flowtracer.whatif.source_ports import Hop, Planner, flow_label_for


class StrategyError(ValueError):
    """A strategy name or parameter is wrong; ``str()`` says which and lists what is known."""


@dataclass(frozen=True)
class StrategySpec:
    """A strategy and its parameters, as given on the command line (``NAME[:key=value,...]``)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        if not self.params:
            return self.name
        return self.name + ":" + ",".join(f"{k}={_show(v)}" for k, v in sorted(self.params.items()))


def _show(v: Any) -> str:
    if isinstance(v, tuple):
        return "+".join(str(x) for x in v)
    return str(v)


# -- parameters ----------------------------------------------------------------------------------------


def _int(v: str) -> int:
    return int(v, 0)


def _by(v: str) -> str:
    if v not in ("ordinal", "traffic"):
        raise ValueError(v)
    return v


def _fields(v: str) -> tuple[HashField, ...]:
    return tuple(HashField(x.strip()) for x in v.replace(",", "+").split("+") if x.strip())


_HASH_PARAMS: dict[str, Callable[[str], Any]] = {"seed": _int, "fields": _fields, "algorithm": HashAlgorithm,
                                                 "draw": _int}


@dataclass(frozen=True)
class StrategyInfo:
    fn: Callable[[Sequence[FlowDemand], ReplayFabric, Mapping[str, Any]], dict[str, Route]]
    params: Mapping[str, Callable[[str], Any]]
    summary: str


def parse_strategy(text: str) -> StrategySpec:
    """``NAME`` or ``NAME:key=value[,key=value]`` (``fields`` joined with ``+``)."""
    name, _, rest = text.strip().partition(":")
    info = STRATEGIES.get(name)
    if info is None:
        raise StrategyError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
    params: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            # "fields=a,b" was split on the comma: glue bare field names back onto fields.
            if "fields" in params and key in {f.value for f in HashField}:
                params["fields"] = (*params["fields"], HashField(key))
                continue
            raise StrategyError(f"strategy {text!r}: {part!r} is not key=value")
        conv = info.params.get(key)
        if conv is None:
            known = ", ".join(info.params) or "none"
            raise StrategyError(f"strategy {text!r}: unknown parameter {key!r} (parameters of {name}: {known})")
        try:
            params[key] = conv(value)
        except ValueError:
            raise StrategyError(f"strategy {text!r}: bad value {value!r} for {key}") from None
    spec = StrategySpec(name, params)
    if name == "qp-scale" and params.get("n", 4) < 1:
        raise StrategyError(f"strategy {text!r}: n must be at least 1")
    if name == "spray-adaptive" and params.get("chunks", 32) < 1:
        raise StrategyError(f"strategy {text!r}: chunks must be at least 1")
    if name == "sport-plan" and params.get("field", HashField.UDP_SRC_PORT) not in (HashField.UDP_SRC_PORT,
                                                                                     HashField.DST_QPN):
        raise StrategyError(f"strategy {text!r}: field must be udp_src_port or dst_qpn")
    return spec


def route_all(spec: StrategySpec, flows: Sequence[FlowDemand], rf: ReplayFabric) -> dict[str, Route]:
    """Routes of every flow under ``spec`` (keyed by flow id)."""
    return STRATEGIES[spec.name].fn(flows, rf, spec.params)


# -- strategies ----------------------------------------------------------------------------------------


def ecmp(flows: Sequence[FlowDemand], rf: ReplayFabric, params: Mapping[str, Any]) -> dict[str, Route]:
    models = hash_models(rf, params)
    draw = int(params.get("draw", 0))
    qpns = QpNumbers(flows)
    out = {}
    for d in flows:
        f = d.flow
        h = qpns.headers(f, 0, 1, draw)
        path = rf.fabric.hash_path(h, f.src_nic, f.dst_nic, down=rf.down, hash_models=models)
        out[f.flow_id] = Route((SubFlow(1.0, single_path(path), h.udp_src_port, h.dst_qpn),))
    return out


def e_ecmp(flows: Sequence[FlowDemand], rf: ReplayFabric, params: Mapping[str, Any]) -> dict[str, Route]:
    p = dict(params)
    fields = p.get("fields")
    per_switch = {sw: rf.fabric.hash_model(sw).fields for sw in rf.fabric.switch_names}
    if fields is None and len(set(per_switch.values())) == 1:
        fields = next(iter(per_switch.values()))
    if fields is not None:
        p["fields"] = tuple(fields) + (() if HashField.DST_QPN in fields else (HashField.DST_QPN,))
        return ecmp(flows, rf, p)
    # Switches hash on different fields: add dst_qpn to each one's own list.
    models = {sw: dataclasses.replace(m, fields=m.fields + (() if HashField.DST_QPN in m.fields
                                                           else (HashField.DST_QPN,)))
              for sw, m in hash_models(rf, p).items()}
    out = {}
    for d in flows:
        h = headers_of(d.flow)
        path = rf.fabric.hash_path(h, d.flow.src_nic, d.flow.dst_nic, down=rf.down, hash_models=models)
        out[d.flow.flow_id] = Route((SubFlow(1.0, single_path(path), h.udp_src_port, h.dst_qpn),))
    return out


def static_dst(flows: Sequence[FlowDemand], rf: ReplayFabric, params: Mapping[str, Any]) -> dict[str, Route]:
    if params.get("by", "ordinal") == "traffic":
        return _static_by_traffic(flows, rf)
    out = {}
    for d in flows:
        f = d.flow
        ends = rf.host_links(f.src_nic, f.dst_nic)
        path: tuple[str, ...] | None = None
        if ends is not None:
            dst_leaf = rf.fabric.nics[f.dst_nic].leaf
            at, hops, ordinal = rf.fabric.nics[f.src_nic].leaf, [], rf.dst_ordinal(f.dst_nic)
            for _ in range(len(rf.fabric.out_links)):
                if at == dst_leaf:
                    path = (ends[0], *hops, ends[1])
                    break
                members = rf.members(at, dst_leaf)
                if not members:
                    break
                hop = members[ordinal % len(members)]
                hops.append(hop.id)
                at = hop.dst_node
        out[f.flow_id] = Route((SubFlow(1.0, single_path(path), f.udp_src_port, f.rqpn),))
    return out


def _static_by_traffic(flows: Sequence[FlowDemand], rf: ReplayFabric) -> dict[str, Route]:
    """Destination pinning an operator tunes on the recorded traffic: per (source leaf, destination NIC),
    heaviest first, the switch path whose busiest fabric link would be least utilized; every flow from
    that leaf to that NIC takes it (one static route per destination on each leaf)."""
    pairs: dict[tuple[str, str], list[FlowDemand]] = {}
    for d in flows:
        pairs.setdefault((rf.fabric.nics[d.flow.src_nic].leaf, d.flow.dst_nic), []).append(d)
    load = [0.0] * len(rf.link_ids)
    middle: dict[tuple[str, str], tuple[str, ...] | None] = {}
    order = sorted(pairs.items(), key=lambda kv: (-sum(d.bytes for d in kv[1]), natural_key(kv[0][0] + kv[0][1])))
    for key, ds in order:
        options = [p for p, _ in rf.paths(ds[0].flow.src_nic, ds[0].flow.dst_nic)]
        if not options:
            middle[key] = None
            continue
        nbytes = float(sum(d.bytes for d in ds))
        best = options[best_path(rf, load, [p[1:-1] for p in options], nbytes)]
        middle[key] = best[1:-1]
        place_load(rf, load, best[1:-1], nbytes)
    out = {}
    for (leaf, dst), ds in pairs.items():
        mid = middle[(leaf, dst)]
        for d in ds:
            f = d.flow
            ends = rf.host_links(f.src_nic, f.dst_nic)
            path = None if mid is None or ends is None else (ends[0], *mid, ends[1])
            plan = {"flow_id": f.flow_id, "src_nic": f.src_nic, "dst_nic": f.dst_nic, "switch": leaf,
                    "destination": f.dst_ip,
                    "path": list(path) if path is not None else None}
            out[f.flow_id] = Route((SubFlow(1.0, single_path(path), f.udp_src_port, f.rqpn),), plan)
    return out


def _wanted_hops(rf: ReplayFabric, models: Mapping[str, EcmpHash], path: tuple[str, ...], dst_leaf: str) -> list[Hop]:
    hops = []
    for lid in path[1:-1]:
        link = rf.link(lid)
        members = rf.members(link.src_node, dst_leaf)
        if len(members) > 1:
            hops.append(Hop(models[link.src_node], len(members), [m.id for m in members].index(lid)))
    return hops


def sport_plan(flows: Sequence[FlowDemand], rf: ReplayFabric, params: Mapping[str, Any]) -> dict[str, Route]:
    models = hash_models(rf, {})
    wanted = params.get("field", HashField.UDP_SRC_PORT)
    field_ = HashField(wanted)
    if not all(field_ in m.fields for m in models.values()):
        alt = HashField.DST_QPN if field_ is HashField.UDP_SRC_PORT else HashField.UDP_SRC_PORT
        field_ = alt if all(alt in m.fields for m in models.values()) else field_
    planner = Planner(field_)
    load = [0.0] * len(rf.link_ids)
    out: dict[str, Route] = {}
    for d in sorted(flows, key=lambda x: (-x.bytes, x.flow.flow_id)):
        f = d.flow
        h = headers_of(f)
        options = [p for p, _ in rf.paths(f.src_nic, f.dst_nic)]
        plan: dict[str, Any] = {"flow_id": f.flow_id, "src_nic": f.src_nic, "dst_nic": f.dst_nic,
                                "src_ip": f.src_ip, "dst_ip": f.dst_ip, "lqpn": f.lqpn, "rqpn": f.rqpn,
                                "field": field_.value, "old": f.udp_src_port if field_ is HashField.UDP_SRC_PORT
                                else f.rqpn, "bytes": d.bytes}
        chosen: tuple[str, ...] | None = None
        steerable = all(field_ in m.fields for m in models.values())
        dst_leaf = rf.fabric.nics[f.dst_nic].leaf
        remaining = list(range(len(options)))
        while remaining and steerable:
            i = remaining[best_path(rf, load, [options[j] for j in remaining], d.bytes)]
            remaining.remove(i)
            value = planner.find(h, _wanted_hops(rf, models, options[i], dst_leaf))
            if value is None:
                continue
            h2 = planner.apply(h, value)
            if rf.fabric.hash_path(h2, f.src_nic, f.dst_nic, down=rf.down, hash_models=models) != options[i]:
                continue  # never expected: the linear model and the real hash disagree; try another path
            chosen, h = options[i], h2
            plan["new"] = value
            if field_ is HashField.UDP_SRC_PORT and value != plan["old"]:
                plan["flow_label"] = flow_label_for(value)
            break
        if chosen is None:  # not steerable (the hash reads neither field) or no value found: plain ECMP
            chosen = rf.fabric.hash_path(h, f.src_nic, f.dst_nic, down=rf.down, hash_models=models)
            plan["new"] = plan["old"]
            plan["steered"] = False
        else:
            plan["steered"] = True
        plan["changed"] = plan["new"] != plan["old"]
        plan["path"] = list(chosen) if chosen is not None else None
        if chosen is not None:
            place_load(rf, load, chosen, d.bytes)
        out[f.flow_id] = Route((SubFlow(1.0, single_path(chosen), h.udp_src_port, h.dst_qpn),), plan)
    return out


def qp_scale(flows: Sequence[FlowDemand], rf: ReplayFabric, params: Mapping[str, Any]) -> dict[str, Route]:
    n = int(params.get("n", 4))
    draw = int(params.get("draw", 0))
    models = hash_models(rf, params)
    qpns = QpNumbers(flows)
    out = {}
    for d in flows:
        f = d.flow
        subs = []
        for i in range(n):
            h = qpns.headers(f, i, n, draw)
            path = rf.fabric.hash_path(h, f.src_nic, f.dst_nic, down=rf.down, hash_models=models)
            subs.append(SubFlow(1.0 / n, single_path(path), h.udp_src_port, h.dst_qpn))
        plan = {"flow_id": f.flow_id, "qps": [{"lqpn": qpns.number(f.src_nic, f.lqpn, i, n, draw),
                                               "rqpn": s.dst_qpn, "udp_src_port": s.udp_src_port}
                                              for i, s in enumerate(subs)]}
        out[f.flow_id] = Route(tuple(subs), plan)
    return out


def spray(flows: Sequence[FlowDemand], rf: ReplayFabric, params: Mapping[str, Any]) -> dict[str, Route]:
    return {d.flow.flow_id: Route((SubFlow(1.0, rf.paths(d.flow.src_nic, d.flow.dst_nic), d.flow.udp_src_port,
                                           d.flow.rqpn),)) for d in flows}


def spray_adaptive(flows: Sequence[FlowDemand], rf: ReplayFabric, params: Mapping[str, Any]) -> dict[str, Route]:
    chunks = int(params.get("chunks", 32))
    load = [0.0] * len(rf.link_ids)
    order = sorted(flows, key=lambda x: (-x.bytes, x.flow.flow_id))
    options = {d.flow.flow_id: [p for p, _ in rf.paths(d.flow.src_nic, d.flow.dst_nic)] for d in order}
    counts = {d.flow.flow_id: [0] * len(options[d.flow.flow_id]) for d in order}
    for _ in range(chunks):
        for d in order:
            opts = options[d.flow.flow_id]
            if not opts:
                continue
            part = d.bytes / chunks
            i = best_path(rf, load, opts, part)
            counts[d.flow.flow_id][i] += 1
            place_load(rf, load, opts[i], part)
    out = {}
    for d in flows:
        opts, c = options[d.flow.flow_id], counts[d.flow.flow_id]
        paths = tuple((p, n / chunks) for p, n in zip(opts, c, strict=True) if n)
        out[d.flow.flow_id] = Route((SubFlow(1.0, paths, d.flow.udp_src_port, d.flow.rqpn),))
    return out


def least_utilized(flows: Sequence[FlowDemand], rf: ReplayFabric, params: Mapping[str, Any]) -> dict[str, Route]:
    load = [0.0] * len(rf.link_ids)
    out = {}
    for d in sorted(flows, key=lambda x: (x.first_end_ns, natural_key(x.flow.flow_id))):
        opts = [p for p, _ in rf.paths(d.flow.src_nic, d.flow.dst_nic)]
        path = None
        if opts:
            path = opts[best_path(rf, load, opts, d.bytes)]
            place_load(rf, load, path, d.bytes)
        out[d.flow.flow_id] = Route((SubFlow(1.0, single_path(path), d.flow.udp_src_port, d.flow.rqpn),))
    return out


STRATEGIES: dict[str, StrategyInfo] = {
    "ecmp": StrategyInfo(ecmp, _HASH_PARAMS, "ECMP with the configured hash (seed/fields/algorithm/draw override)"),
    "e-ecmp": StrategyInfo(e_ecmp, _HASH_PARAMS, "ECMP that also hashes the RoCE destination QP (Meta's E-ECMP)"),
    "static-dst": StrategyInfo(static_dst, {"by": _by},
                               "destination-based pinning (FlowTracer's static configuration); by=traffic tunes it"),
    "sport-plan": StrategyInfo(sport_plan, {"field": HashField}, "planned UDP source ports (RePaC); plan per flow"),
    "qp-scale": StrategyInfo(qp_scale, {"n": _int, **_HASH_PARAMS}, "N QPs per connection, round-robin"),
    "spray": StrategyInfo(spray, {}, "per-packet spraying over all live members (PRIME-like)"),
    "spray-adaptive": StrategyInfo(spray_adaptive, {"chunks": _int},
                                   "congestion-aware spraying away from loaded or degraded links"),
    "least-utilized": StrategyInfo(least_utilized, {}, "each flow on its least utilized path at arrival (Contra-like)"),
}

#: What ``flowtracer whatif`` replays when no --strategy is given.
DEFAULT_STRATEGIES: tuple[str, ...] = ("ecmp", "e-ecmp", "static-dst", "static-dst:by=traffic", "sport-plan",
                                       "qp-scale:n=4", "spray", "spray-adaptive", "least-utilized")

