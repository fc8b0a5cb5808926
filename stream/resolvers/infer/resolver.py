"""The ``infer`` resolver: learn which ECMP member each flow uses from counters alone, no hash model.

Model. At a leaf's uplink ECMP group (members 1..m), over windows t, the switch counters see

    y[t, j] = sum of x[t, i] over the flows i the switch put on member j  (+ unseen traffic)

where x[t, i] are the flow's tx bytes from the host agents. A flow keeps its member while its
5-tuple lives and rates change between collective phases, so the unknown 0/1 assignment A (flows
x members, one 1 per row) becomes identifiable from a history of windows: it is the A minimising
``||M * (Y - X A)||^2`` (M masks counters that were missing). Each window is first divided by its
byte total, so busy and quiet windows weigh alike and residuals are shares of a window. All
destinations reached through the same member set share one group, and one model.

Solving, per group and incrementally:
- every window: append it, insert new flows where the residual has room, and check the
  assignment with two small products (``X^T R``, ``(X*X)^T M``: windows x flows x members); take
  single-flow moves (pairwise swaps when the new window misfits) that lower the residual clearly;
- cold solve, often while learning, then at a doubling interval (up to ``cold_interval_max``):
  relax A to rows on the probability simplex, solve that convex QP by ADMM (the W-step is a ridge
  solve made cheap by Woodbury: windows << flows), round each row to its largest entry, polish by
  local search; adopted when it fits clearly better than the warm assignment;
- change (link down, rehash after a reboot, another hash seed): the newest window is judged by
  the assignment made before it arrived. After ``confirm_windows`` windows in a row misfit by
  ``contradiction_factor`` x the usual residual (at once when a member's counter disappears from
  ``measured``), the group is re-solved from scratch, and two regimes, before and after the first
  misfitting window, are weighed against one: when solving the parts apart lowers the residual by
  more than a BIC-like price (ln m nats per flow with bytes on both sides, plus 10; the older part
  must hold ``min_rows`` windows and two counter readings per flow), the older windows are
  forgotten and the group re-solved on the rest. The same test confirms the two other ways a change
  shows: the assignment has already followed the new windows (the old ones misfit it), or a cold
  solve leaves windows unexplained and solving the newer half alone points at a change (a change
  while still learning, a flapping link). A missing counter alone is no change: its windows carry
  no evidence for that member. A flow whose 5-tuple changes (new UDP source port) starts afresh.

Confidence of a flow, 0..1: how sure the evidence makes its heaviest-weighted full path, product of
- the posterior of its member under Gaussian residual noise, the other flows held fixed:
  ``1 / sum_b exp(-dSSE(i -> b) / 2 sigma^2)``, sigma^2 the residual per counter, floored at
  ``noise_floor`` of a member's load (counters and agents never agree better than that);
- support: the cold solve's relaxed weight of the flow on its member (x2, capped at 1): the convex
  relaxation spreads a flow over every member the evidence cannot rule out; halved (and the flow
  unpinned, see below) where an independent solve of equal fit puts the flow elsewhere;
- trust: 1 - doubt of its member, where doubt rises when the assignment fails to predict a
  member's counter in a window it had not seen yet and decays when it predicts it (an overfitted
  assignment explains its history but not the next window); doubt starts at 1;
- depth: below ``min_rows`` windows with bytes, confidence is scaled down in proportion;
- indistinguishability: flows whose byte series agree within the noise are interchangeable, so the
  evidence only fixes how many of them sit on each member. Each such flow gets its weight split
  over those members in that proportion (member totals stay exact, per-path loads are right in
  expectation), and its confidence is scaled by its largest share;
- beyond the member: equal-cost continuations this partition has no counters for (parallel spine
  links, further tiers) get the weight split evenly; confidence divides by their number.
A flow once pinned (confidence >= ``establish_confidence``) keeps that confidence, times its
member's trust, after the evidence that pinned it slides out of the history, until a change.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from flowtracer.fabric.routing import Fabric, group_id, link_id
from flowtracer.stream.resolvers.contract import FlowObs, Placement
from flowtracer.stream.resolvers.infer.config import InferConfig
from flowtracer.stream.resolvers.infer.group import STATE_VERSION, GroupState
from flowtracer.stream.resolvers.infer.routes import PairRoutes

Path = tuple[str, ...]


@dataclass(frozen=True)
class GroupDiagnostics:
    """What the resolver knows about one group, for self-metrics and tests."""

    flows: int  # columns with bytes in the history
    rows: int  # evidence windows in the history
    settled: bool
    reinfers: int
    last_change_ns: int
    suspect: int


class InferResolver:
    """Places flows by learning each ECMP group's flow -> member assignment from counter deltas.

    See the module docstring for the model, the solver and the confidence. One instance may serve
    several flows partitions: state is per group, and groups belong to source leaves.
    """

    name: ClassVar[str] = "infer"

    def __init__(self, fabric: Fabric, config: InferConfig | None = None) -> None:
        self.fabric = fabric
        self.config = config or InferConfig()
        self._groups: dict[str, GroupState] = {}
        self._pairs: dict[tuple[str, str], PairRoutes | None] = {}
        self._flows: dict[str, tuple[object, PairRoutes | None, GroupState | None, int]] = {}
        self._leaf_pairs: dict[tuple[str, str], tuple[str | None, tuple[str, ...], tuple[tuple[Path, ...], ...]]] = {}

    # -- routing facts ---------------------------------------------------------------------------

    def _leaf_pair(self, src_leaf: str, dst_leaf: str) -> tuple[str | None, tuple[str, ...],
                                                              tuple[tuple[Path, ...], ...]]:
        """Group id, member link ids and, per member, the switch-to-switch paths behind it.

        Computed from ``next_hops`` once per leaf pair: cheaper than ``group_of`` per NIC pair, and it
        does not need ``Fabric.ecmp_groups`` (seconds to build on a 128-leaf fabric).
        """
        key = (src_leaf, dst_leaf)
        hit = self._leaf_pairs.get(key)
        if hit is not None:
            return hit
        fab = self.fabric
        members = fab.next_hops(src_leaf, dst_leaf) if src_leaf != dst_leaf else ()
        mids = self._mids(src_leaf, dst_leaf)
        if len(members) < 2:
            hit = (None, (), (mids,))
        else:
            gid = group_id(src_leaf, (mb.dst_node for mb in members))
            per = tuple(tuple(mid for mid in mids if mid[0] == mb.id) for mb in members)
            hit = (gid, tuple(mb.id for mb in members), per)
        self._leaf_pairs[key] = hit
        return hit

    def _mids(self, at: str, dst_leaf: str) -> tuple[Path, ...]:
        """Every shortest switch path from ``at`` to ``dst_leaf`` (link ids; () for the same switch)."""
        if at == dst_leaf:
            return ((),)
        return tuple((hop.id, *rest) for hop in self.fabric.next_hops(at, dst_leaf)
                     for rest in self._mids(hop.dst_node, dst_leaf))

    def _pair(self, src_nic: str, dst_nic: str) -> PairRoutes | None:
        k = (src_nic, dst_nic)
        if k in self._pairs:
            return self._pairs[k]
        fab = self.fabric
        src, dst = fab.nics.get(src_nic), fab.nics.get(dst_nic)
        info: PairRoutes | None = None
        if src is not None and dst is not None:
            gid, members, per = self._leaf_pair(src.leaf, dst.leaf)
            up = link_id(src.host, src.nic.rdma_device, src.leaf, src.leaf_port)
            down = link_id(dst.leaf, dst.leaf_port, dst.host, dst.nic.rdma_device)
            full = tuple(tuple((up, *mid, down) for mid in mids) for mids in per)
            if gid is None and full[0]:
                w = 1.0 / len(full[0])
                info = PairRoutes(None, (), (), Placement(tuple((p, w) for p in full[0]), w, "infer"))
            elif gid is not None:
                info = PairRoutes(gid, members, full, None)
        if len(self._pairs) > 1_000_000:
            self._pairs.clear()
        self._pairs[k] = info
        return info

    def _group(self, pair: PairRoutes) -> GroupState:
        assert pair.gid is not None
        g = self._groups.get(pair.gid)
        if g is None:
            g = self._groups[pair.gid] = GroupState(pair.gid, pair.members, self.config)
        return g

    # -- the contract ----------------------------------------------------------------------------

    def _enter(self, f: FlowObs, key: tuple[object, ...]) -> tuple[object, PairRoutes | None, GroupState | None, int]:
        """Routing facts, group and column of a flow not seen before (or whose 5-tuple changed)."""
        pair = self._pair(f.src_nic, f.dst_nic)
        if pair is None or pair.gid is None:
            ent: tuple[object, PairRoutes | None, GroupState | None, int] = (key, pair, None, -1)
        else:
            g = self._groups.get(pair.gid) or self._group(pair)
            col = g.column(f.flow_id, (f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, f.rqpn))
            g.col_pair[col] = pair
            ent = (key, pair, g, col)
        if len(self._flows) > 2_000_000:
            self._flows.clear()
        self._flows[f.flow_id] = ent
        return ent

    def resolve(self, window_end_ns: int, flows: Sequence[FlowObs],
                measured: Mapping[str, int]) -> list[Placement | None]:
        """One placement per flow (see ``Resolver.resolve``); learns from this window's evidence."""
        out: list[Placement | None] = [None] * len(flows)
        batches: dict[str, tuple[GroupState, list[int], list[int], list[int]]] = {}
        known = self._flows
        for n, f in enumerate(flows):
            key = (f.dst_nic, f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, f.rqpn)
            ent = known.get(f.flow_id)
            # The cached column is only good while the flow still owns it (columns are reused).
            if ent is None or ent[0] != key or (ent[2] is not None and ent[2].col_flow[ent[3]] != f.flow_id):
                ent = self._enter(f, key)
            g = ent[2]
            if g is None:
                out[n] = ent[1].fixed if ent[1] is not None else None
                continue
            batch = batches.get(g.gid)
            if batch is None:
                batch = batches[g.gid] = (g, [], [], [])
            batch[1].append(n)
            batch[2].append(ent[3])
            batch[3].append(f.bytes)
        budget = [max(1, len(batches) // 8)]
        for g, idx, cols_l, bytes_l in batches.values():
            cols = np.asarray(cols_l, dtype=np.int64)
            g.calls += 1
            g.seen_call[cols] = g.calls
            if g.calls % self.config.refresh_every == 0:
                g.reclaimed |= g._reclaim()
            fb = np.maximum(np.asarray(bytes_l, dtype=np.float64), 0.0)
            if window_end_ns > g.last_window_ns:  # replays after a restart carry no new evidence
                g.last_window_ns = window_end_ns
                yv = np.array([measured.get(lid, -1) for lid in g.members], dtype=np.float64)
                present = yv >= 0
                if present.any() and fb.sum() > 0:
                    g.add_row(cols, fb, np.maximum(yv, 0.0), present)
                    g.update(window_end_ns, g.reclaimed, budget)
                    g.reclaimed = False
            placed = g.placed
            for n, col in zip(idx, cols_l, strict=True):
                p = placed[col]
                out[n] = p if p is not None else self._place(g, col)
        return out

    @staticmethod
    def _place(g: GroupState, col: int) -> Placement | None:
        pair = g.col_pair[col]
        assert pair is not None
        best = int(g.best[col])
        if best < 0:  # no evidence yet: any member
            placed = pair.place_anywhere()
        elif (split := g.split.get(col)) is not None:
            placed = pair.place(split, float(g.conf[col]))
        else:
            placed = pair.place_on(best, float(g.conf[col]))
        g.placed[col] = placed
        return placed

    # -- state -----------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything learned, JSON-able, per group id: members, flows, assignment and the evidence
        history (arrays as zlib + base64, about 90 KiB for 120 flows x 60 windows). Groups are
        independent: a processor may store ``state()["groups"][gid]`` per group and restore any
        subset (``restore`` merges)."""
        return {"version": STATE_VERSION, "config": asdict(self.config),
                "groups": {gid: g.state() for gid, g in self._groups.items()}}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state()``; merges groups (several partitions' states may be restored into
        one instance). Groups whose members no longer match the topology, or kept with another
        history length, start afresh. A group whose state is damaged starts afresh too; the others
        are restored, then ``ValueError`` names the damaged ones."""
        if not state:
            return
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"infer resolver state version {state.get('version')!r} is not {STATE_VERSION}")
        damaged = []
        for gid, st in state.get("groups", {}).items():
            try:
                if tuple(st["members"]) != self._members_now(gid):
                    continue  # the topology changed under this group: learn it afresh
                if st["arrays"]["y"]["shape"][0] != self.config.history_windows:
                    continue
                self._groups[gid] = GroupState.from_state(gid, st, self.config)
            except (KeyError, IndexError, TypeError, ValueError, zlib.error) as e:  # binascii.Error is a ValueError
                self._groups.pop(gid, None)
                damaged.append(f"{gid}: {type(e).__name__}: {e}")
        self._flows.clear()  # cached columns may belong to groups just replaced
        if damaged:
            raise ValueError("infer resolver state: damaged groups start afresh: " + "; ".join(damaged))

    def _members_now(self, gid: str) -> tuple[str, ...]:
        """Member link ids of group ``gid`` in the current topology (switch uplinks to its neighbors).

        Cheaper than ``Fabric.ecmp_groups`` and exact for the leaf groups this resolver keeps.
        """
        switch, _, neighbors = gid.partition(":")
        names = set(neighbors.split("|"))
        links = tuple(o.id for o in self.fabric.out_links.get(switch, ()) if not o.host_link and o.dst_node in names)
        return links if group_id(switch, (self.fabric.links[lid].dst_node for lid in links)) == gid else ()

    def diagnostics(self) -> dict[str, GroupDiagnostics]:
        """Per group: flows with evidence, evidence windows, settled, re-inferences, last change."""
        out = {}
        for gid, g in self._groups.items():
            rows = g.row_seq >= 0
            out[gid] = GroupDiagnostics(int(((g.x[rows] > 0).sum(axis=0) > 0).sum()), int(rows.sum()), g.settled,
                                        g.reinfers, int(g.last_change_ns), g.suspect)
        return out


__all__ = ["GroupDiagnostics", "InferConfig", "InferResolver"]

