"""The flows stage's PathLoads say which bytes an untrusted method placed (issue 27): infer's, not hash's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.v1 import flows_pb2
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.resolvers.contract import FlowObs, Placement
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.flows import FlowsStage

S = 1_000_000_000
P = 2
GB = 10**9


class Fixed:
    """Places every flow on its NIC pair's first equal-cost path with ``method``."""

    name: ClassVar[str] = "fixed"

    def __init__(self, fabric: Fabric, method: str) -> None:
        self.fabric, self.method = fabric, method

    def resolve(self, window_end_ns: int, flows: Sequence[FlowObs],
                measured: Mapping[str, int]) -> list[Placement | None]:
        return [Placement.single(self.fabric.equal_cost_paths(f.src_nic, f.dst_nic)[0], 0.9, self.method)
                for f in flows]

    def state(self) -> dict[str, Any]:
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:
        pass


@pytest.mark.parametrize(("method", "untrusted"), [("infer", GB), ("hash", 0), ("trace", 0)])
def test_path_loads_carry_the_bytes_placed_by_untrusted_methods(method: str, untrusted: int) -> None:
    fabric = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2)))
    s, d = fabric.nics["host01:mlx5_0"], fabric.nics["host03:mlx5_0"]
    fb = flows_pb2.FlowBatch(schema_version=1, host="host01", leaf=s.leaf, window_start_ns=0, window_end_ns=S,
                             flows=[flows_pb2.Flow(rdma_device="mlx5_0", lqpn=7, rqpn=9, src_ip=s.nic.ip,
                                                   dst_ip=d.nic.ip, udp_src_port=50000, udp_dst_port=4791,
                                                   tx_bytes=GB)])
    links = LinkIndex(fabric)
    stages = [FlowsStage(p, P, fabric, links, Fixed(fabric, method), S, 5 * S, uses_counters=False)
              for p in range(P)]
    stages[partition_for(fb.leaf, P)].add_flows(fb, "t", now_ns=S)
    for host in ("host02", "host03", "host04"):  # the other agents report too, with no flows
        leaf = fabric.nics[f"{host}:mlx5_0"].leaf
        stages[partition_for(leaf, P)].add_flows(flows_pb2.FlowBatch(
            schema_version=1, host=host, leaf=leaf, window_start_ns=0, window_end_ns=S), "t", now_ns=S)
    out = Emitted()
    for st in stages:
        out.extend(st.finalize(now_ns=10 * S))
    [pl] = out.path_loads
    assert (pl.bytes, pl.untrusted_bytes, pl.traced_bytes) == (GB, untrusted, GB if method == "trace" else 0)
