"""The change-and-heartbeat rule of the per-flow paths (pure): a record when a flow is first placed, when its path
or method changes, at a staggered heartbeat and once when it ends; nothing in between."""

from __future__ import annotations

import itertools

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.resolvers.contract import FlowObs, Placement
from flowtracer.stream.stages.flow_paths import FlowPaths, heaviest_path, hops_of

S = 1_000_000_000
C = analytics_pb2


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2)))


def flow(fabric: Fabric, n: int = 0, nbytes: int = 10**9) -> FlowObs:
    s, d = fabric.nics["host01:mlx5_0"], fabric.nics["host03:mlx5_0"]
    return FlowObs(flow_id=f"{s.name}/{7 + n}/1", src_nic=s.name, dst_nic=d.name, src_ip=s.nic.ip, dst_ip=d.nic.ip,
                   udp_src_port=50000 + n, udp_dst_port=4791, lqpn=7 + n, rqpn=9, bytes=nbytes, job_id="j1",
                   collective="AllReduce", comm_id="abc", src_host=s.host, dst_host=d.host)


def run(fp: FlowPaths, windows: range, flows: list[FlowObs], placed: list[Placement | None]
        ) -> dict[int, list[analytics_pb2.FlowPath]]:
    return {w: fp.window((w - 1) * S, w * S, flows, placed, "hash") for w in windows}


def test_a_steady_flow_is_published_first_then_only_at_heartbeats(fabric: Fabric) -> None:
    f = flow(fabric)
    path = fabric.equal_cost_paths(f.src_nic, f.dst_nic)[0]
    fp = FlowPaths(fabric, S, heartbeat_windows=5, idle_windows=100)
    out = run(fp, range(1, 21), [f], [Placement.single(path, 1.0, "hash")])
    sent = {w: [m.change for m in ms] for w, ms in out.items() if ms}
    first = min(sent)
    assert first == 1 and sent[1] == [C.FLOW_PATH_CHANGE_FIRST]
    beats = sorted(w for w in sent if w != 1)
    assert all(sent[w] == [C.FLOW_PATH_CHANGE_HEARTBEAT] for w in beats)
    # the first heartbeat within 1..5 windows (staggered by id), then exactly every 5 windows
    assert 2 <= beats[0] <= 6 and all(b - a == 5 for a, b in itertools.pairwise(beats))
    m = out[1][0]
    assert (m.flow_id, m.key.udp_src_port, m.key.ip_proto, m.key.dst_qpn) == (f.flow_id, 50000, 17, 9)
    assert (m.src_host, m.src_nic, m.dst_host, m.dst_nic) == ("host01", "mlx5_0", "host03", "mlx5_0")
    assert (m.job_id, m.collective, m.comm_id, m.method, m.bytes) == ("j1", "AllReduce", "abc", "hash", 10**9)
    assert list(m.links) == list(path) and m.first_seen_ns == 0 and m.last_seen_ns == S
    last = out[beats[-1]][0]
    assert last.first_seen_ns == 0 and last.last_seen_ns == beats[-1] * S


def test_a_path_or_method_change_is_published_in_its_window(fabric: Fabric) -> None:
    f = flow(fabric)
    a, b = fabric.equal_cost_paths(f.src_nic, f.dst_nic)[:2]
    fp = FlowPaths(fabric, S, heartbeat_windows=1000)
    assert [m.change for m in fp.window(0, S, [f], [Placement.single(a, 1.0, "hash")], "hash")] == \
        [C.FLOW_PATH_CHANGE_FIRST]
    assert fp.window(S, 2 * S, [f], [Placement.single(a, 1.0, "hash")], "hash") == []
    moved = fp.window(2 * S, 3 * S, [f], [Placement.single(tuple(b), 1.0, "hash")], "hash")
    assert [m.change for m in moved] == [C.FLOW_PATH_CHANGE_PATH] and list(moved[0].links) == list(b)
    # an equal path in a new tuple is no change
    assert fp.window(3 * S, 4 * S, [f], [Placement.single(tuple(list(b)), 1.0, "hash")], "hash") == []
    traced = fp.window(4 * S, 5 * S, [f], [Placement.single(b, 1.0, "trace")], "trace")
    assert [(m.change, m.method, m.resolver) for m in traced] == [(C.FLOW_PATH_CHANGE_METHOD, "trace", "trace")]
    assert traced[0].first_seen_ns == 0


def test_a_flow_that_stops_sending_ends_once_and_a_new_one_starts_again(fabric: Fabric) -> None:
    f, g = flow(fabric, 0), flow(fabric, 1)
    path = fabric.equal_cost_paths(f.src_nic, f.dst_nic)[0]
    p = Placement.single(path, 1.0, "hash")
    fp = FlowPaths(fabric, S, heartbeat_windows=1000, idle_windows=3)
    fp.window(0, S, [f, g], [p, p], "hash")
    ended = []
    for w in range(2, 12):
        ended += [m for m in fp.window((w - 1) * S, w * S, [g], [p], "hash")
                  if m.change == C.FLOW_PATH_CHANGE_ENDED]
    assert [m.flow_id for m in ended] == [f.flow_id]
    assert ended[0].last_seen_ns == S and list(ended[0].links) == list(path)
    assert set(fp.known) == {g.flow_id}
    back = fp.window(11 * S, 12 * S, [f, g], [p, p], "hash")
    assert [(m.flow_id, m.change) for m in back] == [(f.flow_id, C.FLOW_PATH_CHANGE_FIRST)]


def test_unplaced_flows_publish_nothing_and_split_ones_their_heaviest_path(fabric: Fabric) -> None:
    f, g = flow(fabric, 0), flow(fabric, 1)
    a, b = fabric.equal_cost_paths(f.src_nic, f.dst_nic)[:2]
    split = Placement(((a, 0.25), (b, 0.75)), 0.5, "infer")
    assert heaviest_path(split) == (b, 0.75)
    out = FlowPaths(fabric, S).window(0, S, [f, g], [None, split], "infer")
    assert [(m.flow_id, list(m.links), m.path_share, m.confidence) for m in out] == \
        [(g.flow_id, list(b), 0.75, 0.5)]


def test_hops_name_each_switch_with_its_ports(fabric: Fabric) -> None:
    f = flow(fabric)
    path = fabric.equal_cost_paths(f.src_nic, f.dst_nic)[0]
    hops = hops_of(fabric, path)
    links = [fabric.links[lid] for lid in path]
    assert [h.node for h in hops] == [lk.src_node for lk in links[1:]]
    assert [(h.in_port, h.out_port, h.out_link) for h in hops] == \
        [(a.dst_port, b.src_port, b.id) for a, b in itertools.pairwise(links)]
    assert hops[0].node == fabric.nics[f.src_nic].leaf and len(hops) == 3  # leaf, spine, leaf


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="heartbeat_windows"):
        FlowPaths(Fabric(generate(FabricSpec(hosts=2, leaves=1, spines=1))), S, heartbeat_windows=0)
