"""Faults in the engine: link down/up, degraded links, switch reboots, counter32 wrap."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import HEADER_BYTES, Engine
from flowtracer.sim.fabric.faults import FaultError
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import Workload, WorkloadError, validate_workload
from flowtracer.sim.hosts.views import host_view_dir, write_host_view
from flowtracer.sim.switches.state import Event, EventKind

G = 1_000_000_000
START = 1_700_000_000 * G
EFF = 4096 / (4096 + HEADER_BYTES)
TICK = G // 4


def fabric(hosts: int = 8, spines: int = 2, speed: int = 100 * G) -> Topology:
    return generate(FabricSpec(hosts=hosts, leaves=2, spines=spines, link_speed_bps=speed, host_speed_bps=speed))


def steady(tmp: Path, topo: Topology | None = None, **kw: object) -> Engine:
    """host01-04 (leaf01) send to host05-08 (leaf02) as fast as they can; 0.25 s ticks."""
    e = Engine(topo or fabric(), Workload(seed=2), tick_s=0.25, start_ns=START, ground_truth=tmp / "gt", **kw)  # type: ignore[arg-type]
    for i in range(1, 5):
        e.add_steady_flow(f"host0{i}:mlx5_0", f"host0{i + 4}:mlx5_0")
    return e


def record_events(e: Engine) -> list[tuple[str, Event]]:
    seen: list[tuple[str, Event]] = []
    for name, st in e.switch_states.items():
        st.add_listener(lambda ev, name=name: seen.append((name, ev)))
    return seen


UPLINK1 = "leaf01:Ethernet5"  # leaf01 <-> spine01
UPLINK1_ID = "leaf01:Ethernet5>spine01:Ethernet1"
UPLINK2_ID = "leaf01:Ethernet6>spine02:Ethernet1"


def test_link_down_shrinks_groups_rehashes_flows_and_goes_oper_down_on_both_ends(tmp_path: Path) -> None:
    e = steady(tmp_path)
    seen = record_events(e)
    e.advance(2)
    e.inject("link_down", UPLINK1)
    e.advance(2)
    e.inject("link_up", "spine01:Ethernet1")  # the same cable, named by its other end
    e.advance(2)
    e.close()
    gt = GroundTruth.load(tmp_path / "gt")
    t_down, t_up = START + 2 * TICK, START + 4 * TICK

    before = gt.link_bytes(START, t_down)
    assert before.get(UPLINK1_ID, 0) > 0 and before.get(UPLINK2_ID, 0) > 0  # both uplinks used
    during = gt.link_bytes(t_down, t_up)
    assert UPLINK1_ID not in during and "spine01:Ethernet1>leaf01:Ethernet5" not in during
    assert during[UPLINK2_ID] == pytest.approx(100 * G / 8 * 0.5, rel=1e-6)  # everything on the survivor
    for fw in gt.flows_in(t_down, t_up):  # flows moved off the dead link
        assert UPLINK1_ID not in fw.paths[0]
    moved = {fw.flow.id for fw in gt.flows_in(START, t_down) if UPLINK1_ID in fw.paths[0]}
    assert moved and all(UPLINK2_ID in fw.paths[0] for fw in gt.flows_in(t_down, t_up) if fw.flow.id in moved)
    after = gt.link_bytes(t_up, t_up + 2 * TICK)
    assert after.get(UPLINK1_ID, 0) > 0  # flows hash back

    # Oper status on both ends, with events at the boundary; the group lost and regained a member.
    # (counters_at(t) is what the sample at t showed: the fault at t is visible from the next one.)
    assert gt.counters_at("leaf01", t_down).oper_up["Ethernet5"] is True
    c = gt.counters_at("leaf01", t_down + TICK)
    assert c.oper_up["Ethernet5"] is False and gt.counters_at("spine01", t_down + TICK).oper_up["Ethernet1"] is False
    (gid, (name, members)), = c.groups.items()
    assert name == "leaf01:spine01|spine02" and len(members) == 1
    assert len(c.next_hops) == 2  # the next hop stays, out of the group, its counters frozen
    assert len(gt.counters_at("leaf01", t_up + TICK).groups[gid][1]) == 2
    assert gt.counters_at("leaf01", t_up + TICK).oper_up["Ethernet5"] is True
    oper = [(n, ev.interface, ev.timestamp_ns) for n, ev in seen if ev.kind is EventKind.OPER_STATUS]
    assert oper == [("leaf01", "Ethernet5", t_down), ("spine01", "Ethernet1", t_down),
                    ("leaf01", "Ethernet5", t_up), ("spine01", "Ethernet1", t_up)]
    st = e.switch_states["leaf01"].snapshot()
    assert st.interfaces["Ethernet5"].last_change_ns == t_up
    # Samples are stamped with tick ends, one per tick per switch.
    samples = [ev.timestamp_ns for n, ev in seen if n == "leaf01" and ev.kind is EventKind.SAMPLE]
    assert samples == [START + k * TICK for k in range(1, 7)]
    kinds = [ev["kind"] for ev in gt.events]
    assert kinds.count("link_down") == 1 and kinds.count("oper-status") == 4


def test_host_cable_down_stalls_its_flow_without_losing_bytes(tmp_path: Path) -> None:
    e = steady(tmp_path)
    e.advance(1)
    e.inject("link_down", "host01:mlx5_0")
    e.advance(2)
    e.close()
    gt = GroundTruth.load(tmp_path / "gt")
    during = {fw.flow.src_host for fw in gt.flows_in(START + TICK, START + 3 * TICK)}
    assert "host01" not in during and "host02" in during
    sent, received = gt.nic_bytes(START, START + 3 * TICK)
    assert sum(sent.values()) == sum(received.values())


def test_degraded_link_has_less_capacity(tmp_path: Path) -> None:
    e = steady(tmp_path, topo=fabric(spines=1))  # one uplink: all four flows cross it
    e.advance(1)
    e.inject("degrade", UPLINK1, capacity=0.25)
    e.advance(1)
    e.inject("restore", UPLINK1)
    e.advance(1)
    e.close()
    gt = GroundTruth.load(tmp_path / "gt")
    full = gt.link_bytes(START, START + TICK)[UPLINK1_ID]
    degraded = gt.link_bytes(START + TICK, START + 2 * TICK)[UPLINK1_ID]
    restored = gt.link_bytes(START + 2 * TICK, START + 3 * TICK)[UPLINK1_ID]
    assert full == pytest.approx(100 * G / 8 / 4, rel=1e-6)
    assert degraded == pytest.approx(full / 4, rel=1e-5)
    assert restored == full


def test_reboot_restarts_counters_changes_ids_and_comes_back(tmp_path: Path) -> None:
    e = steady(tmp_path)
    seen = record_events(e)
    e.advance(2)
    old = e.switch_states["leaf01"].snapshot()
    e.inject("reboot", "leaf01", down_for_s=0.5)
    e.advance(1)
    st = e.switch_states["leaf01"]
    snap = st.snapshot()
    assert (snap.boot_epoch, st.available) == (1, False)
    assert all(v == 0 for i in snap.interfaces.values() for v in i.counters.values())
    assert set(snap.groups).isdisjoint(old.groups) and set(snap.next_hops).isdisjoint(old.next_hops)
    e.advance(2)  # back at START + 4 ticks, one more tick of traffic
    e.close()
    assert st.available
    gt = GroundTruth.load(tmp_path / "gt")
    t_reboot, t_boot = START + 2 * TICK, START + 4 * TICK
    assert gt.counters_at("leaf01", t_reboot).boot_epoch == 0  # the last sample before the reboot
    assert gt.counters_at("leaf01", t_reboot).interfaces["Ethernet5"]["out-octets"] > 0
    assert not gt.counters_at("leaf01", t_boot).available
    after = gt.counters_at("leaf01", t_boot + TICK)
    assert after.available and after.last_clear_ns == t_boot and after.boot_epoch == 1
    moved = gt.link_bytes(t_boot, t_boot + TICK)
    assert after.interfaces["Ethernet5"]["out-octets"] == moved[UPLINK1_ID] > 0  # counting from 0 again
    assert gt.link_bytes(t_reboot, t_boot) == {}  # leaf01 carries every flow: nothing moved meanwhile
    reboots = [(n, ev.timestamp_ns) for n, ev in seen if ev.kind is EventKind.REBOOT]
    assert reboots == [("leaf01", t_reboot)]
    # Neighbours saw their ports to leaf01 go down and come back; leaf01 sent no samples while away.
    spine_oper = [(ev.interface, ev.timestamp_ns) for n, ev in seen if n == "spine01" and ev.kind is EventKind.OPER_STATUS]
    assert spine_oper == [("Ethernet1", t_reboot), ("Ethernet1", t_boot)]
    leaf_samples = [ev.timestamp_ns for n, ev in seen if n == "leaf01" and ev.kind is EventKind.SAMPLE]
    assert leaf_samples == [START + TICK, t_reboot, t_boot + TICK]


def test_counter32_wraps_published_counters(tmp_path: Path) -> None:
    topo = fabric(speed=400 * G)
    e = steady(tmp_path, topo=topo, counter32=True)
    e.advance(4)  # 1 s at 400G: 50 GB per host link, far past 2**32
    e.close()
    gt = GroundTruth.load(tmp_path / "gt")
    true = sum(gt.link_bytes(START, START + 4 * TICK).get(lid, 0) for lid in ["host01:mlx5_0>leaf01:Ethernet1"])
    assert true > 2**32
    c = gt.counters_at("leaf01", START + 4 * TICK)
    assert c.interfaces["Ethernet1"]["in-octets"] == true % 2**32
    assert e.switch_states["leaf01"].counter_bits == 32
    assert e.counters.if_tot.max() > 2**32  # the engine keeps the true totals


def test_scheduled_faults_from_the_workload_and_bad_targets(tmp_path: Path) -> None:
    wl = validate_workload({"background": [{"flows": 2, "rate": "10G"}],
                            "faults": [{"at": "0.3s", "link_down": UPLINK1}, {"at": "0.6s", "link_up": UPLINK1}]}, "t")
    e = Engine(fabric(), wl, tick_s=0.25, start_ns=START, ground_truth=tmp_path / "gt")
    e.advance(4)
    e.close()
    gt = GroundTruth.load(tmp_path / "gt")
    # A fault applies at the first tick end at or after its time.
    assert [(ev["kind"], ev["t_ns"]) for ev in gt.events if ev["kind"] in ("link_down", "link_up")] == [
        ("link_down", START + 2 * TICK), ("link_up", START + 3 * TICK)]
    bad = validate_workload({"faults": [{"at": 1, "link_down": "leaf01:Ethernet99"}]}, "t")
    with pytest.raises(WorkloadError, match=r"faults\[0\].link_down: no cable ends at 'leaf01:Ethernet99'"):
        Engine(fabric(), bad, start_ns=START)
    with pytest.raises(FaultError, match="no switch named 'spine9'"):
        e.inject("reboot", "spine9")


def test_a_next_hop_withdrawn_and_a_weight_changed_show_in_the_aft_with_the_cable_up(tmp_path: Path) -> None:
    wl = validate_workload({"faults": [{"at": "0.5s", "nh_withdraw": UPLINK1}, {"at": "1s", "nh_restore": UPLINK1},
                                       {"at": "1s", "nh_weight": UPLINK1, "weight": 3}]}, "t")
    e = Engine(fabric(), wl, tick_s=0.25, start_ns=START, ground_truth=tmp_path / "gt")
    for i in range(1, 5):
        e.add_steady_flow(f"host0{i}:mlx5_0", f"host0{i + 4}:mlx5_0")
    e.advance(3)
    st = e.switch_states["leaf01"].snapshot()
    (group,) = st.groups.values()
    assert [st.next_hops[i].interface for i in group.next_hops] == ["Ethernet6"]  # withdrawn ...
    assert len(st.next_hops) == 2 and st.interfaces["Ethernet5"].oper_up  # ... the next hop kept, the cable up
    e.advance(2)
    st = e.switch_states["leaf01"].snapshot()
    (group,) = st.groups.values()
    assert sorted((st.next_hops[i].interface, w) for i, w in group.next_hops.items()) == [
        ("Ethernet5", 3), ("Ethernet6", 1)]
    e.close()
    gt = GroundTruth.load(tmp_path / "gt")
    t_w, t_r = START + 2 * TICK, START + 4 * TICK
    assert UPLINK1_ID not in gt.link_bytes(t_w, t_r)  # the switch routes around the withdrawn next hop ...
    assert gt.link_bytes(t_r, t_r + TICK).get(UPLINK1_ID, 0) > 0  # ... and back after the restore
    assert not [ev for ev in gt.events if ev["kind"] == "oper-status"]
    assert [(ev["kind"], ev["t_ns"], ev.get("weight")) for ev in gt.events] == [
        ("nh_withdraw", t_w, None), ("nh_restore", t_r, None), ("nh_weight", t_r, 3)]
    with pytest.raises(FaultError, match="not a switch-to-switch port"):
        e.inject("nh_withdraw", "leaf01:Ethernet1")
    with pytest.raises(WorkloadError, match="weight"):
        validate_workload({"faults": [{"at": 1, "nh_weight": UPLINK1, "weight": 0}]}, "t")


def test_gnmi_silent_switch_emits_nothing_while_it_forwards_and_the_ground_truth_says_so(tmp_path: Path) -> None:
    e = steady(tmp_path)
    seen = record_events(e)
    e.advance(2)
    t_silent = e.now_ns
    e.inject("gnmi_silent", "leaf01")
    e.inject("link_down", UPLINK1)  # an oper change while silent is not sent either
    e.advance(3)
    t_resume = e.now_ns
    e.inject("gnmi_resume", "leaf01")
    e.advance(2)
    e.close()
    leaf01 = [ev for sw, ev in seen if sw == "leaf01"]
    during = [(ev.kind, ev.timestamp_ns) for ev in leaf01 if t_silent <= ev.timestamp_ns <= t_resume]
    assert during == [(EventKind.SAMPLE, t_silent)]  # published before the fault; then nothing, no oper change
    assert [ev.kind for sw, ev in seen if sw == "spine01" and t_silent <= ev.timestamp_ns <= t_resume] == [
        EventKind.SAMPLE, EventKind.OPER_STATUS] + [EventKind.SAMPLE] * 3  # the cable's other end tells
    assert [ev.timestamp_ns for ev in leaf01 if ev.kind is EventKind.SAMPLE and ev.timestamp_ns > t_resume] == [
        t_resume + TICK, t_resume + 2 * TICK]
    gt = GroundTruth.load(tmp_path / "gt")
    assert gt.link_bytes(t_silent, t_resume)[UPLINK2_ID] > 0  # it forwards
    assert [gt.counters_at("leaf01", t).silent for t in range(t_silent, t_resume + 2 * TICK, TICK)] == [
        False, True, True, True, False]  # the sample stamped at the fault went out; the one at the resume did not
    assert [(ev["kind"], ev["target"], ev["t_ns"]) for ev in gt.events if ev["kind"].startswith("gnmi")] == [
        ("gnmi_silent", "leaf01", t_silent), ("gnmi_resume", "leaf01", t_resume)]


def test_agent_stop_freezes_the_host_view_while_the_host_forwards(tmp_path: Path) -> None:
    e = steady(tmp_path)
    views = tmp_path / "views"
    current = host_view_dir(views, "host01") / "current"
    stamps: list[int] = []

    def write(_t: int) -> None:
        for hs in e.host_states.values():
            write_host_view(hs, views)
        stamps.append(int(current.resolve().name.split("-")[0]))

    e.add_tick_listener(write)
    e.advance(2)
    t_stop = e.now_ns
    e.inject("agent_stop", "host01")
    e.advance(3)
    t_resume = e.now_ns
    e.inject("agent_resume", "host01")
    e.advance(1)
    e.close()
    # ticks t_stop - TICK .. t_resume + TICK: written up to the stop's tick, then frozen, then the tick after resume
    assert stamps == [t_stop - TICK, t_stop, t_stop, t_stop, t_stop, t_resume + TICK]
    other = host_view_dir(views, "host02") / "current"
    assert int(other.resolve().name.split("-")[0]) == t_resume + TICK  # the others keep reporting
    gt = GroundTruth.load(tmp_path / "gt")
    assert gt.link_bytes(t_stop, t_resume)["host01:mlx5_0>leaf01:Ethernet1"] > 0  # host01 still sends
    assert [gt.agent_reporting("host01", t) for t in range(t_stop, t_resume + 2 * TICK, TICK)] == [
        True, False, False, False, True]
    assert gt.agent_reporting("host02", t_resume)
