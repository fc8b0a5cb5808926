"""The demo's incident watch on output records (no servers): windows are diagnosed once complete, in order, and
the view (from the snapshots read back) and the summary name the incident."""

from __future__ import annotations

from flowtracer.demo.incidents import IncidentWatch, incidents_section
from flowtracer.demo.status import Observed
from flowtracer.demo.summary import incident_summary_lines
from flowtracer.demo.view_render import incident_text
from flowtracer.demo.view_state import view_state
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.diagnosis.records import incident_record

S = 1_000_000_000
T0 = 1_800_000_000 * S
TOPO = generate(FabricSpec(hosts=16, leaves=4, spines=2, name="t"))
DOWN = "spine01:Ethernet3>leaf03:Ethernet5"


def _window(obs: Observed, k: int, queue: bool, fabric_fim: bool = True) -> None:
    end = T0 + k * S
    for lk, dl in Fabric(TOPO).links.items():
        ll = analytics_pb2.LinkLoad(schema_version=1, window_start_ns=end - S, window_end_ns=end, link=lk,
                                    src_node=dl.src_node, dst_node=dl.dst_node, speed_bps=dl.speed_bps,
                                    measured_valid=True, measured_bytes=10**10)
        obs.add(topics.LINK_LOADS.name, ll.SerializeToString(), 0, now_ns=k * S)
    if queue:
        lc = analytics_pb2.LinkCongestion(schema_version=1, window_start_ns=end - S, window_end_ns=end, link=DOWN,
                                          ecn_marked_pkts=700, ecn_valid=True, queue_watermark_bytes=1_250_000,
                                          watermark_valid=True)
        obs.add(topics.LINK_CONGESTION.name, lc.SerializeToString(), 0, now_ns=k * S)
    pl = analytics_pb2.PathLoad(schema_version=1, window_start_ns=end - S, window_end_ns=end, path_id="p",
                                links=[DOWN], src_host="host09", src_nic="mlx5_0", dst_host="host12",
                                dst_nic="mlx5_0", bytes=10**10, jobs=["4711"])
    obs.add(topics.PATH_LOADS.name, pl.SerializeToString(), 0, now_ns=k * S)
    if fabric_fim:  # the fabric stage's sample: the window is complete
        fim = analytics_pb2.FimSample(schema_version=1, window_end_ns=end, group="fabric",
                                      basis=analytics_pb2.LOAD_BASIS_MEASURED, fim=0.1)
        obs.add(topics.FIM.name, fim.SerializeToString(), 0, now_ns=k * S)


def test_a_queue_below_nominal_becomes_a_degraded_link_incident_in_the_view_and_summary() -> None:
    obs = Observed()
    published: list[tuple[str, int]] = []

    def publish(incs: list, end: int) -> None:  # as the publisher does, read back as the demo's watcher does
        published.extend((i.kind, end) for i in incs)
        for i in incs:
            obs.add(topics.INCIDENTS.name, incident_record(i, end).SerializeToString(), 0)

    watch = IncidentWatch(TOPO, on_window=publish)
    for k in range(1, 6):
        _window(obs, k, queue=k >= 3, fabric_fim=k <= 3)
    watch.advance(obs, now_ns=6 * S)
    assert watch.done_until_ns == T0 + 3 * S  # windows 4 and 5 have no fabric FIM yet: they may still get records
    assert view_state(obs, "demo", "6s").incidents == ()
    watch.advance(obs, final=True)
    [row] = view_state(obs, "demo", "7s").incidents
    line = incident_text(row)
    assert line.startswith("degraded_link since ") and "top suspect cable:leaf03:Ethernet5~spine01:Ethernet3" in line
    assert "jobs 4711; 1 flows, 2 hosts" in line
    assert published == [("degraded_link", T0 + 4 * S), ("degraded_link", T0 + 5 * S)]
    [inc] = incidents_section(watch, None)
    assert inc["suspects"][0]["component"] == "cable:leaf03:Ethernet5~spine01:Ethernet3"
    assert inc["flows"] == ["host09:mlx5_0>host12:mlx5_0"] and inc["state"] == "open"
    assert (inc["jobs"], inc["jobs_ground_truth"]) == (["4711"], [])  # the pipeline's jobs; no simulator here
    [summary] = incident_summary_lines([inc])
    assert summary.startswith("incident degraded_link still open: suspects cable:") and summary.endswith("affects 4711")
