"""The ground-truth reader: windows, counters at sample times, next-hop loads, paths that change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import preset

G = 1_000_000_000
START = 1_700_000_000 * G
TICK = G // 4


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, GroundTruth]:
    tmp = tmp_path_factory.mktemp("gt")
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2, link_speed_bps=100 * G, host_speed_bps=100 * G))
    e = Engine(topo, preset("alltoall", size="256MiB", channels=2, compute_gap="10ms", seed=4), tick_s=0.25,
               start_ns=START, ground_truth=tmp)
    e.advance(3)
    e.inject("link_down", "leaf01:Ethernet3")
    e.advance(3)
    e.close()
    return e, GroundTruth.load(tmp)


def test_meta_and_catalogs(run: tuple[Engine, GroundTruth]) -> None:
    _, gt = run
    assert (gt.tick_ns, gt.start_ns) == (TICK, START)
    assert gt.meta["header_bytes"] == 62 and gt.meta["mtu"] == 4096
    assert gt.meta["ecmp_groups"]["leaf01:spine01|spine02"] == ["leaf01:Ethernet3>spine01:Ethernet1",
                                                               "leaf01:Ethernet4>spine02:Ethernet1"]
    assert gt.tick_ends == [START + k * TICK for k in range(1, 7)]
    assert gt.counter_times == [START, *gt.tick_ends]
    f = next(iter(gt.flows.values()))
    assert f.udp_dst_port == 4791 and 0xC000 <= f.udp_src_port <= 0xFFFF and f.src_nic.startswith("host")


def test_counters_at_gives_the_sample_at_or_before(run: tuple[Engine, GroundTruth]) -> None:
    _, gt = run
    assert gt.counters_at("leaf01", START).interfaces["Ethernet1"]["in-octets"] == 0
    exact = gt.counters_at("leaf01", START + 2 * TICK)
    assert gt.counters_at("leaf01", START + 2 * TICK + 1).t_ns == exact.t_ns == START + 2 * TICK
    with pytest.raises(KeyError):
        gt.counters_at("leaf01", START - 1)
    # Deltas between any two samples equal the ground-truth link bytes of the ticks between them.
    a, b = START + TICK, START + 5 * TICK
    delta = (gt.counters_at("leaf01", b).interfaces["Ethernet4"]["out-octets"]
             - gt.counters_at("leaf01", a).interfaces["Ethernet4"]["out-octets"])
    assert delta == gt.link_bytes(a, b)["leaf01:Ethernet4>spine02:Ethernet1"] > 0


def test_next_hop_counters_match_group_member_loads(run: tuple[Engine, GroundTruth]) -> None:
    _, gt = run
    a, b = START, START + 6 * TICK
    loads = gt.group_loads(a, b)["leaf01:spine01|spine02"]
    c0, c1 = gt.counters_at("leaf01", a), gt.counters_at("leaf01", b)
    by_iface = {nh.interface: nh.octets_forwarded for nh in c1.next_hops.values()}
    start_by_iface = {nh.interface: nh.octets_forwarded for nh in c0.next_hops.values()}
    assert [by_iface[i] - start_by_iface[i] for i in ("Ethernet3", "Ethernet4")] == loads
    assert {nh.ip_address for nh in c1.next_hops.values()} == {"172.16.0.1", "172.16.0.3"}  # spines' /31 ends
    # Uplinks only carry ECMP-forwarded traffic here, so next-hop octets equal interface out-octets.
    assert by_iface["Ethernet4"] == c1.interfaces["Ethernet4"]["out-octets"]


def test_windows_and_paths_that_change(run: tuple[Engine, GroundTruth]) -> None:
    _, gt = run
    t_down = START + 3 * TICK
    # A window covers the ticks inside it, whole ones only.
    assert gt.link_bytes(START, START + TICK + TICK // 2) == gt.link_bytes(START, START + TICK)
    assert gt.link_bytes(START + 1, START + TICK) == {}
    rerouted = [fw for fw in gt.flows_in(START, START + 6 * TICK) if len(fw.paths) == 2]
    assert rerouted, "some flow was on the link that went down"
    cable = {"leaf01:Ethernet3>spine01:Ethernet1", "spine01:Ethernet1>leaf01:Ethernet3"}
    for fw in rerouted:  # both directions of the cable are out: flows either way move to spine02
        assert cable & set(fw.paths[0]) and not cable & set(fw.paths[1])
        assert any("spine02" in lid for lid in fw.paths[1])
    events = gt.events_in(t_down, t_down, "oper-status")
    assert {e["target"] for e in events} == {"leaf01:Ethernet3", "spine01:Ethernet1"}
    assert all(e["up"] is False for e in events)
    sent, received = gt.nic_bytes(START, START + 6 * TICK)
    assert sum(sent.values()) == sum(received.values()) > 0


def test_partial_last_line_is_ignored_and_ground_truth_can_be_off(tmp_path: Path) -> None:
    d = tmp_path / "gt"
    topo = generate(FabricSpec(hosts=2, leaves=1, spines=1))
    e = Engine(topo, preset("ring-allreduce", size="1MiB"), start_ns=START, ground_truth=d)
    e.advance(2)
    e.close()
    with open(d / "ticks.jsonl", "a") as f:
        f.write(json.dumps({"start_ns": 1})[:5])  # a writer caught mid-line
    assert len(GroundTruth.load(d).ticks) == 2
    off = Engine(topo, preset("ring-allreduce", size="1MiB"), start_ns=START)
    off.advance(1)
    assert off.gt is None
