"""The dashboard's state (pure) and its web views (a real aiohttp server through Faust's web driver)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, common_pb2, counters_pb2
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.dashboard.server import ASSETS, DashboardState, load_assets, register_dashboard
from flowtracer.stream.stages.emitted import Emitted

S = 1_000_000_000
T0 = 1_800_000_000 * S
UP1 = "leaf01:Ethernet5>spine01:Ethernet1"
UP2 = "leaf01:Ethernet6>spine02:Ethernet1"
GROUP = "leaf01:spine01|spine02"
MEASURED, ATTRIBUTED = analytics_pb2.LOAD_BASIS_MEASURED, analytics_pb2.LOAD_BASIS_ATTRIBUTED


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return Fabric(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="dash16")))


def _state(fabric: Fabric, now_ns: int = T0 + 12 * S, metrics: Any = None) -> DashboardState:
    return DashboardState(fabric, metrics=metrics, owner=LinkIndex(fabric).owner, clock_ns=lambda: now_ns)


def _ll(link: str, end: int, util: float, valid: bool = True) -> analytics_pb2.LinkLoad:
    b = round(util * 50e9)
    return analytics_pb2.LinkLoad(schema_version=1, window_start_ns=end - S, window_end_ns=end, link=link,
                                  measured_bytes=b if valid else 0, measured_valid=valid, attributed_bytes=b,
                                  utilization=util if valid else 0.0, flow_count=2, speed_bps=400_000_000_000)


def _fim(group: str, end: int, value: float, basis: int = MEASURED) -> analytics_pb2.FimSample:
    return analytics_pb2.FimSample(schema_version=1, window_start_ns=end - 10 * S, window_end_ns=end, group=group,
                                   basis=basis, fim=value, members=2, total_bytes=10)


def _collision(end: int) -> analytics_pb2.Collision:
    flows = [common_pb2.FlowRef(key=common_pb2.FlowKey(src_ip="10.0.0.4", dst_ip="10.0.0.5", udp_src_port=p),
                                src_host="host04", dst_host="host05", collective="AllReduce", comm_id="0xabc",
                                bytes=11 * 10**9) for p in (59280, 61397)]
    return analytics_pb2.Collision(schema_version=1, window_start_ns=end - S, window_end_ns=end, switch="leaf01",
                                   group=GROUP, link=UP1, link_utilization=0.45, idle_link=UP2, idle_utilization=0.0,
                                   flows=flows, resolver="hash")


def test_topology_has_rows_hosts_and_every_cable_as_up_and_down(fabric: Fabric) -> None:
    t = _state(fabric).topology()
    assert t["rows"] == [["spine01", "spine02"], ["leaf01", "leaf02", "leaf03", "leaf04"]]
    assert len(t["hosts"]) == 16 and t["hosts"][0] == {"name": "host01", "leaves": ["leaf01"]}
    assert len(t["cables"]) == 16 + 8
    up = next(c for c in t["cables"] if c["up"] == UP1)
    assert (up["lower"], up["upper"], up["down"], up["host"]) == ("leaf01", "spine01",
                                                                  "spine01:Ethernet1>leaf01:Ethernet5", False)
    host = next(c for c in t["cables"] if c["lower"] == "host01")
    assert host["up"] == "host01:mlx5_0>leaf01:Ethernet1" and host["host"]
    assert {c["up"] for c in t["cables"]}.isdisjoint({c["down"] for c in t["cables"]})


def test_snapshot_keeps_the_newest_load_per_link_and_the_fim_series(fabric: Fabric) -> None:
    st = _state(fabric)
    for k in range(1, 4):
        end = T0 + k * S
        st.observe(Emitted(link_loads=[_ll(UP1, end, 0.1 * k), _ll(UP2, end, 0.0, valid=k != 3)],
                           fims=[_fim("fabric", end, 0.5), _fim("fabric", end, 0.49, ATTRIBUTED),
                                 _fim(GROUP, end, 1.0)], windows=1))
    st.observe(Emitted(link_loads=[_ll(UP1, T0 + S, 0.9)]))  # a late replay of an old window does not win
    snap = st.snapshot()
    assert snap["links"][UP1]["u"] == pytest.approx(0.3) and snap["links"][UP1]["w"] == (T0 + 3 * S) // 10**6
    assert snap["links"][UP2]["u"] is None  # no trusted counter delta: unknown, not idle
    fab = snap["fabric"]["measured"]
    assert fab["fim"] == 0.5 and fab["window_end_ms"] == (T0 + 3 * S) // 10**6
    assert [v for _, v in fab["series"]] == [0.5, 0.5, 0.5]
    assert snap["fabric"]["attributed"]["fim"] == 0.49
    assert list(snap["groups"]) == [GROUP]
    assert snap["newest_window_end_ms"] == (T0 + 3 * S) // 10**6


def test_replayed_fim_window_overwrites_its_point(fabric: Fabric) -> None:
    st = _state(fabric)
    st.observe(Emitted(fims=[_fim("fabric", T0 + S, 0.2), _fim("fabric", T0 + 2 * S, 0.3)]))
    st.observe(Emitted(fims=[_fim("fabric", T0 + 2 * S, 0.4)]))
    assert [v for _, v in st.snapshot()["fabric"]["measured"]["series"]] == [0.2, 0.4]


def test_collisions_are_current_for_a_few_hops_then_drop_out(fabric: Fabric) -> None:
    st = _state(fabric)
    st.observe(Emitted(collisions=[_collision(T0 + S)]))
    newest = _collision(T0 + 2 * S)
    newest.harmful, newest.harm_basis, newest.link_ecn_marked_pkts, newest.receiver_cnps = True, "switch", 886, 797
    st.observe(Emitted(collisions=[newest]))
    [c] = st.snapshot()["collisions"]
    assert (c["group"], c["link"], c["idle_link"], c["windows"]) == (GROUP, UP1, UP2, 2)
    # the newest hop's harm verdict, with its evidence
    assert (c["harmful"], c["harm_basis"], c["link_ecn_marked_pkts"], c["receiver_cnps"]) == (True, "switch", 886, 797)
    assert c["first_seen_ms"] == (T0 + S) // 10**6
    assert [(f["src_host"], f["udp_src_port"], f["collective"]) for f in c["flows"]] == [
        ("host04", 59280, "AllReduce"), ("host04", 61397, "AllReduce")]
    st.observe(Emitted(fims=[_fim("fabric", T0 + 6 * S, 0.1)]))
    assert st.snapshot()["collisions"] == []


def _cause(link: str, end: int, cause: str, origin: str = "", spread: tuple[str, ...] = ()
           ) -> analytics_pb2.CongestionCause:
    return analytics_pb2.CongestionCause(schema_version=1, window_start_ns=end - S, window_end_ns=end, link=link,
                                         cause=cause, origin=origin, spread_links=spread, ecn_marked_pkts=7,
                                         utilization=-1.0, evidence=f"{cause} because")


def test_congestion_causes_newest_per_link_pauses_last_then_drop_out(fabric: Fabric) -> None:
    st = _state(fabric)
    stall = "leaf02:Ethernet1>host05:mlx5_0"
    st.observe(Emitted(congestion_causes=[_cause(UP1, T0 + S, "unknown")]))
    st.observe(Emitted(congestion_causes=[
        _cause(UP2, T0 + 2 * S, "pause_spread", "host05:mlx5_0", (UP2, "spine02:Ethernet2>leaf02:Ethernet6", stall)),
        _cause(UP1, T0 + 2 * S, "collision"), _cause(stall, T0 + 2 * S, "pause_spread", "host05:mlx5_0", (stall,))]))
    causes = st.snapshot()["congestion_causes"]
    assert [(c["link"], c["cause"], c["origin"], len(c["spread_links"])) for c in causes] == [
        (UP1, "collision", "", 0), (stall, "pause_spread", "host05:mlx5_0", 1),
        (UP2, "pause_spread", "host05:mlx5_0", 3)]
    assert causes[0]["utilization"] is None and causes[0]["evidence"] == "collision because"
    st.observe(Emitted(fims=[_fim("fabric", T0 + 6 * S, 0.1)]))
    assert st.snapshot()["congestion_causes"] == []


def test_health_lag_switches_reporting_and_processor_metrics(fabric: Fabric) -> None:
    from flowtracer.stream.runtime.metrics import Metrics

    m = Metrics()
    m.dead_letters.inc(2)
    for _ in range(7):
        m.tally.record("flowtracer.counters.v1")
    st = _state(fabric, now_ns=T0 + 5 * S, metrics=m.registry)
    assert st.snapshot()["health"]["lag_s"] is None
    st.observe(Emitted(link_loads=[_ll(UP1, T0 + 3 * S, 0.2), _ll("spine01:Ethernet1>leaf01:Ethernet5", T0 + 3 * S,
                                                                   0.2)]))
    h = st.snapshot()["health"]
    assert h["lag_s"] == 2.0
    assert (h["switches_reporting"], h["switches_total"]) == (2, 6)
    assert h["switches_silent"] == ["leaf02", "leaf03", "leaf04", "spine02"]
    assert h["dead_letters"] == 2.0 and h["records_counters"] == 7.0 and h["records_flows"] is None


def test_sprayed_flows_show_as_such_for_the_newest_window(fabric: Fabric) -> None:
    st = _state(fabric)
    assert st.snapshot()["sprayed"] is None

    def pl(end: int, path: str, b: int, sprayed: int) -> analytics_pb2.PathLoad:
        return analytics_pb2.PathLoad(schema_version=1, window_end_ns=end, path_id=path, src_host="host01",
                                      bytes=b, sprayed_bytes=sprayed, untrusted_bytes=sprayed)

    st.observe(Emitted(path_loads=[pl(T0 + S, "a", 100, 0)]))
    st.observe(Emitted(path_loads=[pl(T0 + 2 * S, "a", 300, 0), pl(T0 + 2 * S, "b", 100, 100),
                                   pl(T0 + 2 * S, "c", 100, 50)]))
    assert st.snapshot()["sprayed"] == {"window_end_ms": (T0 + 2 * S) // 1_000_000, "bytes": 150,
                                        "placed_bytes": 500, "paths": 2}
    assert "sprayedText(state.sprayed)" in load_assets(["dashboard.js"])["dashboard.js"].decode()


def test_observe_never_raises_into_the_worker(fabric: Fabric) -> None:
    st = _state(fabric)
    st.observe("not an Emitted")  # type: ignore[arg-type]
    assert st.errors == 1


def test_assets_are_bundled_and_reference_nothing_remote() -> None:
    assets = load_assets()
    assert set(assets) == set(ASSETS)
    for name, body in assets.items():
        text = body.decode()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text, name
    index = assets["index.html"].decode()
    assert 'src="static/dashboard.js"' in index and 'href="static/dashboard.css"' in index


def test_views_serve_the_page_assets_and_state(tmp_path: Path, fabric: Fabric) -> None:
    """register_dashboard on a real Faust app; requests through its aiohttp application."""
    import faust
    from aiohttp.test_utils import TestClient, TestServer

    from flowtracer.stream.resolvers.registry import RESOLVERS
    from flowtracer.stream.runtime.config import ProcessorConfig
    from flowtracer.stream.runtime.processor import Processor

    topo = tmp_path / "fabric.yaml"
    topo.write_text(fabric.topology.to_yaml())
    cfg = ProcessorConfig(topology=topo, kafka="127.0.0.1:9", partitions=2, web_port=1, data_dir=tmp_path)
    proc = Processor(cfg, fabric, RESOLVERS["hash"])
    app = faust.App("dashboard-test", broker="kafka://127.0.0.1:9", web_port=1, datadir=str(tmp_path))
    state = register_dashboard(app, proc)
    assert state.observe in proc.observers
    for observe in proc.observers:  # what the app does with every published finalization
        observe(Emitted(fims=[_fim("fabric", T0 + S, 0.5)], collisions=[_collision(T0 + S)]))
    now = time.time_ns()  # the state view reads the wall clock
    # spine02's clock 3 s ahead of its collector's, leaf01's right; a clock is judged after 10 s of readings
    for t in range(now - 12 * S, now + 1, S):
        for switch, ahead_s in (("spine02", 3), ("leaf01", 0)):
            batch = counters_pb2.CounterBatch(schema_version=1, switch=switch, timestamp_ns=t + ahead_s * S,
                                              received_ns=t)
            proc.accept(topics.COUNTERS.name, 0, batch.SerializeToString(), object(), t)

    async def requests() -> dict[str, Any]:
        async with TestClient(TestServer(app.web.web_app)) as client:
            bare = await client.get("/dashboard", allow_redirects=False)
            page = await client.get("/dashboard/")
            js = await client.get("/dashboard/static/dashboard.js")
            missing = await client.get("/dashboard/static/..%2Fapp.py")
            topology = await (await client.get("/dashboard/api/topology")).json()
            snap = await (await client.get("/dashboard/api/state")).json()
            return {"bare": (bare.status, bare.headers.get("Location")), "page": (page.status, page.content_type, await page.text()), "js": (js.status, js.content_type),
                    "missing": missing.status, "topology": topology, "state": snap}

    got = asyncio.run(requests())
    assert got["page"][:2] == (200, "text/html") and "<title>flowtracer: live fabric</title>" in got["page"][2]
    assert got["bare"] == (302, "/dashboard/")
    assert got["js"] == (200, "application/javascript")
    assert got["missing"] == 404
    assert got["topology"]["name"] == "dash16" and len(got["topology"]["cables"]) == 24
    assert got["state"]["fabric"]["measured"]["fim"] == 0.5
    assert got["state"]["collisions"][0]["link"] == UP1
    clocks = got["state"]["health"]["clocks"]
    assert (clocks["sources"], clocks["skewed_count"]) == (2, 1)
    assert clocks["skewed"][0]["source"] == "switch spine02" and clocks["skewed"][0]["offset_s"] == 3.0
