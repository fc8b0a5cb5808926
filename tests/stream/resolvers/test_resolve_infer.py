"""The ``infer`` resolver against synthetic evidence with a known flow -> path truth.

The truth comes from ``Fabric.hash_path`` with a hash seed the resolver never sees (the topology
keeps seed 0); flow bytes change per window as collective phases do (idle windows, other rates);
counters are the exact sums over the true paths, optionally with unseen traffic and noise.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from flowtracer.fabric.ecmp_hash import EcmpHash, HeaderFields
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.resolvers.contract import FlowObs, Placement
from flowtracer.stream.resolvers.infer.resolver import InferConfig, InferResolver

SEC = 1_000_000_000


@dataclass
class Synth:
    """A fabric, flows with 5-tuples, their true paths, and a window generator."""

    fabric: Fabric
    flows: list[FlowObs]
    rate: np.ndarray  # bytes per window at full speed, per flow
    rng: np.random.Generator
    idle: float = 0.3  # chance a flow sends nothing in a window
    noise: float = 0.0  # counters off by up to this share
    unseen: float = 0.0  # extra traffic of flows not in the flow set, share of a member's mean load
    truth: dict[str, tuple[str, ...]] = field(default_factory=dict)
    t: int = 0

    def rehash(self, seed: int, down: frozenset[str] = frozenset()) -> None:
        """Every switch hashes with ``seed``; ``down`` links are out of service (groups shrink)."""
        models = {s.name: EcmpHash(seed=seed) for s in self.fabric.topology.switches}
        for f in self.flows:
            h = HeaderFields(f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, dst_qpn=f.rqpn)
            path = self.fabric.hash_path(h, f.src_nic, f.dst_nic, down=down, hash_models=models)
            assert path is not None
            self.truth[f.flow_id] = path

    def window(self, bytes_: np.ndarray | None = None) -> tuple[int, list[FlowObs], dict[str, int]]:
        """The next window: its end (ns), the flows with their tx bytes, the counters per link."""
        n = len(self.flows)
        if bytes_ is None:
            active = self.rng.random(n) >= self.idle
            bytes_ = (self.rate * active * self.rng.uniform(0.3, 1.0, n)).astype(np.int64)
        obs = [replace(f, bytes=int(b)) for f, b in zip(self.flows, bytes_, strict=True)]
        loads = dict.fromkeys(self.fabric.links, 0.0)  # switches report idle links too: 0 bytes
        for f in obs:
            for link in self.truth[f.flow_id]:
                loads[link] = loads.get(link, 0.0) + f.bytes
        mean = float(np.mean([v for v in loads.values() if v])) if any(loads.values()) else 0.0
        measured = {link: int(v * (1 + self.rng.uniform(-self.noise, self.noise))
                              + self.unseen * mean * self.rng.uniform(0, 2)) for link, v in loads.items()}
        self.t += 1
        return self.t * SEC, obs, measured


def synth(spec: FabricSpec, qps_per_nic: int, seed: int = 0, hash_seed: int = 777, **kw: float) -> Synth:
    """Flows from every NIC to random NICs of other hosts on its rail, with random UDP source ports."""
    rng = np.random.default_rng(seed)
    fabric = Fabric(generate(spec))
    nics = list(fabric.nics.values())
    flows = []
    for s in nics:
        peers = [d for d in nics if d.host != s.host and d.nic.rail == s.nic.rail]
        for _ in range(qps_per_nic):
            d = peers[int(rng.integers(len(peers)))]
            lqpn = int(rng.integers(1, 1 << 24))
            flows.append(FlowObs(f"{s.name}/{lqpn}/0", s.name, d.name, str(s.nic.ip), str(d.nic.ip),
                                 int(rng.integers(49152, 65536)), 4791, lqpn, int(rng.integers(1, 1 << 24)), 0))
    sy = Synth(fabric, flows, rng.lognormal(0.0, 0.7, len(flows)) * 1e9, rng, **kw)
    sy.rehash(hash_seed)
    return sy


def heaviest(p: Placement) -> tuple[str, ...]:
    return max(p.paths, key=lambda pw: pw[1])[0]


def routed(sy: Synth) -> list[int]:
    """Indexes of flows that cross a leaf ECMP group (the ones infer has to learn)."""
    fab = sy.fabric
    return [i for i, f in enumerate(sy.flows)
            if fab.nics[f.src_nic].leaf != fab.nics[f.dst_nic].leaf]


def accuracy(sy: Synth, placements: list[Placement | None], which: list[int]) -> float:
    ok = sum(heaviest(p) == sy.truth[sy.flows[i].flow_id] for i in which if (p := placements[i]) is not None)
    return ok / len(which)


def path_load_error(sy: Synth, obs: list[FlowObs], placements: list[Placement | None]) -> float:
    """Sum over paths of |placed - true bytes| / total bytes (0 = every path load exact)."""
    placed: dict[tuple[str, ...], float] = {}
    true: dict[tuple[str, ...], float] = {}
    for f, p in zip(obs, placements, strict=True):
        assert p is not None
        for path, w in p.paths:
            placed[path] = placed.get(path, 0.0) + w * f.bytes
        true[sy.truth[f.flow_id]] = true.get(sy.truth[f.flow_id], 0.0) + f.bytes
    err = sum(abs(placed.get(k, 0.0) - true.get(k, 0.0)) for k in placed.keys() | true.keys())
    return err / max(sum(true.values()), 1.0)


def run(res: InferResolver, sy: Synth, windows: int) -> tuple[list[FlowObs], list[Placement | None]]:
    obs: list[FlowObs] = []
    out: list[Placement | None] = []
    for _ in range(windows):
        end, obs, measured = sy.window()
        out = res.resolve(end, obs, measured)
    return obs, out


SMALL = FabricSpec(hosts=16, leaves=4, spines=2)
WIDE = FabricSpec(hosts=16, leaves=4, spines=8)  # 8-member groups


@pytest.mark.parametrize("spec", [SMALL, WIDE], ids=["2-spine", "8-spine"])
def test_learns_every_member_without_the_hash(spec: FabricSpec) -> None:
    sy = synth(spec, qps_per_nic=3)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    _, early = run(res, sy, 2)
    assert np.mean([early[i].confidence for i in which]) < 0.5  # type: ignore[union-attr]  # 2 windows prove little
    obs, out = run(res, sy, 23)
    assert accuracy(sy, out, which) == 1.0
    assert min(out[i].confidence for i in which) >= 0.9  # type: ignore[union-attr]
    assert path_load_error(sy, obs, out) < 1e-9
    for p in out:
        assert p is not None and abs(sum(w for _, w in p.paths) - 1.0) < 1e-9


def test_groups_of_realistic_width_within_30_windows() -> None:
    # 32 spines: groups of 32 members with ~100 flows each, 3% counter error, 2% unseen traffic.
    sy = synth(FabricSpec(hosts=128, leaves=4, spines=32), qps_per_nic=4, noise=0.03, unseen=0.02)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    obs, out = run(res, sy, 30)
    assert min(d.flows for d in res.diagnostics().values()) >= 80
    assert accuracy(sy, out, which) == 1.0
    assert path_load_error(sy, obs, out) < 0.05  # the yardstick: per-path loads within 5% after 30 s
    assert np.mean([out[i].confidence for i in which]) >= 0.9  # type: ignore[union-attr]


def test_determined_paths_and_unknown_nics() -> None:
    sy = synth(SMALL, qps_per_nic=1)
    res = InferResolver(sy.fabric)
    fab = sy.fabric
    same_leaf = next(f for f in sy.flows if fab.nics[f.src_nic].leaf == fab.nics[f.dst_nic].leaf)
    stranger = replace(sy.flows[0], flow_id="x", dst_nic="nohost:mlx5_0")
    out = res.resolve(SEC, [same_leaf, stranger], {})
    assert out[0] == Placement.single(fab.equal_cost_paths(same_leaf.src_nic, same_leaf.dst_nic)[0], 1.0, "infer")
    assert out[1] is None


def test_no_counters_means_no_claim() -> None:
    sy = synth(WIDE, qps_per_nic=1)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    _, obs, _ = sy.window()
    out = res.resolve(SEC, obs, {})  # a partition without trusted counters
    for i in which:
        p = out[i]
        assert p is not None and len(p.paths) == 8 and p.confidence == pytest.approx(1 / 8)


def test_parallel_links_beyond_the_group_split_evenly() -> None:
    # Leaves spread over 4 spines x 2 cables (8 members); each spine reaches a leaf over 2 cables
    # whose counters (the spine's) this partition does not have: half the weight each.
    sy = synth(FabricSpec(hosts=8, leaves=2, spines=4, parallel_links=2), qps_per_nic=4)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    _, out = run(res, sy, 25)
    for i in which:
        p = out[i]
        assert p is not None
        truth = sy.truth[sy.flows[i].flow_id]
        assert len(p.paths) == 2 and all(w == pytest.approx(0.5) for _, w in p.paths)
        assert truth in [path for path, _ in p.paths]  # the member (2nd hop) is right
        assert 0.45 <= p.confidence <= 0.5


def test_identical_flows_are_split_not_guessed() -> None:
    sy = synth(SMALL, qps_per_nic=2, idle=0.2)
    fab = sy.fabric
    which = routed(sy)
    # Two flows of one leaf on different members that always move the same bytes (one coupled set).
    by_leaf: dict[str, list[int]] = {}
    for i in which:
        by_leaf.setdefault(fab.nics[sy.flows[i].src_nic].leaf, []).append(i)
    a, b = next((i, k) for idx in by_leaf.values() for i in idx for k in idx
                if sy.truth[sy.flows[i].flow_id][1] != sy.truth[sy.flows[k].flow_id][1])
    res = InferResolver(sy.fabric)
    obs: list[FlowObs] = []
    out: list[Placement | None] = []
    for _ in range(30):
        bytes_ = (sy.rate * (sy.rng.random(len(sy.flows)) >= 0.2) * sy.rng.uniform(0.3, 1, len(sy.flows)))
        bytes_[b] = bytes_[a]
        end, obs, measured = sy.window(bytes_.astype(np.int64))
        out = res.resolve(end, obs, measured)
    pa, pb = out[a], out[b]
    assert pa is not None and pb is not None
    assert pa.confidence <= 0.5 and pb.confidence <= 0.5
    # Each is half on either member, so both members still get exactly their measured bytes.
    assert sorted(w for _, w in pa.paths) == pytest.approx([0.5, 0.5])
    attributed: dict[str, float] = {}
    for f, p in zip(obs, out, strict=True):
        assert p is not None
        for path, w in p.paths:
            for link in path:
                attributed[link] = attributed.get(link, 0.0) + w * f.bytes
    for group in fab.ecmp_groups.values():
        for mb in group.members:
            assert attributed.get(mb.id, 0.0) == pytest.approx(measured.get(mb.id, 0), rel=1e-9, abs=1)
    others = [i for i in which if i not in (a, b)]
    assert accuracy(sy, out, others) == 1.0
    assert min(out[i].confidence for i in others) >= 0.9  # type: ignore[union-attr]


def test_rehash_is_detected_and_re_inferred() -> None:
    sy = synth(WIDE, qps_per_nic=3)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    _, out = run(res, sy, 25)
    assert accuracy(sy, out, which) == 1.0
    sy.rehash(4242)  # e.g. a reboot that came back with another hash seed
    moved = sum(heaviest(out[i]) != sy.truth[sy.flows[i].flow_id] for i in which)  # type: ignore[arg-type]
    assert moved > len(which) // 2
    _, out = run(res, sy, 3)
    diag = res.diagnostics()
    assert all(d.reinfers == 1 for d in diag.values())
    assert all(d.rows <= 3 for d in diag.values())  # the windows before the change were forgotten
    _, out = run(res, sy, 22)
    assert accuracy(sy, out, which) == 1.0
    assert min(out[i].confidence for i in which) >= 0.9  # type: ignore[union-attr]


def test_link_down_shrinks_the_group() -> None:
    sy = synth(WIDE, qps_per_nic=3)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    run(res, sy, 25)
    group = sy.fabric.ecmp_groups[next(iter(sy.fabric.ecmp_groups))]
    dead = group.members[3]
    sy.rehash(777, down=frozenset({dead.id, dead.reverse_id}))
    for _ in range(3):
        end, obs, measured = sy.window()
        measured.pop(dead.id, None)  # an oper-down interface drops out of the trusted counters
        res.resolve(end, obs, measured)
    assert res.diagnostics()[group.id].reinfers == 1
    for _ in range(25):
        end, obs, measured = sy.window()
        measured.pop(dead.id, None)
        out = res.resolve(end, obs, measured)
    assert accuracy(sy, out, which) == 1.0
    assert not any(dead.id in path for p in out if p is not None for path, _ in p.paths)


def test_missing_windows_and_counters_carry_no_false_evidence() -> None:
    sy = synth(WIDE, qps_per_nic=3)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    members = [mb.id for g in sy.fabric.ecmp_groups.values() for mb in g.members]
    out: list[Placement | None] = []
    for w in range(45):
        end, obs, measured = sy.window()
        if w % 5 == 4:
            continue  # the processor skipped a window: a gap in window_end_ns
        if w % 4 == 3:
            measured = {}  # a reboot baseline: no trusted counter at all
        elif w % 3 == 0:
            for link in sy.rng.choice(members, size=4, replace=False):
                measured.pop(str(link), None)  # a few counters missing
        out = res.resolve(end, obs, measured)
    assert accuracy(sy, out, which) == 1.0
    assert all(d.reinfers == 0 for d in res.diagnostics().values())  # a missing counter is no change


def test_unseen_traffic_and_counter_noise() -> None:
    # 5% of unexplained traffic (flows outside the flow set) plus +-3% counter error.
    sy = synth(WIDE, qps_per_nic=3, noise=0.03, unseen=0.05)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    obs, out = run(res, sy, 30)
    assert accuracy(sy, out, which) == 1.0
    assert np.mean([out[i].confidence for i in which]) >= 0.8  # type: ignore[union-attr]
    assert path_load_error(sy, obs, out) < 0.01


def test_source_port_change_re_learns_that_flow() -> None:
    sy = synth(WIDE, qps_per_nic=3)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    run(res, sy, 20)
    models = {s.name: EcmpHash(seed=777) for s in sy.fabric.topology.switches}

    def path_with(f: FlowObs, port: int) -> tuple[str, ...] | None:
        return sy.fabric.hash_path(HeaderFields(f.src_ip, f.dst_ip, port, 4791), f.src_nic, f.dst_nic,
                                   hash_models=models)

    # One QP is re-created with another UDP source port (same flow id): it lands on another member.
    i, port = next((i, port) for i in which for port in range(49152, 49400)
                   if path_with(sy.flows[i], port) != sy.truth[sy.flows[i].flow_id])
    sy.flows[i] = replace(sy.flows[i], udp_src_port=port)
    sy.rehash(777)
    _, out = run(res, sy, 15)
    assert heaviest(out[i]) == sy.truth[sy.flows[i].flow_id]  # type: ignore[arg-type]
    assert accuracy(sy, out, which) == 1.0
    assert all(d.reinfers == 0 for d in res.diagnostics().values())


def test_flows_come_and_go() -> None:
    sy = synth(WIDE, qps_per_nic=4)
    res = InferResolver(sy.fabric, InferConfig(history_windows=20))
    which = routed(sy)
    half = len(sy.flows) // 2
    first, second = sy.flows[:half], sy.flows[half:]
    sy.flows = first
    sy.rate = sy.rate[:half]
    run(res, sy, 20)
    sy.flows = second  # the first job ended, another one started
    sy.rate = np.random.default_rng(5).lognormal(0.0, 0.7, len(second)) * 1e9
    _, out = run(res, sy, 40)
    late = [i - half for i in which if i >= half]
    assert accuracy(sy, out, late) == 1.0
    # Columns of the ended flows were reused: the state does not grow with churn.
    assert all(len(g["col_flow"]) <= 2 * len(second) for g in res.state()["groups"].values())


def test_replayed_window_adds_no_evidence() -> None:
    sy = synth(SMALL, qps_per_nic=2)
    res = InferResolver(sy.fabric)
    end, obs, measured = sy.window()
    first = res.resolve(end, obs, measured)
    again = res.resolve(end, obs, measured)  # at-least-once delivery after a restart
    assert first == again
    assert all(d.rows == 1 for d in res.diagnostics().values())


def test_state_round_trips_and_continues_identically() -> None:
    sy = synth(WIDE, qps_per_nic=3, noise=0.02)
    res = InferResolver(sy.fabric)
    run(res, sy, 12)
    blob = json.dumps(res.state())
    twin = InferResolver(sy.fabric)
    twin.restore(json.loads(blob))
    for _ in range(10):
        end, obs, measured = sy.window()
        assert res.resolve(end, obs, measured) == twin.resolve(end, obs, measured)
    assert json.dumps(res.state()) == json.dumps(twin.state())


def test_restore_rejects_a_foreign_state_and_names_damaged_groups() -> None:
    sy = synth(SMALL, qps_per_nic=2)
    res = InferResolver(sy.fabric)
    with pytest.raises(ValueError, match="state version"):
        res.restore({"version": 99})
    res.restore({})  # nothing learned yet: fine
    run(res, sy, 3)
    state = json.loads(json.dumps(res.state()))
    bad, good = sorted(state["groups"])[:2]
    state["groups"][bad]["arrays"]["x"]["zlib"] = "not base64!"
    twin = InferResolver(sy.fabric)
    with pytest.raises(ValueError, match=f"damaged groups start afresh: {re.escape(bad)}: "):
        twin.restore(state)
    assert good in twin.diagnostics() and bad not in twin.diagnostics()


def test_change_while_still_learning() -> None:
    # Six windows cannot pin the first regime down, so the change looks like learning at first;
    # once the assignment follows the new regime, the old windows contradict it and are dropped.
    sy = synth(WIDE, qps_per_nic=3)
    res = InferResolver(sy.fabric)
    which = routed(sy)
    run(res, sy, 6)
    sy.rehash(4242)
    _, out = run(res, sy, 30)
    assert accuracy(sy, out, which) == 1.0
    assert min(out[i].confidence for i in which) >= 0.9  # type: ignore[union-attr]


def test_restore_drops_groups_of_another_topology() -> None:
    sy = synth(WIDE, qps_per_nic=2)
    res = InferResolver(sy.fabric)
    run(res, sy, 3)
    other = InferResolver(synth(FabricSpec(hosts=16, leaves=4, spines=8, parallel_links=2), qps_per_nic=1).fabric)
    other.restore(json.loads(json.dumps(res.state())))  # same group ids, other member links
    assert other.diagnostics() == {}
    same = InferResolver(sy.fabric)
    same.restore(res.state())
    assert same.diagnostics() == res.diagnostics()
