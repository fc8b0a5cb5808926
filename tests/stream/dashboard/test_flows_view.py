"""The dashboard's flow view (pure): the newest path per live flow from the processor's own FlowPath records, the
jobs, and one job's or one flow's paths with the union of their links (what the page highlights)."""

from __future__ import annotations

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.dashboard.flows_view import FlowsView
from flowtracer.stream.dashboard.server import DashboardState
from flowtracer.stream.resolvers.contract import FlowObs, Placement
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.flow_paths import FlowPaths

S = 1_000_000_000
FABRIC = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2)))


def obs(src: str, dst: str, n: int, job: str) -> FlowObs:
    s, d = FABRIC.nics[src], FABRIC.nics[dst]
    return FlowObs(flow_id=f"{s.name}/{n}/1", src_nic=s.name, dst_nic=d.name, src_ip=s.nic.ip, dst_ip=d.nic.ip,
                   udp_src_port=49152 + n, udp_dst_port=4791, lqpn=n, rqpn=n, bytes=10**9, job_id=job)


def placed(flows: list[FlowObs], index: list[int]) -> list[Placement | None]:
    return [Placement.single(FABRIC.equal_cost_paths(f.src_nic, f.dst_nic)[i], 1.0, "hash")
            for f, i in zip(flows, index, strict=True)]


def test_a_job_lists_its_flows_with_hops_and_the_union_of_their_links() -> None:
    a = obs("host01:mlx5_0", "host03:mlx5_0", 1, "ring")
    b = obs("host02:mlx5_0", "host04:mlx5_0", 2, "ring")
    c = obs("host03:mlx5_0", "host01:mlx5_0", 3, "other")
    fp = FlowPaths(FABRIC, S, heartbeat_windows=100, idle_windows=2)
    state = DashboardState(FABRIC)
    state.observe(Emitted(flow_paths=fp.window(0, S, [a, b, c], placed([a, b, c], [0, 1, 0]), "hash"), windows=1))
    view = state.flow_paths
    assert state.windowed()["jobs"] == [{"job": "other", "flows": 1}, {"job": "ring", "flows": 2}]
    ring = view.json(job="ring")
    pa, pb = (FABRIC.equal_cost_paths(f.src_nic, f.dst_nic)[i] for f, i in ((a, 0), (b, 1)))
    assert ring["count"] == 2 and [f["flow_id"] for f in ring["flows"]] == [a.flow_id, b.flow_id]
    assert ring["links"] == sorted(set(pa) | set(pb))
    assert [h["switch"] for h in ring["flows"][0]["hops"]] == ["leaf01", "spine01", "leaf02"]
    one = view.json(flow=b.flow_id)
    assert one["links"] == sorted(pb) and one["flows"][0]["job"] == "ring"
    # b moves to path 0 (a change record), then c ends: the view follows
    state.observe(Emitted(flow_paths=fp.window(S, 2 * S, [a, b], placed([a, b], [0, 0]), "hash"), windows=1))
    assert view.json(flow=b.flow_id)["links"] == sorted(FABRIC.equal_cost_paths(b.src_nic, b.dst_nic)[0])
    ended = fp.window(2 * S, 3 * S, [a, b], placed([a, b], [0, 0]), "hash")
    assert [m.change for m in ended] == [analytics_pb2.FLOW_PATH_CHANGE_ENDED]
    state.observe(Emitted(flow_paths=ended, windows=1))
    assert [j["job"] for j in view.jobs()] == ["ring"] and view.json(job="other")["count"] == 0


def test_a_replayed_older_record_does_not_roll_a_flow_back() -> None:
    a = obs("host01:mlx5_0", "host03:mlx5_0", 1, "ring")
    fp = FlowPaths(FABRIC, S)
    first = fp.window(0, S, [a], placed([a], [0]), "hash")
    moved = fp.window(S, 2 * S, [a], placed([a], [1]), "hash")
    view = FlowsView()
    view.observe(first + moved)
    view.observe(first)
    assert view.json(job="ring")["links"] == sorted(FABRIC.equal_cost_paths(a.src_nic, a.dst_nic)[1])
