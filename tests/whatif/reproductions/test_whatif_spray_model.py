"""The packet-level spraying model (whatif/reproductions/spray_paths.py, spray_sim.py, spray_scenarios.py) on small fabrics.

Properties that follow from the model's rules, not from tuned numbers: conservation, exact round-robin
spreading, nothing offered to a withdrawn link, PRIME's weights moving load off a degraded link, seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from flowtracer.whatif.reproductions.spray_paths import KINDS, ChooserConfig, PathChooser
from flowtracer.whatif.reproductions.spray_report import document, markdown
from flowtracer.whatif.reproductions.spray_scenarios import SCENARIO_KEYS, permutation, run_all, select
from flowtracer.whatif.reproductions.spray_sim import Flow, LeafSpine, LinkFaults, Transport, simulate

FAB = LeafSpine(leaves=2, spines=4, hosts_per_leaf=2)
PACKETS = 96


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ack_every,deaggregate", [(1, True), (8, True), (8, False)])
def test_healthy_fabric_delivers_every_packet_once(kind: str, ack_every: int, deaggregate: bool) -> None:
    flows = permutation(FAB, PACKETS, seed=3)
    r = simulate(FAB, flows, kind, transport=Transport(ack_every=ack_every, deaggregate=deaggregate), seed=1)
    assert r.delivered.tolist() == [PACKETS] * len(flows)
    assert (r.lost, r.duplicates, r.unfinished) == (0, 0, 0)
    assert len(r.fct_slots) == len(flows)
    ups = [FAB.up(a, s) for a in range(FAB.leaves) for s in range(FAB.spines)]
    downs = [FAB.down(s, b) for s in range(FAB.spines) for b in range(FAB.leaves)]
    # Every flow crosses leaves: each packet takes exactly one uplink, one downlink and its host link.
    assert r.link_packets[ups].sum() == r.link_packets[downs].sum() == PACKETS * len(flows)
    assert [r.link_packets[FAB.host_link(f.dst)] for f in flows] == [PACKETS] * len(flows)
    # At least one packet's serialization per hop: no flow beats line rate.
    assert r.fct_slots.min() >= PACKETS and 0.0 < r.throughput <= 1.0


@pytest.mark.parametrize("kind", ["round-robin", "prr"])
def test_round_robin_spreads_exactly_evenly(kind: str) -> None:
    flows = (Flow(0, 2, FAB.spines * 25),)
    r = simulate(FAB, flows, kind, seed=5)
    assert [int(r.link_packets[FAB.up(0, s)]) for s in range(FAB.spines)] == [25] * FAB.spines
    assert r.fim == 0.0


def test_plain_round_robin_on_one_spine_never_reorders_and_random_spraying_does() -> None:
    flows = permutation(FAB, PACKETS, seed=0)
    degraded = LinkFaults(capacity={FAB.up(0, 0): 0.5})
    assert simulate(LeafSpine(2, 1, 2), flows, "random").reorder_fraction == 0.0
    r = simulate(FAB, flows, "random", degraded, seed=2)
    assert r.reorder_fraction > 0.0 and r.reorder_max > 0


def test_ordered_flows_are_pinned_and_never_reordered() -> None:
    flows = tuple(Flow(f.src, f.dst, f.packets, ordered=True) for f in permutation(FAB, PACKETS, seed=1))
    r = simulate(FAB, flows, "prime", LinkFaults(capacity={FAB.up(0, 1): 0.5}), seed=0)
    assert r.reorder_fraction == 0.0
    assert r.delivered.tolist() == [PACKETS] * len(flows)


def test_link_failed_from_the_start_carries_nothing() -> None:
    up = FAB.up(0, 2)
    flows = permutation(FAB, PACKETS, seed=2)
    for kind in KINDS:
        r = simulate(FAB, flows, kind, LinkFaults(failed={up: 0}), Transport(detect=0), seed=0)
        assert r.link_packets[up] == 0 and r.lost == 0
        assert r.delivered.tolist() == [PACKETS] * len(flows)


@pytest.mark.parametrize("kind", KINDS)
def test_link_failing_mid_run_loses_until_withdrawn_then_nothing(kind: str) -> None:
    up = FAB.up(1, 0)
    flows = permutation(FAB, PACKETS, seed=2)
    r = simulate(FAB, flows, kind, LinkFaults(failed={up: 20}), Transport(detect=30), seed=4)
    assert r.lost > 0  # what it held and what reached it before routing withdrew it
    assert 0 <= r.last_sent_slot[up] < 20 and r.last_sent_slot.max() > 20
    assert int(r.offered_after_withdraw.sum()) == 0
    # Retransmissions make every flow whole, once each.
    assert r.delivered.tolist() == [PACKETS] * len(flows) and r.duplicates == 0
    share = PACKETS * FAB.hosts_per_leaf / FAB.spines
    assert r.link_packets[up] < share


def test_reweighting_moves_load_off_a_degraded_link() -> None:
    fab = LeafSpine(leaves=2, spines=4, hosts_per_leaf=4)
    up = fab.up(0, 0)
    flows = permutation(fab, 256, seed=0)
    faults = LinkFaults(capacity={up: 0.25})
    prr = simulate(fab, flows, "prr", faults, seed=0)
    prime = simulate(fab, flows, "prime", faults, seed=0)
    leaf0 = sum(f.packets for f in flows if fab.leaf_of(f.src) == 0)
    assert prr.link_packets[up] == pytest.approx(leaf0 / fab.spines, abs=fab.hosts_per_leaf)
    assert prime.link_packets[up] < 0.8 * prr.link_packets[up]
    assert prime.max_queue < prr.max_queue
    assert prime.fct_us(99) < prr.fct_us(99)


def test_chooser_weights_fall_with_signals_and_recover_with_decay() -> None:
    cfg = ChooserConfig(alpha=1.0, decay_slots=50.0, floor=0.05)
    c = PathChooser("prime", [0, 1, 2, 3], np.random.default_rng(0), config=cfg)
    assert c.weight(1, 0) == 1.0
    for _ in range(2):
        c.signal(1, 1.0, 0)
    assert c.weight(1, 0) == pytest.approx(np.exp(-2.0))
    c.signal(1, 1.0, 0)
    assert c.weight(1, 0) == cfg.floor  # e^-3 is below the floor
    assert c.weight(1, 500) > 0.99  # ten e-folding times later the penalty is gone
    picks = [c.next(0) for _ in range(400)]
    counts = np.bincount(picks, minlength=4)
    assert counts[1] < 0.1 * counts[0]
    assert max(counts[[0, 2, 3]]) - min(counts[[0, 2, 3]]) <= 1  # unpenalised: once a round each
    c.withdraw(1)
    assert 1 not in [c.next(0) for _ in range(40)]


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown spraying kind 'ecmp'; known: random, round-robin, prr, prime"):
        PathChooser("ecmp", [0], np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown spraying kind 'ecmp'"):
        simulate(FAB, (), "ecmp")
    with pytest.raises(ValueError, match=r"degraded link 3: .* fraction in \(0, 1\], got 1.5"):
        simulate(FAB, (), "prr", LinkFaults(capacity={3: 1.5}))


def test_a_run_cut_short_says_how_many_flows_did_not_finish() -> None:
    r = simulate(FAB, permutation(FAB, PACKETS, seed=0), "prr", max_slots=PACKETS // 2)
    assert r.unfinished == FAB.hosts and r.fct_slots.size == 0 and r.throughput == 0.0


def test_same_seed_same_run_other_seed_other_run() -> None:
    flows = permutation(FAB, PACKETS, seed=0)
    a = simulate(FAB, flows, "random", seed=7)
    b = simulate(FAB, flows, "random", seed=7)
    c = simulate(FAB, flows, "random", seed=8)
    assert a.summary() == b.summary() and np.array_equal(a.link_packets, b.link_packets)
    assert not np.array_equal(a.link_packets, c.link_packets)


def test_permutation_crosses_leaves_and_scenarios_render() -> None:
    flows = permutation(FAB, 8, seed=9)
    assert sorted(f.dst for f in flows) == list(range(FAB.hosts))
    assert all(FAB.leaf_of(f.src) != FAB.leaf_of(f.dst) for f in flows)
    with pytest.raises(ValueError, match="at least two leaves"):
        permutation(LeafSpine(leaves=1), 8)
    runs = run_all(FAB, 32, seeds=(0,), names=select(["failed", "permutation", "failed"]), kinds=("prr", "prime"))
    assert list(runs) == ["failed link", "permutation"]
    doc = document(runs, {"fabric": "2x4x2", "packets": 32, "packet_bytes": 4096, "seeds": [0], "elapsed_s": 0.0})
    assert [row["scenario"] for row in doc["comparison"]] == ["permutation", "failed link"]
    text = markdown(doc)
    assert "| failed link | prime |" in text and "| permutation | throughput | +15% |" in text
    assert list(SCENARIO_KEYS.values()) == list(run_all(FAB, 8, seeds=(0,), kinds=("prr",)))
    with pytest.raises(ValueError, match="unknown scenario 'x'; known: permutation, degraded, failed, mixed"):
        select(["x"])


def test_coalesced_acks_without_deaggregation_hide_the_degraded_link() -> None:
    """With one ACK per 8 packets, an echo pinned on the last packet's path misses most marks of the slow one."""
    fab = LeafSpine(leaves=2, spines=4, hosts_per_leaf=4)
    up = fab.up(0, 0)
    flows = permutation(fab, 256, seed=0)
    faults = LinkFaults(capacity={up: 0.25})
    split = simulate(fab, flows, "prime", faults, Transport(ack_every=8, deaggregate=True), seed=0)
    lumped = simulate(fab, flows, "prime", faults, Transport(ack_every=8, deaggregate=False), seed=0)
    even = sum(f.packets for f in flows if fab.leaf_of(f.src) == 0) / fab.spines
    assert split.link_packets[up] < 0.8 * lumped.link_packets[up] and lumped.link_packets[up] < even


def test_an_ordered_flow_is_rehashed_when_its_path_fails_and_a_flow_without_paths_stops_the_run() -> None:
    flow = Flow(0, 2, PACKETS, ordered=True)
    first = simulate(FAB, (flow,), "prime")
    spine = int(np.argmax([first.link_packets[FAB.up(0, s)] for s in range(FAB.spines)]))
    assert first.link_packets[FAB.up(0, spine)] == PACKETS  # pinned: all on one path
    r = simulate(FAB, (flow,), "prime", LinkFaults(failed={FAB.up(0, spine): 10}), Transport(detect=20))
    assert r.delivered.tolist() == [PACKETS] and r.reorder_fraction > 0.0  # the retransmissions arrive late
    assert sum(r.link_packets[FAB.up(0, s)] > 0 for s in range(FAB.spines)) == 2
    cut = LinkFaults(failed={FAB.up(0, s): 0 for s in range(FAB.spines)})
    r = simulate(FAB, (flow, Flow(2, 0, PACKETS)), "prr", cut, Transport(detect=0))
    assert r.unfinished == 1 and r.delivered.tolist() == [0, PACKETS] and r.slots < 10 * PACKETS


def test_a_run_without_finished_flows_has_no_fct_and_no_comparison() -> None:
    flows = permutation(FAB, PACKETS, seed=0)
    runs = {"degraded link": {"prr": [simulate(FAB, flows, "prr", max_slots=PACKETS // 2)],
                              "prime": [simulate(FAB, flows, "prime")]}}
    doc = document(runs, {"fabric": "2x4x2", "packets": PACKETS, "packet_bytes": 4096, "seeds": [0],
                          "elapsed_s": 0.0})
    prr = doc["results"][0]
    assert (prr["fct_p50_us"], prr["fct_p99_us"], prr["unfinished"]) == (None, None, FAB.hosts)
    assert doc["comparison"][0]["prime"] > 0 and doc["comparison"][0]["vs_best"] is None
    assert "| degraded link | prr | 0.000 | - | - |" in markdown(doc)
    assert "| degraded link | FCT p99 | -27% | - | - | - |" in markdown(doc)
