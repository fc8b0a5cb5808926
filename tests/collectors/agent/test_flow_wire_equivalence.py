"""The columnar agent path gives, byte for byte, the FlowBatches of the record-by-record one.

``Reference*`` below is the host pipeline as it was before the columnar rewrite (one QpState /
QpDelta per QP, one ``Flow`` message per flow, ``FlowBatch.SerializeToString``), kept verbatim in
substance as the oracle. Random multi-window scenarios (new generations, vanished and reused QP
numbers, PSN wraps, per-QP counters bound, shared, reset and re-bound, duplicate records,
ambiguous peers, NCCL tags and collectives, several leaves, ports without topology) must give
identical serialized batches and window statistics; so must ``parse_res_qp``'s msgspec path and
its per-entry path on mutated documents.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from flowtracer.collectors.agent.collective_profile import CollectiveProfiler
from flowtracer.collectors.agent.flow_wire import FlowParts, encode_flows
from flowtracer.collectors.agent.host_pipeline import HostPipeline
from flowtracer.collectors.agent.host_window import HostSample, PipelineConfig, WindowStats
from flowtracer.collectors.agent.peers.matching import Endpoint, PeerDirectory
from flowtracer.collectors.agent.port_windows import PortDelta, PortTracker
from flowtracer.collectors.agent.qp_rows import FLOW_QP_TYPES, PSN_ESTIMATE, QP_COUNTER
from flowtracer.collectors.agent.sources import rdma_json
from flowtracer.collectors.agent.sources.inventory import Inventory, NicInfo
from flowtracer.collectors.agent.sources.nccl_log import NcclLog, QpTag
from flowtracer.collectors.agent.sources.rdma_json import (
    QPN_MASK,
    QpBytes,
    QpCounter,
    QpRecord,
    parse_res_qp,
    per_qp_counters,
)
from flowtracer.collectors.agent.sources.sysfs import Gid, PortView, SysfsView, roce_path_mtu
from flowtracer.fabric.roce import ROCEV2_UDP_DPORT, rocev2_udp_sport
from flowtracer.fabric.topology import parse_topology
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import flows_pb2 as pb

# -- the reference: the record-by-record pipeline ----------------------------------------------


@dataclass(slots=True)
class _St:
    device: str
    port: int
    lqpn: int
    rqpn: int
    pid: int
    comm: str
    qp_type: str
    state: str
    generation: int
    sq_psn: int
    rq_psn: int | None
    cntn: int | None = None
    counters: tuple[int, int, int, int] | None = None
    cache: Any = None


@dataclass(slots=True)
class _Delta:
    qp: _St
    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int
    byte_source: int
    error_bound: int


class ReferenceTracker:
    def __init__(self, *, default_mtu: int = 4096, frame_overhead: int = 62, initial_psn: int | None = None) -> None:
        self.default_mtu, self.frame_overhead, self.initial_psn = default_mtu, frame_overhead, initial_psn
        self.qps: dict[tuple[str, int, int], _St] = {}
        self._cntns: set[tuple[str, int, int]] = set()
        self._primed = False

    def update(self, records: list[QpRecord], counters: dict[tuple[str, int, int], QpBytes] | None, now_ns: int,
               mtu: dict[tuple[str, int], int]) -> list[_Delta]:
        old, new, out = self.qps, {}, []
        counters = counters or {}
        first = not self._primed
        seen: set[tuple[str, int, int]] = set()
        for r in records:
            rqpn = r.rqpn
            if rqpn is None or rqpn == r.lqpn or r.port == 0 or r.qp_type not in FLOW_QP_TYPES:
                continue
            key = (r.device, r.port, r.lqpn)
            ctr = counters.get(key)
            cntn, vals = (None, None) if ctr is None else ctr
            if ctr is not None:
                seen.add((r.device, r.port, cntn))
            st = old.get(key)
            path_mtu = mtu.get((r.device, r.port), self.default_mtu)
            if (st is not None and st.rqpn == rqpn and st.pid == r.pid
                    and (st.cntn is None or cntn is None or st.cntn == cntn)):
                st.state, st.comm = r.state, r.comm
                before = st.counters
                d = None
                if vals is not None and before is not None and st.cntn == cntn:
                    dv = [a - b for a, b in zip(vals, before, strict=True)]
                    if min(dv) >= 0:
                        d = _Delta(st, *dv, QP_COUNTER, 0)
                if d is None:
                    d = self._psn(st, st.sq_psn, st.rq_psn, r, path_mtu)
                out.append(d)
            else:
                st = _St(r.device, r.port, r.lqpn, rqpn, r.pid, r.comm, r.qp_type, r.state, now_ns, r.sq_psn,
                         r.rq_psn)
                if not first:
                    if vals is not None and (r.device, r.port, cntn) not in self._cntns:
                        out.append(_Delta(st, *vals, QP_COUNTER, 0))
                    elif self.initial_psn is not None:
                        init = self.initial_psn
                        out.append(self._psn(st, init, init if r.rq_psn is not None else None, r, path_mtu))
            st.sq_psn, st.rq_psn = r.sq_psn, r.rq_psn
            st.cntn, st.counters = cntn, vals
            new[key] = st
        self.qps, self._cntns, self._primed = new, seen, True
        return out

    def _psn(self, st: _St, sq0: int, rq0: int | None, r: QpRecord, mtu: int) -> _Delta:
        tx = (r.sq_psn - sq0) & QPN_MASK
        rx = (r.rq_psn - rq0) & QPN_MASK if r.rq_psn is not None and rq0 is not None else 0
        frame = mtu + self.frame_overhead
        return _Delta(st, tx * frame, rx * frame, tx, rx, PSN_ESTIMATE, tx * (mtu - 1))


def _reference_bounds(deltas: list[_Delta], mtu: int, overhead: int, lower: int | None, upper: int | None) -> None:
    frame = mtu + overhead
    est = [d for d in deltas if d.byte_source == PSN_ESTIMATE]
    if not est:
        return
    slack = None
    if lower is not None and upper is not None:
        pk_all = sum(d.tx_packets for d in deltas)
        if upper >= pk_all:
            slack = max(0, sum(d.tx_bytes for d in deltas) - lower + (upper - pk_all) * frame + 4) + 20 * pk_all
    for d in est:
        over = d.tx_packets * (mtu - 1)
        if slack is not None:
            over = min(over, slack)
        d.error_bound = max(over, d.tx_packets * 20)


class ReferencePeers:
    def __init__(self) -> None:
        self._ends: dict[tuple[int, int], list[Endpoint]] = {}
        self.ambiguous = 0

    def add(self, end: Endpoint, lqpn: int, rqpn: int) -> None:
        self._ends.setdefault((lqpn, rqpn), []).append(end)

    def peer(self, end: Endpoint, lqpn: int, rqpn: int) -> Endpoint | None:
        found = self._ends.get((rqpn, lqpn))
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        others = [e for e in found if e != end]
        if len(others) == 1:
            return others[0]
        self.ambiguous += 1
        return None


_QP_TYPES = {"RC": pb.QP_TYPE_RC, "UC": pb.QP_TYPE_UC, "UD": pb.QP_TYPE_UD, "XRC_INI": pb.QP_TYPE_XRC,
             "XRC_TGT": pb.QP_TYPE_XRC, "RAW_PACKET": pb.QP_TYPE_RAW}
_QP_STATES = {"RESET": pb.QP_STATE_RESET, "INIT": pb.QP_STATE_INIT, "RTR": pb.QP_STATE_RTR,
              "RTS": pb.QP_STATE_RTS, "SQD": pb.QP_STATE_SQD, "SQE": pb.QP_STATE_SQE, "ERR": pb.QP_STATE_ERR}


class ReferencePipeline:
    def __init__(self, host: str, inventory: Inventory, cfg: PipelineConfig) -> None:
        self.host, self.inventory, self.cfg = host, inventory, cfg
        self.qps = ReferenceTracker(default_mtu=cfg.default_mtu, frame_overhead=cfg.frame_overhead,
                                    initial_psn=cfg.initial_psn)
        self.ports = PortTracker()
        self.collectives = CollectiveProfiler()  # the same aggregation; what is checked here is its place on the wire
        self.nccl = NcclLog(on_call=self.collectives.call)
        self._gids: dict[tuple[str, int], list[Gid]] = {}
        self._netdev_mtu: dict[tuple[str, int], int] = {}
        self._src: dict[tuple[str, int], tuple[str, str, str]] = {}
        self._ends: dict[tuple[str, int], Endpoint] = {}
        self._seq: dict[str, int] = {}
        self._nccl_malformed = self._carry_malformed = 0
        self.jobs: dict[int, str] = {}
        self._primed = False

    def prepare(self, sample: HostSample, peers: ReferencePeers) -> None:
        for key, pv in sample.sysfs.ports.items():
            if pv.gids:
                self._gids[key] = pv.gids
            if pv.netdev_mtu:
                self._netdev_mtu[key] = pv.netdev_mtu
            if key not in self._src or pv.gids:
                self._src[key] = self._address(pv)
                self._ends.pop(key, None)
        if sample.nccl_lines:
            self.nccl.feed(sample.nccl_lines)
        for r in sample.qps or []:
            if r.rqpn is not None and r.rqpn != r.lqpn and r.qp_type in FLOW_QP_TYPES:
                end = self._ends.get((r.device, r.port))
                if end is None:
                    end = self._ends[(r.device, r.port)] = self._endpoint(r.device, r.port)
                peers.add(end, r.lqpn, r.rqpn)

    def _endpoint(self, device: str, port: int) -> Endpoint:
        s = self._src.get((device, port))
        if s is None:
            s = self._src[(device, port)] = self._address(PortView(device, port))
        return Endpoint(self.host, device, port, s[0])

    def _address(self, pv: PortView) -> tuple[str, str, str]:
        nic: NicInfo | None = self.inventory.nic(self.host, pv.device, pv.port)
        gids = pv.gids or self._gids.get((pv.device, pv.port), [])
        ips = PortView(pv.device, pv.port, gids=gids).roce_v2_ips()
        ip = nic.ip if nic is not None and nic.ip in ips else ips[0] if ips else nic.ip if nic is not None else ""
        netdev = PortView(pv.device, pv.port, gids=gids).netdev or (nic.netdev if nic is not None else "")
        return ip, netdev, nic.leaf if nic is not None else ""

    def window(self, sample: HostSample, start_ns: int, end_ns: int, peers: ReferencePeers,
               received_ns: int = 0) -> tuple[list[pb.FlowBatch], WindowStats]:
        stats = WindowStats()
        primed, self._primed = self._primed, True
        self.jobs = sample.jobs
        counters = None if sample.counters is None else per_qp_counters(sample.counters)
        mtu = {k: roce_path_mtu(v) for k, v in self._netdev_mtu.items()}
        deltas = self.qps.update(sample.qps or [], counters, sample.taken_ns, mtu)
        if sample.qps is not None and self.nccl.knows_anything():  # the same forgetting rule as production
            self.nccl.retain({(r.device, r.lqpn) for r in sample.qps}, {(r.pid, r.lqpn) for r in sample.qps})
        port_deltas = self.ports.update(_totals(sample.sysfs),
                                        None if sample.sysfs_before is None else _totals(sample.sysfs_before))
        self._bound(deltas, port_deltas, mtu)
        malformed = sample.malformed + self.nccl.malformed - self._nccl_malformed
        self._nccl_malformed = self.nccl.malformed
        stats.malformed = malformed
        if not primed:
            self._carry_malformed += malformed
            return [], stats
        malformed += self._carry_malformed
        self._carry_malformed = 0
        batches = {leaf: self._batch(leaf, start_ns, end_ns) for leaf in self.inventory.leaves(self.host)}
        for d in deltas:
            if not (d.tx_bytes or d.rx_bytes or d.tx_packets or d.rx_packets):
                continue
            s = self._src.get((d.qp.device, d.qp.port)) or ("", "", "")
            b = batches.get(s[2]) or batches.setdefault(s[2], self._batch(s[2], start_ns, end_ns))
            if not self._add_flow(b, d, s, peers):
                stats.unresolved_dst += 1
            stats.flows += 1
            if d.byte_source == QP_COUNTER:
                stats.exact += 1
            else:
                stats.estimated += 1
        for p in port_deltas:
            s = self._src.get((p.device, p.port)) or ("", "", "")
            b = batches.get(s[2]) or batches.setdefault(s[2], self._batch(s[2], start_ns, end_ns))
            b.ports.add(rdma_device=p.device, port=p.port, netdev=s[1], tx_bytes=p.tx_bytes,
                        rx_bytes=p.rx_bytes, tx_packets=p.tx_packets, rx_packets=p.rx_packets)
        if not batches:
            batches[""] = self._batch("", start_ns, end_ns)
        out = [batches[k] for k in sorted(batches)]
        out[0].malformed_records = malformed
        out[0].collectives.extend(self.collectives.take(self.host, lambda pid: self.jobs.get(pid) or self.cfg.job_id,
                                                        start_ns, end_ns))
        for b in out:
            self._seq[b.leaf] = b.sequence = self._seq.get(b.leaf, 0) + 1
            b.received_ns = received_ns
        return out, stats

    def _bound(self, deltas: list[_Delta], port_deltas: list[PortDelta], mtu: dict[tuple[str, int], int]) -> None:
        by_port: dict[tuple[str, int], list[_Delta]] = {}
        for d in deltas:
            by_port.setdefault((d.qp.device, d.qp.port), []).append(d)
        pd = {(p.device, p.port): p for p in port_deltas}
        for key, ds in by_port.items():
            p = pd.get(key)
            _reference_bounds(ds, mtu.get(key, self.cfg.default_mtu), self.cfg.frame_overhead,
                              None if p is None else p.tx_bytes_lower, None if p is None else p.tx_packets_upper)

    def _batch(self, leaf: str, start_ns: int, end_ns: int) -> pb.FlowBatch:
        return pb.FlowBatch(schema_version=SCHEMA_VERSION, host=self.host, leaf=leaf, window_start_ns=start_ns,
                            window_end_ns=end_ns, agent_id=self.cfg.agent_id)

    def _add_flow(self, batch: pb.FlowBatch, d: _Delta, s: tuple[str, str, str], peers: ReferencePeers) -> bool:
        st = d.qp
        end = self._ends.get((st.device, st.port)) or self._endpoint(st.device, st.port)
        peer = peers.peer(end, st.lqpn, st.rqpn)
        dst = peer.ip if peer is not None else ""
        tag = self.nccl.tag(st.pid, st.device, st.lqpn)
        key = (dst, s[0], s[1], st.state, st.comm, None if tag is None else (tag.comm.id, tag.comm.rank,
                                                                              tag.comm.nranks, tag.channel,
                                                                              tag.peer_rank))
        if st.cache is None or st.cache[0] != key:
            st.cache = (key, self._template(st, s, dst, tag))
        f = batch.flows.add()
        f.MergeFrom(st.cache[1])
        f.tx_bytes, f.rx_bytes, f.tx_packets, f.rx_packets = d.tx_bytes, d.rx_bytes, d.tx_packets, d.rx_packets
        f.byte_source = d.byte_source
        if d.error_bound:
            f.byte_error_bound = d.error_bound
        if tag is not None and tag.comm.collective:
            f.nccl.collective, f.nccl.op_count = tag.comm.collective, tag.comm.op_count
        return bool(dst)

    def _template(self, st: _St, s: tuple[str, str, str], dst: str, tag: QpTag | None) -> pb.Flow:
        tc = self.nccl.traffic_class(st.pid)
        f = pb.Flow(rdma_device=st.device, port=st.port, netdev=s[1], lqpn=st.lqpn, rqpn=st.rqpn,
                    qp_type=_QP_TYPES.get(st.qp_type, pb.QP_TYPE_UNSPECIFIED),
                    qp_state=_QP_STATES.get(st.state, pb.QP_STATE_UNSPECIFIED), qp_generation=st.generation,
                    src_ip=s[0], dst_ip=dst, udp_src_port=rocev2_udp_sport(st.lqpn, st.rqpn),
                    udp_dst_port=ROCEV2_UDP_DPORT, dscp=(tc >> 2) if tc is not None else self.cfg.dscp,
                    pid=st.pid, comm=st.comm, job_id=self.jobs.get(st.pid) or self.cfg.job_id)
        if tag is not None:
            f.nccl.comm_id, f.nccl.rank, f.nccl.nranks = tag.comm.id, tag.comm.rank, tag.comm.nranks
            f.nccl.peer_rank, f.nccl.channel = tag.peer_rank, tag.channel
        return f


def _totals(view: SysfsView) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    out = {}
    for key, pv in view.ports.items():
        t = (pv.tx_bytes, pv.rx_bytes, pv.tx_packets, pv.rx_packets)
        if None not in t:
            out[key] = t
    return out


# -- random scenarios --------------------------------------------------------------------------

TOPOLOGY = """
switches: [{name: leaf1, role: leaf}, {name: leaf2, role: leaf}]
hosts:
  - name: h1
    nics:
      - {rdma_device: mlx5_0, netdev: eth0, ip: 10.0.1.1, leaf: "leaf1:e1"}
      - {rdma_device: mlx5_1, netdev: eth1, ip: 10.0.2.1, leaf: "leaf2:e1"}
  - name: h2
    nics:
      - {rdma_device: mlx5_0, netdev: eth0, ip: 10.0.1.2, leaf: "leaf1:e2"}
      - {rdma_device: mlx5_1, netdev: eth1, ip: 10.0.2.2, leaf: "leaf2:e2"}
"""
T0 = 1_700_000_000_000_000_000
G = 1_000_000_000
PORTS_H1 = [("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_2", 1)]  # mlx5_2: not in the topology (leaf "")


def _gid(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a << 8 | b:04x}:{c << 8 | d:04x}"


def _nccl_lines(rng: random.Random, qpns: list[int], step: int) -> list[str]:
    """NCCL INFO lines tagging some of h1's QPs on mlx5_0 (pid 4242), with collectives."""
    p = "h1:4242:4242 [0] NCCL INFO "
    if step == 0:
        out = [p + "NCCL_IB_TC set by environment to 106.",
               p + "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.1.1<0>",
               p + "ncclCommInitRank comm 0x55d0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 "
                   "commId 0xabcdef - Init START"]
        for ch, q in enumerate(qpns):
            out.append(p + f"Channel {ch:02d}/0 : 0[0] -> {1 + ch % 3}[0] [send] via NET/IB/0/GDRDMA")
            out.append(p + f"NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn {q} mtu 5 GID 3 (0/x) fifoRkey=0x1 fifoLkey=0x1")
        out.append(p + "ncclCommInitRank comm 0x55d0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 "
                       "commId 0xabcdef localSize 328 used 1 bytes - Init COMPLETE")
        return out
    if rng.random() < 0.7:
        return [p + f"AllReduce: opCount {step:x} sendbuff 0x1 recvbuff 0x1 count 262144 datatype 7 op 0 root 0 "
                    "comm 0x55d0 [nranks=4] stream 0x2"]
    return []


class _World:
    """h1's QPs (the host under test) and h2's (their peers), advanced window by window."""

    def __init__(self, rng: random.Random, n: int) -> None:
        self.rng = rng
        self.qps: list[dict[str, Any]] = []
        self.next_cntn = 100
        for i in range(n):
            dev, port = rng.choice(PORTS_H1)
            self.qps.append(self._new(dev, port, 0x100 + i))
        # non-flow QPs: GSI/UD, a loopback, one without a port yet
        self.static = [QpRecord("mlx5_0", 1, 1, None, "GSI", "RTS", None, 0, 0, "ib_core"),
                       QpRecord("mlx5_0", 1, 9, None, "UD", "RTS", None, 5, 77, "x"),
                       QpRecord("mlx5_1", 1, 20, 20, "RC", "RTS", 1, 1, 77, "x"),
                       QpRecord("mlx5_1", 0, 21, 5, "RC", "RESET", 0, 0, 77, "x")]
        self.port_tx = {p: 10_000 for p in PORTS_H1}

    def _new(self, dev: str, port: int, lqpn: int) -> dict[str, Any]:
        r = self.rng
        q = {"dev": dev, "port": port, "lqpn": lqpn, "rqpn": 0x8000 + r.randrange(64), "type": r.choice(["RC"] * 9 + ["UC"]),
             "state": "RTS", "sq": r.randrange(1 << 24), "rq": r.choice([r.randrange(1 << 24), None]),
             "pid": r.choice([4242, 4242, 4243, 0]), "comm": r.choice(["python3", "pt_main", "rpcrdma"]),
             "cntn": None, "ctr": [r.choice([0, 0, 0, (1 << 63) - 10**6, (1 << 64) - 10**13])] * 4}
        if r.random() < 0.5:
            q["cntn"] = self.next_cntn
            self.next_cntn += 1
        return q

    def step(self) -> None:
        r = self.rng
        for q in self.qps:
            roll = r.random()
            pk = r.choice([0, 0, 1, 50, 4000, (1 << 24) - 3])
            q["sq"] = (q["sq"] + pk) & QPN_MASK
            if q["rq"] is not None:
                q["rq"] = (q["rq"] + r.choice([0, 7, 70000])) & QPN_MASK
            q["ctr"] = [q["ctr"][0] + pk * 4100, q["ctr"][1] + r.randrange(3) * 64, q["ctr"][2] + pk,
                        q["ctr"][3] + r.randrange(3)]
            if roll < 0.04:
                q["rqpn"] = 0x8000 + r.randrange(64)  # reused lqpn towards another peer
            elif roll < 0.07:
                q["state"] = r.choice(["ERR", "SQD", "RTS"])
            elif roll < 0.09:
                q["comm"] = r.choice(["python3", "torchrun"])
            elif roll < 0.11:
                q["cntn"] = None if q["cntn"] is not None else self.next_cntn  # unbound / newly bound
                self.next_cntn += 1
            elif roll < 0.12 and q["cntn"] is not None:
                q["cntn"] = self.next_cntn  # bound to another counter: a new generation
                self.next_cntn += 1
            elif roll < 0.13:
                q["type"] = "UC" if q["type"] == "RC" else "RC"  # the generation keeps its first type
            elif roll < 0.14:
                q["ctr"] = [0, 0, 0, 0]  # counter cleared: goes down
            elif roll < 0.16:
                q["pid"] = r.choice([4242, 5000])
            elif roll < 0.18:
                q["hidden"] = not q.get("hidden", False)  # missing from a sample: new generation after
        if r.random() < 0.5:
            dev, port = r.choice(PORTS_H1)
            self.qps.append(self._new(dev, port, 0x100 + len(self.qps)))
        for p in self.port_tx:
            self.port_tx[p] += r.randrange(0, 1 << 30)

    def records(self) -> list[QpRecord]:
        out = list(self.static)
        for q in self.qps:
            if not q.get("hidden"):
                out.append(QpRecord(q["dev"], q["port"], q["lqpn"], q["rqpn"], q["type"], q["state"], q["rq"],
                                    q["sq"], q["pid"], q["comm"]))
        if self.rng.random() < 0.25 and len(out) > 6:  # a QP listed twice (never from iproute2)
            i = self.rng.randrange(4, len(out))
            dup = out[i]._replace(sq_psn=(out[i].sq_psn + 3) & QPN_MASK, state="SQD")
            out.insert(self.rng.randrange(i, len(out) + 1), dup)
        return out

    def counters(self) -> list[QpCounter]:
        out, shared = [], []
        for q in self.qps:
            if q["cntn"] is None:
                continue
            v = {"rdma_tx_bytes": q["ctr"][0], "rdma_rx_bytes": q["ctr"][1], "rdma_tx_packets": q["ctr"][2],
                 "rdma_rx_packets": q["ctr"][3]}
            if self.rng.random() < 0.1:
                shared.append(q["lqpn"])  # bound to a counter shared with others: no exact bytes
                continue
            out.append(QpCounter(q["dev"], q["port"], q["cntn"], "RC", q["pid"], q["comm"], v, (q["lqpn"],)))
        if shared:
            out.append(QpCounter("mlx5_0", 1, 9999, "RC", 0, "", {"rdma_tx_bytes": 1}, tuple(shared)))
        return out

    def sysfs(self) -> SysfsView:
        ports = {}
        for (dev, port), tx in self.port_tx.items():
            ip = {"mlx5_0": "10.0.1.1", "mlx5_1": "10.0.2.1", "mlx5_2": "10.9.9.9"}[dev]
            pv = PortView(dev, port, counters={"port_xmit_data": tx // 4, "port_rcv_data": tx // 8,
                                                "port_xmit_packets": tx // 4000, "port_rcv_packets": tx // 9000},
                          gids=[Gid(3, _gid(ip), "RoCE v2", f"nd_{dev}")],
                          netdev_mtu=self.rng.choice([9000, 1500]) if dev == "mlx5_2" else 9000)
            ports[(dev, port)] = pv
        return SysfsView(ports)

    def peer_records(self) -> list[QpRecord]:
        """h2's QPs: the other end of most of h1's (some on both NICs: ambiguous)."""
        out = []
        for q in self.qps:
            if self.rng.random() < 0.8:
                out.append(QpRecord(q["dev"] if q["dev"] != "mlx5_2" else "mlx5_0", 1, q["rqpn"], q["lqpn"], "RC",
                                    "RTS", 0, 0, 1, "python3"))
            if self.rng.random() < 0.05:
                out.append(QpRecord("mlx5_1", 1, q["rqpn"], q["lqpn"], "RC", "RTS", 0, 0, 1, "python3"))
        return out


def _run(seed: int, windows: int, counters: bool, initial_psn: int | None, nccl: bool) -> int:
    rng = random.Random(seed)
    world = _World(rng, rng.randrange(1, 60))
    inv = Inventory(parse_topology(TOPOLOGY))
    cfg = PipelineConfig(agent_id="a1", initial_psn=initial_psn, dscp=3, job_id=rng.choice(["", "job7"]))
    new, ref = HostPipeline("h1", inv, cfg), ReferencePipeline("h1", inv, cfg)
    new_peer, ref_peer = HostPipeline("h2", inv, cfg), ReferencePipeline("h2", inv, cfg)
    tagged = [q["lqpn"] for q in world.qps if q["dev"] == "mlx5_0"][:6]
    # jobs of some pids, as a source read them from /proc (a pid's job does not change)
    jobs = rng.choice([{}, {4242: "1234"}, {4242: "1234", 5000: "k8s:pod1"}])
    flows = 0
    for step in range(windows):
        t = T0 + step * G
        lines = _nccl_lines(rng, tagged, step) if nccl else []
        sample = HostSample("h1", t, world.records(), world.counters() if counters else None, world.sysfs(), lines,
                            malformed=rng.choice([0, 0, 2]),
                            sysfs_before=world.sysfs() if rng.random() < 0.5 else None, jobs=jobs)
        peer_sample = HostSample("h2", t, world.peer_records(), None, SysfsView())
        pn, pr = PeerDirectory(), ReferencePeers()
        new.prepare(sample, pn)
        new_peer.prepare(peer_sample, pn)
        ref.prepare(sample, pr)
        ref_peer.prepare(peer_sample, pr)
        received = rng.choice([0, t + rng.randrange(1, 10**8)])  # the agent's read stamp; 0: an older agent
        got, got_stats = new.window_encoded(sample, t - G, t, pn, received)
        want, want_stats = ref.window(sample, t - G, t, pr, received)
        assert [b.value for b in got] == [b.SerializeToString() for b in want], (seed, step)
        assert got_stats == want_stats, (seed, step)
        assert pn.ambiguous == pr.ambiguous
        flows += want_stats.flows
        world.step()
    return flows


@pytest.mark.parametrize("counters", [False, True])
@pytest.mark.parametrize("nccl", [False, True])
def test_batches_equal_the_record_by_record_pipeline_byte_for_byte(counters: bool, nccl: bool) -> None:
    flows = sum(_run(seed, 8, counters, initial_psn, nccl) for seed in range(12) for initial_psn in (None, 0))
    assert flows > 1000  # the scenarios did produce traffic


def test_window_messages_are_the_encoded_batches() -> None:
    inv = Inventory(parse_topology(TOPOLOGY))
    pipe = HostPipeline("h1", inv, PipelineConfig(agent_id="a"))
    world = _World(random.Random(3), 20)
    for step in range(3):
        s = HostSample("h1", T0 + step * G, world.records(), None, world.sysfs())
        pipe.prepare(s, PeerDirectory())
        batches, _ = pipe.window(s, T0, T0 + step * G, PeerDirectory())
        assert all(isinstance(b, pb.FlowBatch) for b in batches)
        world.step()
    assert batches and batches[0].flows


def test_encode_flows_matches_protobuf_for_extreme_values() -> None:
    rng = np.random.default_rng(7)
    n = 300
    edges = np.array([0, 1, 127, 128, 16383, 16384, (1 << 35) - 1, 1 << 35, (1 << 63) - 1, (1 << 64) - 1],
                     dtype=np.uint64)
    values = rng.choice(edges, size=(n, 6))
    values[:, 4] = rng.choice([1, 2], n)
    pre = [pb.Flow(rdma_device="d" * int(rng.integers(0, 200)), lqpn=int(rng.integers(0, 1 << 24))).SerializeToString()
           for _ in range(n)]
    suf = [pb.Flow(pid=int(rng.integers(0, 1 << 32)), comm="c" * int(rng.integers(0, 3))).SerializeToString()
           for _ in range(n)]
    parts = FlowParts(n)
    parts.set(list(range(n)), pre, suf)
    want = pb.FlowBatch()
    for i in range(n):
        f = want.flows.add()
        f.MergeFromString(pre[i] + suf[i])
        f.tx_bytes, f.rx_bytes, f.tx_packets, f.rx_packets, f.byte_source, f.byte_error_bound = (
            int(v) for v in values[i])
    assert encode_flows(parts, values) == want.SerializeToString()
    assert encode_flows(parts.take(np.array([5, -1, 7])), values[[5, 0, 7]]) == b"".join(
        encode_flows(p, v) for p, v in ((parts.take(np.array([5])), values[[5]]),
                                        (FlowParts(1), values[[0]]), (parts.take(np.array([7])), values[[7]])))


@pytest.mark.skipif(rdma_json.msgspec is None, reason="msgspec not installed: only the per-entry path exists")
def test_fast_parse_equals_the_per_entry_parse(fixtures: Any) -> None:
    rng = random.Random(9)
    docs = [(fixtures / "rdma" / n).read_bytes() for n in ("res_qp.json", "res_qp_malformed.json")]
    docs.append(json.dumps([{"ifname": "mlx5_0", "lqpn": 5, "sq-psn": 1, "type": "RC", "state": "RTS",
                             "comm": {"x": 1}, "unknown": [1, "\u00e9"]}]).encode())
    fast_used = 0
    for _ in range(400):
        b = bytearray(rng.choice(docs))
        for _ in range(rng.randrange(0, 4)):
            i = rng.randrange(len(b))
            op = rng.randrange(4)
            if op == 0:
                b[i] = rng.randrange(256)
            elif op == 1:
                del b[i:i + rng.randrange(1, 8)]
            elif op == 2:
                b[i:i] = rng.choice([b"null", b"-1", b"true", b"1.0", b"1e2", b'"x"', b"16777216", b"\xff"])
            else:
                b[i:i] = b' "pid": 7, '
        text = bytes(b)
        fast_used += rdma_json._fast_res_qp(text) is not None
        parsed = parse_res_qp(text)
        assert (list(parsed.records), parsed.malformed) == _per_entry_doc(text), text
        assert [list(getattr(parsed.records, f)) for f in rdma_json._QP_FIELDS] == [
            [getattr(r, f) for r in parsed.records] for f in rdma_json._QP_FIELDS]
    assert fast_used > 50


def _per_entry(entries: list[Any]) -> tuple[list[QpRecord], int]:
    """The per-entry checks of ``parse_res_qp``, on decoded entries."""
    out, bad = [], 0
    m = QPN_MASK
    for d in entries:
        try:
            dev, lqpn, sq, qp_type, state = d["ifname"], d["lqpn"], d["sq-psn"], d["type"], d["state"]
        except KeyError:
            bad += 1
            continue
        port, rqpn, rq, pid, comm = d.get("port", 0), d.get("rqpn"), d.get("rq-psn"), d.get("pid", 0), d.get("comm", "")
        if (type(lqpn) is not int or type(sq) is not int or type(port) is not int or type(pid) is not int
                or type(dev) is not str or type(qp_type) is not str or type(state) is not str or not dev
                or not (0 <= lqpn <= m and 0 <= sq <= m and port >= 0 and pid >= 0)
                or (rqpn is not None and (type(rqpn) is not int or not 0 <= rqpn <= m))
                or (rq is not None and (type(rq) is not int or not 0 <= rq <= m))):
            bad += 1
            continue
        out.append(QpRecord(dev, port, lqpn, rqpn, qp_type, state, rq, sq, pid, comm if type(comm) is str else ""))
    return out, bad


def _per_entry_doc(text: bytes) -> tuple[list[QpRecord], int]:
    if not text or not text.strip():
        return [], 0
    entries, bad, _salvaged = rdma_json._load(text)
    recs, b = _per_entry(entries)
    return recs, bad + b
