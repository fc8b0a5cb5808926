"""The per-window fast paths of the analytics (attribute columns, placements cached per object, cached
NIC lookups) give exactly what the straightforward code gives."""

from __future__ import annotations

from flowtracer.schemas.v1 import flows_pb2
from flowtracer.stream.analytics.attribution import attribute, heaviest
from flowtracer.stream.analytics.flow_obs import FlowObserver, Unattributed, placed_ends
from flowtracer.stream.resolvers.contract import FlowObs, Placement


def obs(i: int, nbytes: int) -> FlowObs:
    return FlowObs(flow_id=f"h{i}:mlx5_0/{i}/1", src_nic=f"h{i}:mlx5_0", dst_nic="h9:mlx5_0", src_ip=f"10.0.0.{i}",
                   dst_ip="10.0.9.1", udp_src_port=1000 + i, udp_dst_port=4791, lqpn=i, rqpn=i + 1, bytes=nbytes,
                   job_id=("", "7", "k8s:pod1")[i % 3])


def reference(flows: list[FlowObs], placements: list[Placement | None]) -> tuple[dict, dict, int, int]:
    """The per-flow dict loop attribute() replaced: link -> (bytes, count, conf_bytes, flows), path -> ..."""
    links: dict[str, list] = {}
    paths: dict[str, list] = {}
    unplaced = [0, 0]
    for flow, placement in zip(flows, placements, strict=True):
        if placement is None:
            unplaced[0] += 1
            unplaced[1] += flow.bytes
            continue
        per_link: dict[str, float] = {}
        for path, weight in placement.paths:
            b = flow.bytes * weight
            ps = paths.setdefault("|".join(path), [path, flow.src_nic, flow.dst_nic, 0.0, 0, 0.0, frozenset()])
            ps[3] += b
            ps[4] += 1
            ps[5] += b * placement.confidence
            ps[6] |= {flow.job_id} - {""}  # a flow without a job adds none
            for lid in path:
                per_link[lid] = per_link.get(lid, 0.0) + b
        for lid, b in per_link.items():
            s = links.setdefault(lid, [0.0, 0, 0.0, []])
            s[0] += b
            s[1] += 1
            s[2] += b * placement.confidence
            s[3].append((b, flow, placement))
    return links, paths, unplaced[0], unplaced[1]


def cases() -> tuple[list[FlowObs], list[Placement | None]]:
    a, b, c = ("h1:mlx5_0>l1:p1", "l1:p9>s1:p1", "s1:p2>l9:p1"), ("h1:mlx5_0>l1:p1", "l1:p8>s2:p1"), ("x>y", "y>x", "x>y")
    shared = Placement.single(a, 0.7)  # the same object in several flows, as the hash resolver hands out
    places: list[Placement | None] = [shared, Placement(((a, 0.25), (b, 0.75)), 0.5), None, Placement.single(c),
                                      shared, Placement.single(b), Placement(((a, 1 / 3), (b, 2 / 3)), 0.9)]
    flows = [obs(i, 1_000_003 * (i + 1) + 7 * i * i) for i in range(len(places))]
    return flows, places


def test_attribute_equals_the_reference_loop() -> None:
    flows, places = cases()
    links, paths, unplaced_flows, unplaced_bytes = reference(flows, places)
    att = attribute(flows, places)
    assert (att.unplaced_flows, att.unplaced_bytes) == (unplaced_flows, unplaced_bytes)
    assert {k: (s.bytes, s.flow_count, s.conf_bytes, s.flows) for k, s in att.links.items()} == \
        {k: tuple(v) for k, v in links.items()}
    assert {k: (p.links, p.src_nic, p.dst_nic, p.bytes, p.flow_count, p.conf_bytes, p.jobs)
            for k, p in att.paths.items()} == {k: tuple(v) for k, v in paths.items()}
    assert any(len(p.jobs) == 2 for p in att.paths.values())  # the case mixes jobs on a path
    assert list(att.links) == list(links) and list(att.paths) == list(paths)  # same first-seen order
    again = attribute(flows, places)  # cached per placement: the second window gives the same
    assert again.links == att.links and again.paths == att.paths


def test_keep_flows_keeps_what_heaviest_would_pick() -> None:
    flows, places = cases()
    full = attribute(flows, places)
    keep = {"l1:p9>s1:p1": 2_000_000.0, "x>y": 0.0}
    kept = attribute(flows, places, keep_flows=keep)
    assert kept.link_bytes == full.link_bytes and kept.link_conf_bytes == full.link_conf_bytes
    assert set(kept.link_flows) <= set(keep)
    for lid, threshold in keep.items():
        assert heaviest(kept.link_flows.get(lid, ()), 16, threshold) == heaviest(full.link_flows[lid], 16, threshold)


class _Fabric:
    """The two lookups FlowObserver uses."""

    def __init__(self) -> None:
        from flowtracer.fabric.routing import NicRef

        class Nic:
            def __init__(self, dev: str, ip: str) -> None:
                self.rdma_device, self.ip = dev, ip

        refs = [NicRef("h1", Nic("mlx5_0", "10.0.0.1")), NicRef("h2", Nic("mlx5_0", "10.0.0.2"))]  # type: ignore[arg-type]
        self.nics = {r.name: r for r in refs}
        self.nic_by_ip = {r.nic.ip: r for r in refs}


def test_flow_observer_matches_placed_ends() -> None:
    fabric = _Fabric()
    batch = flows_pb2.FlowBatch(host="h1", flows=[
        flows_pb2.Flow(rdma_device="mlx5_0", src_ip="10.0.0.1", dst_ip="10.0.0.2", tx_bytes=5, lqpn=3, rqpn=4,
                       qp_generation=9, udp_src_port=49152, udp_dst_port=4791, job_id="j7",
                       nccl=flows_pb2.NcclTag(collective="AllReduce", comm_id="c1")),
        flows_pb2.Flow(rdma_device="other", src_ip="10.0.0.1", dst_ip="10.0.0.2", tx_bytes=6),  # by source IP
        flows_pb2.Flow(rdma_device="mlx5_0", src_ip="10.0.0.1", dst_ip="10.9.9.9", tx_bytes=7),  # unknown receiver
        flows_pb2.Flow(rdma_device="mlx5_0", src_ip="10.0.0.1", dst_ip="10.0.0.2", tx_bytes=0),  # idle
    ])
    observe = FlowObserver(fabric)  # type: ignore[arg-type]
    for _ in range(2):  # cold and cached lookups
        u, ref_u = Unattributed(), Unattributed()
        got = observe(batch, u)
        expected = []
        for f in batch.flows:
            ends = placed_ends(batch.host, f, fabric, ref_u) if f.tx_bytes else None  # type: ignore[arg-type]
            if ends is not None:
                expected.append((ends[0].name, ends[1].name, ends[0].host, ends[1].host, f.tx_bytes))
        assert [(o.src_nic, o.dst_nic, o.src_host, o.dst_host, o.bytes) for o in got] == expected
        assert (u.flows, u.bytes) == (ref_u.flows, ref_u.bytes) == (1, 7)
        assert got[0].flow_id == "h1:mlx5_0/3/9" and (got[0].collective, got[0].comm_id) == ("AllReduce", "c1")
        assert (got[1].collective, got[1].comm_id) == ("", "")
        # Every field by name (the observer builds FlowObs positionally: a field out of order shows here).
        o = got[0]
        assert (o.src_ip, o.dst_ip, o.udp_src_port, o.udp_dst_port, o.lqpn, o.rqpn, o.job_id) == \
            ("10.0.0.1", "10.0.0.2", 49152, 4791, 3, 4, "j7")
