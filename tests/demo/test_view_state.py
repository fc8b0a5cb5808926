"""The terminal view's state built from output records (no servers): FIM and its history, current collisions,
open incidents with their top suspect, health; and when each item was first seen."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flowtracer.demo.status import INCIDENT_IDS_KEPT, INCIDENT_STALE_S, PRUNE_EVERY_NS, Observed
from flowtracer.demo.view_state import first_seen, view_state
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, common_pb2

S = 1_000_000_000
T0 = 1_800_000_000 * S
SWITCHES = frozenset({"leaf01", "leaf02", "spine01", "spine02"})
UP = "leaf01:Ethernet5>spine01:Ethernet1"


def fim(end: int, value: float, basis: int = analytics_pb2.LOAD_BASIS_MEASURED) -> bytes:
    return analytics_pb2.FimSample(schema_version=1, window_end_ns=end, group="fabric", basis=basis,
                                   fim=value).SerializeToString()


def collision(end: int, group: str = "leaf01:spine01|spine02", link: str = UP, harmful: bool = True) -> bytes:
    flows = [common_pb2.FlowRef(key=common_pb2.FlowKey(src_ip="10.0.0.4", dst_ip="10.0.0.5", udp_src_port=p),
                                src_host="host04", dst_host="host05", bytes=10**10) for p in (59280, 61397)]
    return analytics_pb2.Collision(schema_version=1, window_end_ns=end, switch="leaf01", group=group, link=link,
                                   idle_link="leaf01:Ethernet6>spine02:Ethernet1", link_utilization=0.9,
                                   idle_utilization=0.05, flows=flows, harmful=harmful,
                                   harm_basis="queue").SerializeToString()


def incident(iid: str, state: str, start: int, suspect: str = "cable:leaf03:Ethernet5~spine01:Ethernet3") -> bytes:
    return analytics_pb2.Incident(schema_version=1, window_end_ns=start, id=iid, kind="degraded_link", state=state,
                                  start_ns=start, suspects=[analytics_pb2.Suspect(component=suspect, score=1.5)],
                                  flows=["host09:mlx5_0>host12:mlx5_0"], hosts=["host09", "host12"],
                                  jobs=["4711"]).SerializeToString()


def observed(windows: int = 5) -> Observed:
    obs = Observed(switch_names=SWITCHES)
    for k in range(1, windows + 1):
        end = T0 + k * S
        obs.add(topics.FIM.name, fim(end, 0.1 * k), 0)
        obs.add(topics.FIM.name, fim(end, 0.05 * k, analytics_pb2.LOAD_BASIS_ATTRIBUTED), 0)
        ll = analytics_pb2.LinkLoad(schema_version=1, window_end_ns=end, link=UP, src_node="leaf01",
                                    dst_node="spine01", measured_valid=True, measured_bytes=10**9)
        obs.add(topics.LINK_LOADS.name, ll.SerializeToString(), 0)
        obs.add(topics.COLLISIONS.name, collision(end), 0)
    return obs


def test_the_view_holds_the_newest_fim_its_history_collisions_and_health() -> None:
    obs = observed()
    obs.add(topics.DEAD_LETTER.name, analytics_pb2.DeadLetter(topic="t", reason="x").SerializeToString(), 0)
    v = view_state(obs, "t", "12s/60s", now_ns=T0 + 7 * S, stages=[("sim", True), ("collect", False)])
    assert (v.window_end_ns, v.fim_measured, v.fim_attributed) == (T0 + 5 * S, 0.5, 0.25)
    assert v.fim_history == pytest.approx((0.1, 0.2, 0.3, 0.4, 0.5))
    [c] = v.collisions
    assert (c.key, c.flows, c.harmful, c.utilization) == (f"leaf01:spine01|spine02|{UP}", 2, True, 0.9)
    assert c.sample_flows == ("host04>host05:59280", "host04>host05:61397")
    h = v.health
    assert (h.lag_s, h.windows, h.switches, h.dead_letters, h.down) == (2.0, 5, 1, 1, ("collect",))
    assert v.incidents == () and v.incidents_closed == 0 and v.iteration_ms is None


def test_a_collision_not_seen_for_three_windows_leaves_the_view_but_is_counted() -> None:
    obs = observed()
    for k in range(6, 10):
        obs.add(topics.COLLISIONS.name, collision(T0 + k * S, group="leaf02:spine01|spine02",
                                                  link="leaf02:Ethernet5>spine01:Ethernet2", harmful=False), 0)
    v = view_state(obs, "t", "x", now_ns=T0 + 10 * S)
    assert [c.group for c in v.collisions] == ["leaf02:spine01|spine02"] and v.collisions_seen == 2


def test_open_incidents_come_from_the_incidents_topic_newest_first_and_closed_ones_are_counted() -> None:
    obs = observed()
    obs.add(topics.INCIDENTS.name, incident("a", "open", T0 + S), 0)
    obs.add(topics.INCIDENTS.name, incident("b", "open", T0 + 3 * S, suspect="port:x"), 0)
    obs.add(topics.INCIDENTS.name, incident("c", "open", T0 + 2 * S), 0)
    obs.add(topics.INCIDENTS.name, incident("c", "closed", T0 + 2 * S), 0)
    v = view_state(obs, "t", "x", now_ns=T0 + 6 * S)
    assert [(i.id, i.suspect, i.score, i.jobs, i.flows, i.hosts) for i in v.incidents] == [
        ("b", "port:x", 1.5, ("4711",), 1, 2), ("a", "cable:leaf03:Ethernet5~spine01:Ethernet3", 1.5, ("4711",), 1, 2)]
    assert v.incidents_closed == 1


def test_first_seen_keeps_the_first_time_and_forgets_what_left() -> None:
    obs = observed()
    obs.add(topics.INCIDENTS.name, incident("a", "open", T0 + S), 0)
    v = view_state(obs, "t", "x", now_ns=T0 + 6 * S)
    seen = first_seen({}, v)
    assert seen == {f"leaf01:spine01|spine02|{UP}": T0 + 6 * S, "a": T0 + 6 * S}
    later = replace(v, now_ns=T0 + 9 * S, incidents=())
    assert first_seen(seen, later) == {f"leaf01:spine01|spine02|{UP}": T0 + 6 * S}


def test_incident_counts_stay_bounded_and_a_snapshot_resent_counts_once() -> None:
    obs = observed()
    n = INCIDENT_IDS_KEPT + 10
    for k in range(n):
        obs.add(topics.INCIDENTS.name, incident(f"i{k}", "open", T0 + S), 0)
        obs.add(topics.INCIDENTS.name, incident(f"i{k}", "closed", T0 + S), 0)
        obs.add(topics.INCIDENTS.name, incident(f"i{k}", "closed", T0 + S), 0)  # a resent snapshot (at least once)
    assert (obs.incidents_read, obs.incidents_closed) == (n, n)
    assert len(obs.incident_states) == INCIDENT_IDS_KEPT and not obs.open_incidents


def test_an_open_incident_nobody_updates_ages_out_and_is_counted_stale() -> None:
    obs = observed()
    obs.add(topics.INCIDENTS.name, incident("gone", "open", T0 + S), 0)  # its diagnosis stops updating it
    live_at = T0 + S + round(INCIDENT_STALE_S * S)
    obs.add(topics.INCIDENTS.name, incident("live", "open", live_at), 0)
    # Windows go on: the fabric's window ends reach the stale age of the first incident.
    for k in range(2):
        end = live_at + k * PRUNE_EVERY_NS + S
        ll = analytics_pb2.LinkLoad(schema_version=1, window_end_ns=end, link=UP, src_node="leaf01",
                                    dst_node="spine01", measured_valid=True, measured_bytes=10**9)
        obs.add(topics.LINK_LOADS.name, ll.SerializeToString(), 0)
    v = view_state(obs, "t", "x", now_ns=live_at + 2 * S)
    assert [i.id for i in v.incidents] == ["live"] and v.incidents_stale == 1 and v.incidents_closed == 0
