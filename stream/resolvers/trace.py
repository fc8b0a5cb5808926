"""The ``trace`` resolver: place each flow on the path a fresh trace of its own 5-tuple found; infer the rest.

Host agents probe each flow's path hop by hop with TTL-limited packets carrying the flow's own
5-tuple (topic ``flowtracer.path-traces.v1``, one compacted record per flow). A flow is placed on
its traced path with confidence 1 (method ``trace``) while its trace is

- **usable**: it pins one equal-cost path of the flow's NICs (``trace_path.traced_path``: COMPLETE,
  or PARTIAL with the hops that answered leaving one path);
- **valid**: the window ends no later than the trace's ``valid_until_ns`` (stamped by the agent from its one
  refresh setting; a trace without it, from an older agent, holds ``unstamped_valid_ns`` after it finished), and
  no ECMP group of a switch that forwards the flow on its path changed after the trace finished
  (``observe_groups``: the leaves' live AFT groups, from the same counters the window is resolved with);
- **the flow's**: same sending NIC, receiving NIC and 5-tuple (a new UDP source port is a new path);
- **trusted**: its bytes have not contradicted the counters for ``disagree_windows`` windows in a row.

Flows without one path: a switch that sprays or routes adaptively sends one flow's packets, and so its probes,
over several members. The evidence is the probes of one trace disagreeing: its hops lie on no one equal-cost path
together (``TracedPath.spread``; a trace takes milliseconds, so a route change within one is rare). Two traces of
one 5-tuple on different paths are not taken as evidence: a group change the resolver has not yet seen (its
counters and the trace arrive by different topics) looks the same. A flow whose single traced path the counters
contradict is re-traced (below), so a sprayed flow whose first trace happened to look like one path is found by a
re-trace. Such a flow is placed with method ``sprayed`` over all its equal-cost paths, each with the share the
counters give it (``spread_shares``: the residual bytes the other placed flows leave on each branch), and stays so
while its 5-tuple does (one consistent trace later is no evidence of one path): never as a whole flow on one
member, so the collision rule never counts it as a heavy flow there. Spreading is the switch's doing, not the
flow's: the switch where the probes parted (``TracedPath.spreader``) is remembered as spreading, and every flow
whose equal-cost paths branch at a spreading switch is ``sprayed`` too, whatever its own trace looked like (a
trace sees one member per probe: through a switch of k members, one in k traces looks like one path by chance,
and a small flow's bytes are too few to contradict the counters).

Every other flow falls back to an ``InferResolver`` (its placements say method ``infer`` and carry
infer's confidence). The fallback sees only the flows it places and, by default
(``infer_input="residual"``), only the counter bytes the traced flows do not explain: each link's
measured bytes minus the traced flows' bytes on it (floored at 0), so a group whose flows are all
traced gives infer nothing to fit. ``infer_input="all"`` gives infer every flow and the raw counters
instead (it learns the traced flows too); docs/stream.md has the measured comparison.

Disagreement with counters: a window's traced flows put a known number of bytes on each link of
their paths; untraced flows only add to that. When a link's traced bytes exceed its measured bytes
by more than ``disagree_share`` of them plus ``disagree_floor_bytes``, the traces of the flows on
that link cannot all be right. A flow on such a link in ``disagree_windows`` consecutive windows is
counted (``disagreements``), logged once, and its trace is untrusted until a newer trace arrives:
it falls back to infer, and the flows stage asks the flow's agent to re-trace it now
(``take_retrace_requests``). The test cannot tell which of the traced flows on an over-full link is the
wrong one, so all of them fall back (infer still places them from counters) and are re-traced.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from flowtracer.fabric.routing import Fabric
from flowtracer.schemas.v1 import traces_pb2
from flowtracer.stream.resolvers.contract import SPRAYED_METHOD, TRACE_METHOD, FlowObs, Placement
from flowtracer.stream.resolvers.infer.resolver import InferConfig, InferResolver
from flowtracer.stream.resolvers.spread_shares import spread_shares
from flowtracer.stream.resolvers.trace_path import Path, TracedPath, ingress_index, traced_path

log = logging.getLogger(__name__)

STATE_VERSION = 1
#: Confidence of a ``sprayed`` placement: that the flow is spread is observed, but its per-path shares are the
#: counters' aggregate split over every spread flow through the same switches, not this flow's own.
SPRAYED_CONFIDENCE = 0.5


@dataclass(frozen=True)
class TraceConfig:
    """Tuning of the ``trace`` resolver. Durations in ns, bytes per window."""

    #: How long a trace without ``valid_until_ns`` (an agent before that field) places its flow after it finished:
    #: twice those agents' default refresh (10 min), so one late refresh does not drop it.
    unstamped_valid_ns: int = 1_200_000_000_000
    infer_input: str = "residual"  # "residual": infer sees counters minus traced bytes; "all": everything
    disagree_share: float = 0.05  # tolerance of the traced-bytes-vs-counter check, share of the counter
    disagree_floor_bytes: float = 1_000_000.0  # plus this many bytes (counter timing jitter)
    disagree_windows: int = 3  # consecutive contradicting windows before a trace is untrusted
    forget_after_ns: int = 600_000_000_000  # traces this old are forgotten (flows that ended without a tombstone)
    #: A switch seen spreading holds as spreading this long after the last trace that showed it (six default refresh
    #: cycles of the agents: a reconfigured switch is let go, while one trace in k looking like one path is not).
    spreader_hold_ns: int = 3_600_000_000_000


class TraceResolver:
    """Flows on their fresh traced paths (confidence 1); the others placed by a wrapped ``InferResolver``.

    See the module docstring for the rules. ``observe_trace`` is fed the path-traces topic of the
    partitions this instance serves (a tombstone is ``None``); ``fallback_reason`` says why a flow of
    the last window was not placed by its trace.
    """

    name: ClassVar[str] = "trace"

    def __init__(self, fabric: Fabric, config: TraceConfig | None = None,
                 infer_config: InferConfig | None = None) -> None:
        self.fabric = fabric
        self.config = config or TraceConfig()
        if self.config.infer_input not in ("residual", "all"):
            raise ValueError(f"infer_input must be 'residual' or 'all', not {self.config.infer_input!r}")
        self.infer = InferResolver(fabric, infer_config)
        self._ingress = ingress_index(fabric)
        self._candidates: dict[tuple[str, str], tuple[Path, ...]] = {}
        self._traces: dict[str, TracedPath] = {}
        self._placements: dict[str, Placement] = {}  # flow id -> its traced placement (one object per trace)
        self._untrusted: dict[str, int] = {}  # flow id -> finished_ns of the trace found wrong
        self._forwarders: dict[str, frozenset[str]] = {}  # flow id -> switches that forward it on its traced path
        self._groups: dict[str, tuple[tuple[tuple[str, int], ...], ...]] = {}  # switch -> its AFT groups, as seen
        self._changed: dict[str, int] = {}  # switch -> when its groups last changed (ns, the counter sample)
        self._strikes: dict[str, int] = {}
        self._calls = 0
        self.disagreements = 0  # traces found to contradict the counters (cumulative)
        self.fallback_reason: dict[str, str] = {}  # flow id -> why its trace did not place it (last window)
        self._requests: list[tuple[str, str]] = []  # (flow id, src NIC) untrusted since ``take_retrace_requests``
        self._spread: dict[str, tuple[str, str, int, int]] = {}  # flow id -> the 5-tuple seen going several ways
        self._spreaders: dict[str, int] = {}  # switch -> when a trace first showed it spreading (ns since the epoch)
        self._branching: dict[tuple[str, str], frozenset[str]] = {}  # NIC pair -> switches where its paths branch
        self.spread_found = 0  # flows found spread (cumulative)

    # -- traces ------------------------------------------------------------------------------------

    def observe_trace(self, flow_id: str, trace: traces_pb2.PathTrace | None) -> None:
        """Take the newest trace of ``flow_id`` (``None``: a tombstone, the flow ended)."""
        if trace is None:
            self._traces.pop(flow_id, None)
            self._placements.pop(flow_id, None)
            self._forwarders.pop(flow_id, None)
            self._untrusted.pop(flow_id, None)
            self._strikes.pop(flow_id, None)
            self._spread.pop(flow_id, None)
            return
        old = self._traces.get(flow_id)
        if old is not None and old.finished_ns > trace.finished_ns:
            return  # an older trace arriving late (another agent, a replay): keep the newer one
        dst = self.fabric.nic_by_ip.get(trace.dst_ip)
        cands = None
        if dst is not None and trace.src_nic in self.fabric.nics:
            k = (trace.src_nic, dst.name)
            cands = self._candidates.get(k)
            if cands is None:
                cands = self._candidates[k] = self.fabric.equal_cost_paths(*k)
        self._take(flow_id, traced_path(self.fabric, self._ingress, trace, cands))

    def _take(self, flow_id: str, tp: TracedPath) -> None:
        old = self._traces.get(flow_id)
        if old is not None and old.five_tuple != tp.five_tuple:  # a new 5-tuple: a new flow as far as hashes go
            self._spread.pop(flow_id, None)
        if flow_id not in self._spread and tp.spread:
            self._spread[flow_id] = tp.five_tuple
            self.spread_found += 1
            log.info("flow %s has no one path (%s): placed over its equal-cost paths by the counters' shares",
                     flow_id, tp.why)
        if tp.spreader:
            seen = self._spreaders.get(tp.spreader)
            self._spreaders[tp.spreader] = max(tp.finished_ns, seen or 0)
            if seen is None:
                log.info("switch %s spreads packets of one flow over several members: its flows are placed as "
                         "sprayed", tp.spreader)
        self._traces[flow_id] = tp
        self._strikes.pop(flow_id, None)
        if tp.path is not None:
            self._placements[flow_id] = Placement.single(tp.path, 1.0, TRACE_METHOD)
            links = self.fabric.links
            self._forwarders[flow_id] = frozenset(links[lid].src_node for lid in tp.path[1:-1] if lid in links)
        else:
            self._placements.pop(flow_id, None)
            self._forwarders.pop(flow_id, None)
        u = self._untrusted.get(flow_id)
        if u is not None and tp.finished_ns > u:
            del self._untrusted[flow_id]  # a newer trace: trusted again until it, too, disagrees

    def _through_spreader(self, f: FlowObs) -> bool:
        """Whether ``f``'s equal-cost paths branch at a switch known to spread packets."""
        if not self._spreaders:
            return False
        k = (f.src_nic, f.dst_nic)
        br = self._branching.get(k)
        if br is None:
            cands = self._paths_of(f)
            firsts: dict[tuple[str, ...], set[str]] = {}
            for p in cands:
                for i in range(1, len(p) - 1):
                    firsts.setdefault(p[:i], set()).add(p[i])
            links = self.fabric.links
            br = self._branching[k] = frozenset(links[next(iter(nxt))].src_node for nxt in firsts.values()
                                                if len(nxt) > 1)
        return not br.isdisjoint(self._spreaders)

    def _paths_of(self, f: FlowObs) -> tuple[Path, ...]:
        """The equal-cost paths of ``f``'s NICs (cached); () when a NIC is unknown."""
        k = (f.src_nic, f.dst_nic)
        cands = self._candidates.get(k)
        if cands is None:
            if f.src_nic not in self.fabric.nics or f.dst_nic not in self.fabric.nics:
                return ()
            cands = self._candidates[k] = self.fabric.equal_cost_paths(*k)
        return cands

    def _why_not(self, f: FlowObs, tp: TracedPath | None, window_end_ns: int) -> str:
        if tp is None:
            return "no trace"
        if tp.path is None:
            return tp.why
        until = tp.valid_until_ns or tp.finished_ns + self.config.unstamped_valid_ns
        if window_end_ns > until:
            return (f"stale: valid until {(window_end_ns - until) / 1e9:.0f} s before the window end "
                    f"(finished {(window_end_ns - tp.finished_ns) / 1e9:.0f} s before)")
        for sw in self._forwarders.get(f.flow_id, ()):
            changed = self._changed.get(sw)
            if changed is not None and changed >= tp.finished_ns:
                return f"stale: the ECMP groups of {sw} changed after the trace"
        if (tp.src_nic, tp.dst_nic) != (f.src_nic, f.dst_nic) or tp.five_tuple != (
                f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port):
            return "another 5-tuple: the trace is not of the flow's current path"
        if f.flow_id in self._untrusted:
            return "untrusted: its bytes contradicted the counters"
        return ""

    def observe_groups(self, switch: str, groups: Sequence[Mapping[str, int]], at_ns: int = 0) -> None:
        """``switch``'s AFT groups (egress port -> weight, per group) as its counter sample at ``at_ns`` (ns since
        the epoch) says: when they differ from the ones seen before, every trace through ``switch`` that finished
        no later than ``at_ns`` stops placing its flow (the flow may have moved) until a newer trace arrives. The
        first groups seen of a switch are a baseline, not a change."""
        seen = tuple(sorted({tuple(sorted((p, int(w)) for p, w in g.items())) for g in groups}))
        old = self._groups.get(switch)
        self._groups[switch] = seen
        if old is not None and old != seen:
            self._changed[switch] = max(at_ns, self._changed.get(switch, 0))
            log.info("ECMP groups of %s changed: traces through it from before %d ns fall back until re-traced",
                     switch, at_ns)

    # -- the contract -----------------------------------------------------------------------------

    def resolve(self, window_end_ns: int, flows: Sequence[FlowObs],
                measured: Mapping[str, int]) -> list[Placement | None]:
        """One placement per flow (see ``Resolver.resolve``): traced ones first, the rest from infer."""
        self._calls += 1
        if self._calls % 64 == 0:
            self._forget(window_end_ns)
        traced: dict[int, Placement] = {}
        reasons: dict[str, str] = {}
        spread: list[int] = []
        for n, f in enumerate(flows):
            if self._spread.get(f.flow_id) == (f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port) or (
                    self._through_spreader(f)):
                spread.append(n)
                reasons[f.flow_id] = "sprayed: its packets take several paths"
                continue
            why = self._why_not(f, self._traces.get(f.flow_id), window_end_ns)
            if why:
                reasons[f.flow_id] = why
            else:
                traced[n] = self._placements[f.flow_id]
        if measured and traced:
            for n in self._contradicted(flows, traced, measured):
                del traced[n]
                reasons[flows[n].flow_id] = "untrusted: its bytes contradicted the counters"
        self.fallback_reason = reasons
        out: list[Placement | None] = [traced.get(n) for n in range(len(flows))]
        load = _link_bytes(flows, traced)
        residual = {lid: max(0, v - round(load.get(lid, 0.0))) for lid, v in measured.items()}
        for n in spread:
            out[n] = p = self._sprayed(flows[n], residual)
            if p is not None:
                for path, w in p.paths:
                    for lid in path:
                        load[lid] = load.get(lid, 0.0) + flows[n].bytes * w
        placed = set(traced).union(spread)
        rest = [n for n in range(len(flows)) if n not in placed]
        if self.config.infer_input == "all":
            inferred = self.infer.resolve(window_end_ns, flows, measured)
            for n in rest:
                out[n] = inferred[n]
            return out
        residual = {lid: max(0, v - round(load.get(lid, 0.0))) for lid, v in measured.items()}
        inferred = self.infer.resolve(window_end_ns, [flows[n] for n in rest], residual)
        for n, p in zip(rest, inferred, strict=True):
            out[n] = p
        return out

    def _sprayed(self, f: FlowObs, residual: Mapping[str, int]) -> Placement | None:
        """``f`` over its equal-cost paths by the counters' shares (``spread_shares``); None when it has none."""
        cands = self._paths_of(f)
        if not cands:
            return None
        shares = spread_shares(cands, residual)
        return Placement(tuple(zip(cands, shares, strict=True)), SPRAYED_CONFIDENCE, SPRAYED_METHOD)

    def _contradicted(self, flows: Sequence[FlowObs], traced: Mapping[int, Placement],
                      measured: Mapping[str, int]) -> list[int]:
        """Traced flows untrusted in this window: on an over-full link ``disagree_windows`` windows in a row."""
        cfg = self.config
        load = _link_bytes(flows, traced)
        over = {lid for lid, b in load.items()
                if lid in measured and b > measured[lid] * (1 + cfg.disagree_share) + cfg.disagree_floor_bytes}
        out = []
        for n, p in traced.items():
            fid = flows[n].flow_id
            if not over.intersection(p.paths[0][0]):
                self._strikes.pop(fid, None)
                continue
            s = self._strikes[fid] = self._strikes.get(fid, 0) + 1
            if s >= cfg.disagree_windows:
                self._strikes.pop(fid, None)
                self._untrusted[fid] = self._traces[fid].finished_ns
                self.disagreements += 1
                self._requests.append((fid, flows[n].src_nic))
                log.warning("path trace of flow %s disagrees with the counters for %d windows (a link of its traced "
                            "path carried less than the traced flows sent); its trace is untrusted, infer places it",
                            fid, s)
                out.append(n)
        return out

    def take_retrace_requests(self) -> list[tuple[str, str]]:
        """The (flow id, sending NIC) whose trace became untrusted since the last call: the flows stage asks their
        agents to re-trace them (``flowtracer.trace-requests.v1``)."""
        out, self._requests = self._requests, []
        return out

    def _forget(self, now_ns: int) -> None:
        old = [fid for fid, tp in self._traces.items() if now_ns - tp.finished_ns > self.config.forget_after_ns]
        for fid in old:
            self.observe_trace(fid, None)
        for sw in [sw for sw, at in self._spreaders.items() if now_ns - at > self.config.spreader_hold_ns]:
            del self._spreaders[sw]

    # -- state ------------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The traces (as resolved paths), which are untrusted, and the fallback's state; JSON-able."""
        return {"version": STATE_VERSION, "config": asdict(self.config), "infer": self.infer.state(),
                "traces": {fid: tp.to_json() for fid, tp in self._traces.items()},
                "untrusted": dict(self._untrusted), "spread": {fid: list(t) for fid, t in self._spread.items()},
                "spreaders": dict(self._spreaders),
                "groups": {sw: [[list(m) for m in g] for g in gs] for sw, gs in self._groups.items()},
                "groups_changed": dict(self._changed)}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state()`` (merges: several partitions' states may be restored into one instance)."""
        if not state:
            return
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"trace resolver state version {state.get('version')!r} is not {STATE_VERSION}")
        try:
            for fid, v in state.get("traces", {}).items():
                self._take(fid, TracedPath.from_json(v))
            self._untrusted.update({fid: int(fin) for fid, fin in state.get("untrusted", {}).items()})
            for fid, (sip, dip, sport, dport) in state.get("spread", {}).items():  # absent before spread flows
                self._spread[fid] = (str(sip), str(dip), int(sport), int(dport))
            for sw, at in state.get("spreaders", {}).items():
                self._spreaders[sw] = max(int(at), self._spreaders.get(sw, 0))
            for sw, gs in state.get("groups", {}).items():  # absent in states saved before group changes counted
                self._groups.setdefault(sw, tuple(tuple((str(p), int(w)) for p, w in g) for g in gs))
            for sw, at in state.get("groups_changed", {}).items():
                self._changed[sw] = max(int(at), self._changed.get(sw, 0))
        except (TypeError, ValueError) as e:
            raise ValueError(f"trace resolver state: damaged traces: {type(e).__name__}: {e}") from None
        self.infer.restore(state.get("infer", {}))


def _link_bytes(flows: Sequence[FlowObs], placed: Mapping[int, Placement]) -> dict[str, float]:
    """Bytes the ``placed`` flows (index -> single-path placement) put on each link of their paths."""
    load: dict[str, float] = {}
    for n, p in placed.items():
        b = flows[n].bytes
        for lid in p.paths[0][0]:
            load[lid] = load.get(lid, 0.0) + b
    return load
