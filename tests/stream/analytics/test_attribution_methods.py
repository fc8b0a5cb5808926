"""The attribution says which bytes of each path were placed how: traced, and untrusted (infer, a fallback)."""

from __future__ import annotations

from flowtracer.stream.analytics.attribution import attribute
from flowtracer.stream.resolvers.contract import HASH_METHOD, TRACE_METHOD, FlowObs, Placement

A = ("h1:mlx5_0>l1:e1", "l1:e3>s1:e1", "s1:e2>l2:e3", "l2:e1>h2:mlx5_0")
B = ("h1:mlx5_0>l1:e1", "l1:e4>s2:e1", "s2:e2>l2:e4", "l2:e1>h2:mlx5_0")


def _flow(i: int, nbytes: int) -> FlowObs:
    return FlowObs(flow_id=f"h1:mlx5_0/{i}/1", src_nic="h1:mlx5_0", dst_nic="h2:mlx5_0", src_ip="10.0.0.1",
                   dst_ip="10.0.0.2", udp_src_port=1000 + i, udp_dst_port=4791, lqpn=i, rqpn=i, bytes=nbytes)


def test_paths_count_untrusted_bytes_of_infer_and_fallback_placements_only() -> None:
    flows = [_flow(1, 100), _flow(2, 200), _flow(3, 400), _flow(4, 800)]
    placements = [Placement.single(A, 1.0, TRACE_METHOD), Placement.single(A, 1.0, HASH_METHOD),
                  Placement.single(A, 0.8, "infer"), Placement(((A, 0.25), (B, 0.75)), 0.5, "infer")]
    paths = attribute(flows, placements).paths
    a, b = paths["|".join(A)], paths["|".join(B)]
    assert (a.bytes, a.traced_bytes, a.untrusted_bytes) == (900, 100, 600)  # 400 + a quarter of 800
    assert (b.bytes, b.traced_bytes, b.untrusted_bytes) == (600, 0, 600)
