"""The ground truth's records (``flowtracer.sim.fabric.ground_truth`` documents the format): pure functions
from the engine's flows and a tick's accounting to the JSON-ready dicts the writer stores."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from flowtracer.sim.fabric.flows import Flow, TickStats


def flow_record(f: Flow) -> dict[str, object]:
    """One line of ``flows.jsonl``: a flow direction as its QP pair created it."""
    p = f.pair
    return {
        "id": f.id, "pair": p.id, "direction": "data" if f.forward else "cts", "job": p.job, "kind": p.kind,
        "src_host": f.src.host, "src_device": f.src.rdma_device, "dst_host": f.dst.host,
        "dst_device": f.dst.rdma_device, "src_ip": f.headers.src_ip, "dst_ip": f.headers.dst_ip,
        "udp_src_port": f.headers.udp_src_port, "udp_dst_port": f.headers.udp_dst_port,
        "src_qpn": f.tx_qp.lqpn, "dst_qpn": f.rx_qp.lqpn, "src_pid": f.tx_qp.pid, "comm": p.comm,
        "comm_id": f"{p.comm_id:#x}", "channel": p.channel,
        "src_rank": p.a_rank if f.forward else p.b_rank, "dst_rank": p.b_rank if f.forward else p.a_rank,
        "created_ns": p.created_ns,
    }


def tick_record(stats: TickStats, flows: Mapping[int, Flow], link_ids: Sequence[str],
                group_sizes: Mapping[str, int], path_id: Callable[[tuple[str, ...]], int]) -> dict[str, object]:
    """One line of ``ticks.jsonl``: per flow its path id, bytes, packets and payload bytes; per loaded link its
    bytes and packets; per ECMP group the bytes over each member (``group_sizes``: group id -> members)."""
    rows_out = []
    groups: dict[str, list[int]] = {}
    for fid, (pl, wire, pk) in sorted(stats.flows.items()):
        f = flows[fid]
        assert f.path is not None
        # A spread flow has one row per path its packets took (same id), the truth per member.
        rows = [(p.links, p.group_hops, w, k, p_l) for p, p_l, w, k in stats.spread[fid]] \
            if fid in stats.spread else [(f.path, f.group_hops, wire, pk, pl)]
        for links, group_hops, w, k, p_l in rows:
            rows_out.append([fid, path_id(tuple(link_ids[i] for i in links)), w, k, p_l])
            for gid, pos in group_hops:
                loads = groups.setdefault(gid, [0] * group_sizes[gid])
                loads[pos] += w
    link_rows = [[link_ids[i], int(stats.link_bytes[i]), int(stats.link_pkts[i])]
                 for i in np.flatnonzero(stats.link_bytes)]
    return {"start_ns": stats.start_ns, "end_ns": stats.end_ns, "flows": rows_out, "links": link_rows,
            "groups": groups}
