"""The ``hash`` resolver: apply each switch's ECMP hash model from the topology, hop by hop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from flowtracer.schemas.ecmp_hash import HeaderFields
from flowtracer.schemas.fabric import Fabric
from flowtracer.stream.resolvers.contract import FlowObs, Placement


class HashResolver:
    """Predicts each flow's path as the switches would hash it, if the topology's hash models are right.

    Confidence is 1: the model is deterministic. When the topology's hash configuration is wrong,
    nothing here can tell; the link loads' unexplained bytes show it. Paths are cached per 5-tuple
    (training flows live for hours), so a window costs one dict lookup per flow.
    """

    name: ClassVar[str] = "hash"

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self._cache: dict[tuple[str, str, str, str, int, int, int], Placement | None] = {}

    def resolve(self, window_end_ns: int, flows: Sequence[FlowObs],
                measured: Mapping[str, int]) -> list[Placement | None]:
        out: list[Placement | None] = []
        cache = self._cache
        for f in flows:
            k = (f.src_nic, f.dst_nic, f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, f.rqpn)
            if k not in cache:
                if len(cache) > 1_000_000:  # bound memory on churning QPs; hot flows come back at once
                    cache.clear()
                headers = HeaderFields(f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, dst_qpn=f.rqpn)
                path = self.fabric.hash_path(headers, f.src_nic, f.dst_nic)
                cache[k] = Placement.single(path, 1.0, "hash") if path is not None else None
            out.append(cache[k])
        return out

    def state(self) -> dict[str, Any]:
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:
        return None
