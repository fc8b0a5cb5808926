"""stream/dashboard/state_cache.py: the state view's windowed part is built once per finalization, however many
requests come; the live part (clock, health) is fresh on every request; the body is what ``snapshot`` says."""

from __future__ import annotations

import json

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.dashboard.server import DashboardState
from flowtracer.stream.dashboard.state_cache import StateCache
from flowtracer.stream.stages.emitted import Emitted

S = 1_000_000_000
T0 = 1_800_000_000 * S


def fim(end: int, value: float) -> analytics_pb2.FimSample:
    return analytics_pb2.FimSample(schema_version=1, window_end_ns=end, group="fabric", fim=value, members=2,
                                   basis=analytics_pb2.LOAD_BASIS_MEASURED, total_bytes=10)


def link_load(link: str, end: int) -> analytics_pb2.LinkLoad:
    return analytics_pb2.LinkLoad(schema_version=1, window_end_ns=end, link=link, measured_valid=True,
                                  measured_bytes=10**9, utilization=0.5, flow_count=1)


def test_a_thousand_requests_between_two_finalizations_rebuild_the_windowed_part_once() -> None:
    fabric = Fabric(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="cache16")))
    now = [T0 + 2 * S]
    state = DashboardState(fabric, clock_ns=lambda: now[0])
    cache = StateCache(state)
    state.observe(Emitted(link_loads=[link_load(lk, T0 + S) for lk in fabric.links], fims=[fim(T0 + S, 0.5)]))
    first = json.loads(cache.body())
    assert first == json.loads(json.dumps(state.snapshot()))
    for _ in range(1000):  # before: each request rebuilt and encoded the whole state on the event loop
        now[0] += 1_000_000
        body = json.loads(cache.body())
    assert cache.rebuilds == 1
    assert body["now_ms"] == now[0] // 1_000_000 and body["health"]["lag_s"] == (now[0] - (T0 + S)) / 1e9
    assert body["links"] == first["links"] and len(body["links"]) == len(fabric.links)
    state.observe(Emitted(fims=[fim(T0 + 2 * S, 0.25)]))  # a new finalization: rebuilt once, on the next request
    body = json.loads(cache.body())
    json.loads(cache.body())
    assert cache.rebuilds == 2
    assert body["fabric"]["measured"]["fim"] == 0.25 and body["newest_window_end_ms"] == (T0 + 2 * S) // 1_000_000
    assert body == json.loads(json.dumps(state.snapshot()))
