"""``flowtracer path``'s pure parts: the flow-path table (newest path per flow, changes, history, sharing) and the
selection and formatting of flows (demo/flow_path_table.py, demo/path_query.py)."""

from __future__ import annotations

import json

import pytest

from flowtracer.demo.flow_path_table import FlowPathTable
from flowtracer.demo.path_query import QueryError, Selection, change_text, parse_flow, render, select
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.resolvers.contract import FlowObs, Placement
from flowtracer.stream.stages.flow_paths import FlowPaths

S = 1_000_000_000
C = analytics_pb2
FP = topics.FLOW_PATHS.name


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2)))


def obs(fabric: Fabric, src: str, dst: str, n: int, job: str, nbytes: int) -> FlowObs:
    s, d = fabric.nics[src], fabric.nics[dst]
    return FlowObs(flow_id=f"{s.name}/{n}/1", src_nic=s.name, dst_nic=d.name, src_ip=s.nic.ip, dst_ip=d.nic.ip,
                   udp_src_port=49152 + n, udp_dst_port=4791, lqpn=n, rqpn=n + 100, bytes=nbytes, job_id=job,
                   comm_id=f"c-{job}", collective="AllReduce", src_host=s.host, dst_host=d.host)


def published(fabric: Fabric, flows: list[FlowObs], path_index: list[int], end: int = S,
              fp: FlowPaths | None = None) -> list[analytics_pb2.FlowPath]:
    """The records the processor's own rule makes for these flows on these paths in the window ending ``end``."""
    fp = fp or FlowPaths(fabric, S)
    placed = [Placement.single(fabric.equal_cost_paths(f.src_nic, f.dst_nic)[i], 1.0, "hash")
              for f, i in zip(flows, path_index, strict=True)]
    return fp.window(end - S, end, flows, placed, "hash")


def link_load(link: str, util: float, speed: int = 100 * 10**9, end: int = S) -> bytes:
    return analytics_pb2.LinkLoad(schema_version=1, window_end_ns=end, link=link, utilization=util,
                                  speed_bps=speed, measured_valid=True).SerializeToString()


def table_of(records: list[analytics_pb2.FlowPath]) -> FlowPathTable:
    t = FlowPathTable()
    for m in records:
        t.add(FP, m.SerializeToString())
    return t


def test_selection_by_tuple_host_nic_job_and_communicator(fabric: Fabric) -> None:
    a = obs(fabric, "host01:mlx5_0", "host03:mlx5_0", 1, "ring", 10**9)
    b = obs(fabric, "host02:mlx5_0", "host04:mlx5_0", 2, "ring", 10**9)
    c = obs(fabric, "host03:mlx5_0", "host01:mlx5_0", 3, "other", 10**9)
    t = table_of(published(fabric, [a, b, c], [0, 0, 0]))
    ids = lambda sel: [m.flow_id for m in select(t, sel)]  # noqa: E731
    assert ids(Selection(job="ring")) == [a.flow_id, b.flow_id]
    assert ids(Selection(host="host03")) == [c.flow_id, a.flow_id]  # sent or received; by job, then sender
    assert ids(Selection(nic="host04:mlx5_0")) == [b.flow_id]
    assert ids(Selection(comm="c-other")) == [c.flow_id]
    assert ids(Selection(src_ip=a.src_ip, dst_ip=a.dst_ip, udp_src_port=a.udp_src_port)) == [a.flow_id]
    assert ids(Selection(src_ip=a.src_ip, dst_ip=a.dst_ip, udp_src_port=1)) == []
    assert ids(Selection(job="ring", host="host02")) == [b.flow_id]  # all criteria must match
    assert len(ids(Selection())) == 3


def test_flow_argument_errors_name_the_option_and_value() -> None:
    assert parse_flow("10.0.0.1,10.0.3.1,52208") == ("10.0.0.1", "10.0.3.1", 52208)
    assert parse_flow("fd00::1, fd00::2") == ("fd00::1", "fd00::2", None)
    for bad, why in (("10.0.0.1", "expected SRC_IP,DST_IP"), ("10.0.0.x,10.0.0.2", "source IP '10.0.0.x'"),
                     ("10.0.0.1,10.0.0.2,70000", "UDP source port '70000'")):
        with pytest.raises(QueryError, match=why) as e:
            parse_flow(bad)
        assert "--flow" in str(e.value)


def test_text_and_json_show_hops_utilization_and_where_heavy_flows_share_a_link(fabric: Fabric) -> None:
    # two heavy flows from host01 and host02 (both on leaf 1) to leaf 2 on the same path, one light flow
    heavy = 50 * 10**9 // 8  # 50 Gbit/s on 100G links: heavy
    a = obs(fabric, "host01:mlx5_0", "host03:mlx5_0", 1, "ring", heavy)
    b = obs(fabric, "host02:mlx5_0", "host04:mlx5_0", 2, "ring", heavy)
    light = obs(fabric, "host02:mlx5_0", "host03:mlx5_0", 3, "ring", 1000)
    recs = published(fabric, [a, b, light], [0, 0, 0])
    t = table_of(recs)
    for lid in recs[0].links:
        t.add(topics.LINK_LOADS.name, link_load(lid, 0.5))
    data = json.loads(render(t, select(t, Selection(job="ring")), "json"))
    by = {d["flow_id"]: d for d in data}
    assert recs[0].hops[0].out_link in recs[1].links  # both leave leaf01 by the same uplink (path 0 of each pair)
    assert by[a.flow_id]["hops"][0]["shared_with"] == [b.flow_id]
    assert by[a.flow_id]["hops"][1]["shared_with"] == [b.flow_id]  # and the same spine downlink
    assert by[light.flow_id]["hops"][0]["shared_with"] == []  # a light flow is not marked
    assert [h["switch"] for h in by[a.flow_id]["hops"]] == [h.node for h in recs[0].hops]
    assert by[a.flow_id]["hops"][0]["utilization"] == 0.5
    assert by[a.flow_id]["hops"][-1]["shared_with"] == []  # the link to the host is never a shared member
    text = render(t, select(t, Selection(nic="host01:mlx5_0")), "text")
    lines = text.splitlines()
    assert lines[0].startswith(f"flow {a.flow_id}  host01:mlx5_0 -> host03:mlx5_0") and "job ring" in lines[0]
    assert "placed by hash (confidence 1.00)" in lines[1]
    assert [ln.split()[1] for ln in lines[2:]] == [h.node for h in recs[0].hops]
    assert "util  50%" in lines[2]
    assert render(t, select(t, Selection(job="nope")), "text").startswith("no flow matches")


def test_sharing_is_marked_exactly_where_two_heavy_flows_cross_one_member(fabric: Fabric) -> None:
    heavy = 50 * 10**9 // 8
    a = obs(fabric, "host01:mlx5_0", "host03:mlx5_0", 1, "ring", heavy)
    b = obs(fabric, "host02:mlx5_0", "host03:mlx5_0", 2, "ring", heavy)
    same = table_of(published(fabric, [a, b], [0, 0]))  # same NIC pair's leaves, same path: one uplink
    apart = table_of(published(fabric, [a, b], [0, 1]))
    for t in (same, apart):
        for m in t.flows.values():
            for lid in m.links:
                t.add(topics.LINK_LOADS.name, link_load(lid, 0.9))
    up = next(iter(same.flows.values())).hops[0].out_link
    assert same.sharing()[up] == sorted([a.flow_id, b.flow_id])
    assert apart.sharing() == {}
    text = render(same, select(same, Selection(job="ring")), "text")
    assert text.count("* shares with") == 4  # both flows, uplink and spine downlink


def test_the_table_keeps_the_newest_path_the_changes_and_the_history(fabric: Fabric) -> None:
    a = obs(fabric, "host01:mlx5_0", "host03:mlx5_0", 1, "ring", 10**9)
    fp = FlowPaths(fabric, S, heartbeat_windows=2, idle_windows=2)
    t = FlowPathTable()
    recs = published(fabric, [a], [0], S, fp) + published(fabric, [a], [0], 2 * S, fp) \
        + published(fabric, [a], [0], 3 * S, fp) + published(fabric, [a], [1], 4 * S, fp)
    for w in range(5, 9):
        recs += fp.window((w - 1) * S, w * S, [], [], "hash")
    kinds = [m.change for m in recs]
    assert C.FLOW_PATH_CHANGE_HEARTBEAT in kinds and kinds[-1] == C.FLOW_PATH_CHANGE_ENDED
    for m in recs[:-1]:
        t.add(FP, m.SerializeToString())
    assert [m.change for _, m in t.changes] == [C.FLOW_PATH_CHANGE_FIRST, C.FLOW_PATH_CHANGE_PATH]
    p0, p1 = (tuple(fabric.equal_cost_paths(a.src_nic, a.dst_nic)[i]) for i in (0, 1))
    key = (a.src_ip, a.dst_ip, a.udp_src_port)
    assert [t.path_at(key, w * S) for w in (1, 3, 4, 9)] == [p0, p0, p1, p1]
    assert t.path_at(key, 0) == ()
    t.add(FP, recs[0].SerializeToString())  # an old record (a replay) does not roll the flow back
    assert tuple(t.flows[a.flow_id].links) == p1
    t.add(FP, recs[-1].SerializeToString())
    assert a.flow_id not in t.flows and t.path_at(key, 9 * S) == () and t.path_at(key, 4 * S) == p1
    line = change_text(t, recs[-1], "text")
    assert "ended:" in line.splitlines()[0]
    assert json.loads(change_text(t, recs[-1], "json"))["change"] == "ended"
    t.forget_ended(10 * S)
    assert key not in t.history
    t.add(FP, b"\xff\x00garbage")
    t.add(FP, None)  # a tombstone
    assert t.undecodable == 1
