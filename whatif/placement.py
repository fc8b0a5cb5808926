"""The tools the routing strategies share (pure): the headers a flow would carry (recorded, or with QP
numbers as after a restart or with more QPs per connection), every switch's hash model with overrides,
and the utilization of a path's fabric links if a flow joined them."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from flowtracer.fabric.ecmp_hash import EcmpHash, HeaderFields
from flowtracer.fabric.roce import rocev2_udp_sport
from flowtracer.whatif.fabric import ReplayFabric
from flowtracer.whatif.record import RecordedFlow
from flowtracer.whatif.routes import FlowDemand, Paths

QPN_MASK = (1 << 24) - 1


def headers_of(f: RecordedFlow) -> HeaderFields:
    """The headers a flow carried as recorded."""
    return HeaderFields(f.src_ip, f.dst_ip, f.udp_src_port, f.udp_dst_port, dst_qpn=f.rqpn)


def hash_models(rf: ReplayFabric, params: Mapping[str, Any]) -> dict[str, EcmpHash]:
    """Every switch's hash model with ``seed``/``fields``/``algorithm`` overrides applied."""
    over = {k: params[k] for k in ("seed", "fields", "algorithm") if k in params}
    return {sw: dataclasses.replace(rf.fabric.hash_model(sw), **over) for sw in rf.fabric.switch_names}


def single_path(path: tuple[str, ...] | None) -> Paths:
    return ((path, 1.0),) if path is not None else ()


class QpNumbers:
    """QP numbers as the NICs would hand them out for a replayed variant of the recorded connections.

    A NIC allocates numbers upward from a base (here: the lowest number the recording shows for it).
    With ``n`` QPs per connection, connection c (recorded number base + c) gets base + c*n + i for
    its i-th QP; a job restart (``draw`` > 0) shifts every number of a NIC by one random offset.
    Both ends of a QP pair are renumbered alike, so both directions keep one source port.
    """

    def __init__(self, flows: Sequence[FlowDemand]) -> None:
        self.base: dict[str, int] = {}
        for d in flows:
            f = d.flow
            for nic, q in ((f.src_nic, f.lqpn), (f.dst_nic, f.rqpn)):
                self.base[nic] = min(self.base.get(nic, q), q)

    @staticmethod
    def offset(nic: str, draw: int) -> int:
        """The shift of a NIC's QP numbers in restart ``draw`` (0 for the recorded run)."""
        if draw == 0:
            return 0
        digest = hashlib.blake2b(f"qpn:{draw}:{nic}".encode(), digest_size=4).digest()
        return int.from_bytes(digest, "big") % (QPN_MASK - 1) + 1

    def number(self, nic: str, qpn: int, i: int, n: int, draw: int) -> int:
        base = self.base.get(nic, qpn)
        return (base + (qpn - base) * n + i + self.offset(nic, draw)) & QPN_MASK

    def headers(self, f: RecordedFlow, i: int, n: int, draw: int) -> HeaderFields:
        """Headers of QP ``i`` of ``n`` of the connection of ``f``; the recorded ones for i=0, n=1, draw 0."""
        if n == 1 and draw == 0:
            return headers_of(f)
        lq = self.number(f.src_nic, f.lqpn, i, n, draw)
        rq = self.number(f.dst_nic, f.rqpn, i, n, draw)
        return HeaderFields(f.src_ip, f.dst_ip, rocev2_udp_sport(lq, rq), f.udp_dst_port, dst_qpn=rq)


def fabric_cost(rf: ReplayFabric, load: Sequence[float], path: tuple[str, ...], add: float) -> tuple[float, float]:
    """(busiest, summed) utilization of a path's fabric links if ``add`` bytes joined them."""
    worst = total = 0.0
    for lid in path:
        i = rf.index[lid]
        if not rf.fabric_link[i]:
            continue
        cap = rf.capacity_bps[i]
        u = (load[i] + add) * 8 / cap if cap > 0 else float("inf")
        worst = max(worst, u)
        total += u
    return worst, total


def best_path(rf: ReplayFabric, load: Sequence[float], options: Sequence[tuple[str, ...]], add: float) -> int:
    """Index of the option with the least utilized busiest fabric link (ties: summed, then order)."""
    costs = [(*fabric_cost(rf, load, p, add), i) for i, p in enumerate(options)]
    return min(costs)[2]


def place_load(rf: ReplayFabric, load: list[float], path: tuple[str, ...], nbytes: float) -> None:
    for lid in path:
        load[rf.index[lid]] += nbytes


