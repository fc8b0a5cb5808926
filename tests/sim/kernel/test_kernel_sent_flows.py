"""Pure: the kernel senders' counts become the tick's flow bytes, and links are summed again from them."""

from __future__ import annotations

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.flows import HEADER_BYTES, restate_tick
from flowtracer.sim.fabric.workload import preset
from flowtracer.sim.kernel.dataplane import sent_flows


def test_sent_flows_scales_real_frames_to_modelled_bytes_and_packets() -> None:
    frame = 4096 + HEADER_BYTES
    out = sent_flows({1: (3.0 * frame, frame), 2: (0.0, frame), 3: (-frame, frame)}, 1000, HEADER_BYTES)
    assert out == {1: (3000 * 4096, 3000 * frame, 3000)}  # nothing sent (or a negative delta): left out


def test_restate_tick_replaces_flow_bytes_and_sums_links_from_paths() -> None:
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2))
    e = Engine(topo, preset("ring-allreduce"), tick_s=0.5, start_ns=0)
    stats = e.step()
    fids = sorted(stats.flows)
    assert len(fids) >= 2
    sent = {fids[0]: (100, 162, 1), 999_999: (5, 67, 1)}  # one flow sent a frame, an unknown id is dropped
    restate_tick(stats, sent, e.flows)
    assert stats.flows == {fids[0]: (100, 162, 1)}
    path = e.flows[fids[0]].path
    assert path is not None
    assert {i for i in range(len(e.link_ids)) if stats.link_bytes[i]} == set(path)
    assert all(stats.link_bytes[i] == 162 * path.count(i) and stats.link_pkts[i] == path.count(i) for i in path)
