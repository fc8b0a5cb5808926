"""One host's agent state across windows: samples in, FlowBatch messages (one per leaf) out.

A round of the agent is two steps per host, so that peers can be matched across hosts:
``prepare(sample)`` (source addresses, NCCL lines, the host's QP ends for the peer directory),
then ``window(sample, start_ns, end_ns, peers)``. Each Flow is the transmit direction of one QP
from this host: ``src_ip`` is the local NIC, ``udp_src_port`` the port upstream Linux derives from
(lqpn, rqpn) with flow label 0 (``schemas.roce``), bytes are window deltas.

The per-window work runs on columns (10k QPs per window on a big host): ``qp_windows`` computes
the deltas, and the batches are assembled as serialized bytes (``flow_wire``) from each QP
generation's cached Flow fields plus the window's numbers, without a message object per flow.
``window_encoded`` returns those bytes (what the agent sends); ``window`` the same as messages.

The host's NCCL COLL lines of the window go into the first leaf's batch as ``CollectiveProfile`` s
(``collective_profile``), each logging pid's calls under its job (the pid's from the sample, else the
configured ``job_id``); lines read before the first window are reported with the first batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flowtracer.collectors.agent.collective_profile import CollectiveProfiler
from flowtracer.collectors.agent.flow_cache import FlowCache, FlowTemplate, intern_id, is_range
from flowtracer.collectors.agent.flow_wire import NCCL_TAG, encode_flows
from flowtracer.collectors.agent.host_window import EncodedBatch, HostSample, PipelineConfig, WindowStats
from flowtracer.collectors.agent.nic_congestion import NicCongestionTracker
from flowtracer.collectors.agent.peers.matching import Endpoint, PeerDirectory
from flowtracer.collectors.agent.port_windows import PortDelta, PortTracker, Totals
from flowtracer.collectors.agent.psn_bounds import psn_bounds
from flowtracer.collectors.agent.qp_rows import PSN_ESTIMATE, QP_COUNTER, QpRows, QpWindow, sample_arrays
from flowtracer.collectors.agent.qp_windows import QpTracker
from flowtracer.collectors.agent.sources.inventory import Inventory, NicInfo
from flowtracer.collectors.agent.sources.nccl_line import nccl_zone
from flowtracer.collectors.agent.sources.nccl_log import NcclLog, QpTag
from flowtracer.collectors.agent.sources.rdma_json import QpColumns, per_qp_counter_columns
from flowtracer.collectors.agent.sources.sysfs import Gid, PortView, SysfsView, roce_path_mtu
from flowtracer.fabric.roce import ROCEV2_UDP_DPORT, rocev2_udp_sport
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import flows_pb2 as pb
from flowtracer.schemas.wire import varint

__all__ = ["EncodedBatch", "HostPipeline", "HostSample", "PipelineConfig", "WindowStats"]

_QP_TYPES = {"RC": pb.QP_TYPE_RC, "UC": pb.QP_TYPE_UC, "UD": pb.QP_TYPE_UD, "XRC_INI": pb.QP_TYPE_XRC,
             "XRC_TGT": pb.QP_TYPE_XRC, "RAW_PACKET": pb.QP_TYPE_RAW}
_QP_STATES = {"RESET": pb.QP_STATE_RESET, "INIT": pb.QP_STATE_INIT, "RTR": pb.QP_STATE_RTR,
              "RTS": pb.QP_STATE_RTS, "SQD": pb.QP_STATE_SQD, "SQE": pb.QP_STATE_SQE, "ERR": pb.QP_STATE_ERR}
_NO_SRC = ("", "", "")
_MAX_INTERNED = 1 << 16


class HostPipeline:
    """State of one host across windows: QP generations, port baselines, NCCL knowledge, sequences."""

    def __init__(self, host: str, inventory: Inventory, cfg: PipelineConfig) -> None:
        self.host = host
        self.inventory = inventory
        self.cfg = cfg
        self.qps = QpTracker(default_mtu=cfg.default_mtu, frame_overhead=cfg.frame_overhead,
                             initial_psn=cfg.initial_psn)
        self.ports = PortTracker()
        self.congestion = NicCongestionTracker()
        self.collectives = CollectiveProfiler()
        self.nccl = NcclLog(on_call=self.collectives.call, zone=nccl_zone(cfg.nccl_zone))
        self._gids: dict[tuple[str, int], list[Gid]] = {}
        self._netdev_mtu: dict[tuple[str, int], int] = {}
        self._src: dict[tuple[str, int], tuple[str, str, str]] = {}  # (device, port) -> (ip, netdev, leaf)
        self._ends: dict[tuple[str, int], Endpoint] = {}
        self._seq: dict[str, int] = {}
        self._nccl_malformed = 0
        self._carry_malformed = 0
        self._primed = False
        self._cache = FlowCache()  # one row per row of self.qps.rows: that QP generation's Flow bytes
        self._tag_ids: dict[tuple[str, int, int, int, int], int] = {}
        self._jobs: dict[int, str] = {}  # pid -> job id, of the sample being windowed (HostSample.jobs)
        self._addr_ids: dict[str | tuple[str, str], int] = {}  # IPs and (IP, netdev) -> small ids
        #: This host's connected QPs per NIC port, (lqpns, rqpns), as of the last ``prepare``; None
        #: when that sample had no QP table (what the agent publishes for the other agents).
        self.qp_ends: dict[Endpoint, tuple[np.ndarray, np.ndarray]] | None = None

    # -- step 1 -----------------------------------------------------------------------------

    def prepare(self, sample: HostSample, peers: PeerDirectory) -> None:
        """Learn addresses and NCCL lines from ``sample``; add this host's QP ends to ``peers``."""
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
        for chunk in sample.nccl_chunks:
            self.nccl.feed(chunk.lines, chunk.path, chunk.first_line, chunk.history)
        self.qp_ends = None
        if sample.qps is None:
            return
        self.qp_ends = {}
        qps = QpColumns.from_records(sample.qps)
        a = sample_arrays(qps)
        rows = a.peer_rows()
        if not rows.any():
            return
        for i, key in enumerate(a.pairs):
            r = rows & (a.pair_of == i) if len(a.pairs) > 1 else rows
            if r.any():
                end = self._endpoint(*key)
                peers.add_many(end, a.lqpn[r], a.rqpn[r])
                self.qp_ends[end] = (a.lqpn[r], a.rqpn[r])

    def _endpoint(self, device: str, port: int) -> Endpoint:
        """This host's end on a port (cached until the port's address changes)."""
        end = self._ends.get((device, port))
        if end is None:
            s = self._src.get((device, port))
            if s is None:
                s = self._src[(device, port)] = self._address(PortView(device, port))
            end = self._ends[(device, port)] = Endpoint(self.host, device, port, s[0])
        return end

    def _address(self, pv: PortView) -> tuple[str, str, str]:
        """(source IP, netdev, leaf) of a port: GID table first, the topology as fallback."""
        nic: NicInfo | None = self.inventory.nic(self.host, pv.device, pv.port)
        gids = pv.gids or self._gids.get((pv.device, pv.port), [])
        ips = PortView(pv.device, pv.port, gids=gids).roce_v2_ips()
        if nic is not None and nic.ip in ips:
            ip = nic.ip
        elif ips:
            ip = ips[0]
        else:
            ip = nic.ip if nic is not None else ""
        netdev = PortView(pv.device, pv.port, gids=gids).netdev or (nic.netdev if nic is not None else "")
        return ip, netdev, nic.leaf if nic is not None else ""

    # -- step 2 -----------------------------------------------------------------------------

    def window(self, sample: HostSample, start_ns: int, end_ns: int, peers: PeerDirectory,
               received_ns: int = 0) -> tuple[list[pb.FlowBatch], WindowStats]:
        """Deltas since the previous sample as FlowBatches, one per leaf of this host.

        The first call returns no batches (baselines only). A host without topology entry gets
        one batch with an empty leaf. ``received_ns`` is the agent's wall clock when it read
        ``sample`` (ns since the epoch; 0: not stamped), the batches' ``received_ns``.
        (``window_encoded`` gives the same batches serialized, without building messages: what
        the agent sends.)
        """
        encoded, stats = self.window_encoded(sample, start_ns, end_ns, peers, received_ns)
        return [pb.FlowBatch.FromString(e.value) for e in encoded], stats

    def window_encoded(self, sample: HostSample, start_ns: int, end_ns: int, peers: PeerDirectory,
                       received_ns: int = 0) -> tuple[list[EncodedBatch], WindowStats]:
        """``window``, each batch as its serialized ``FlowBatch`` bytes."""
        stats = WindowStats()
        primed, self._primed = self._primed, True
        self._jobs = sample.jobs
        counters = None if sample.counters is None else per_qp_counter_columns(sample.counters)
        mtu = {k: roce_path_mtu(v) for k, v in self._netdev_mtu.items()}
        w = self.qps.update_columns(QpColumns.from_records(sample.qps or []), counters, sample.taken_ns, mtu)
        self._cache = self._cache.take(w.prev)
        if sample.qps is not None and self.nccl.knows_anything():
            self._retain_nccl()
        port_deltas = self.ports.update(_totals(sample.sysfs),
                                        None if sample.sysfs_before is None else _totals(sample.sysfs_before))
        error_bound = self._bounds(w, port_deltas, mtu)
        congestion = self.congestion.update({k: pv.hw_counters for k, pv in sample.sysfs.ports.items()}, sample.pfc,
                                            sample.taken_ns)
        malformed = sample.malformed + self.nccl.malformed - self._nccl_malformed
        self._nccl_malformed = self.nccl.malformed
        stats.malformed = malformed
        if not primed:
            self._carry_malformed += malformed  # reported with the first batch: nothing goes uncounted
            return [], stats
        malformed += self._carry_malformed
        self._carry_malformed = 0

        jobs, default_job = self._jobs, self.cfg.job_id
        profiles = self.collectives.take(self.host, lambda pid: jobs.get(pid) or default_job, start_ns, end_ns)
        batches: dict[str, _Batch] = {leaf: _Batch() for leaf in self.inventory.leaves(self.host)}
        src = self._src
        flows = self._flows(w, error_bound, peers, stats)
        for leaf, data in flows.items():
            batches.setdefault(leaf, _Batch()).flows = data
        for p in port_deltas:
            s = src.get((p.device, p.port)) or _NO_SRC
            batches.setdefault(s[2], _Batch()).ports.append(pb.PortTotals(
                rdma_device=p.device, port=p.port, netdev=s[1], tx_bytes=p.tx_bytes, rx_bytes=p.rx_bytes,
                tx_packets=p.tx_packets, rx_packets=p.rx_packets, congestion=congestion.get((p.device, p.port))))
        if not batches:
            batches[""] = _Batch()
        out = []
        for leaf in sorted(batches):
            b = batches[leaf]
            seq = self._seq.get(leaf, 0) + 1
            self._seq[leaf] = seq
            head = pb.FlowBatch(schema_version=SCHEMA_VERSION, host=self.host, leaf=leaf, window_start_ns=start_ns,
                                window_end_ns=end_ns, agent_id=self.cfg.agent_id, sequence=seq)
            # malformed_records and the collective profiles once per host and window, on the first leaf's batch
            tail = pb.FlowBatch(ports=b.ports, malformed_records=0 if out else malformed, received_ns=received_ns,
                                collectives=[] if out else profiles)
            out.append(EncodedBatch(leaf, self.host, seq, head.SerializeToString() + b.flows
                                    + tail.SerializeToString()))
        return out, stats

    def _bounds(self, w: QpWindow, port_deltas: list[PortDelta], mtu: dict[tuple[str, int], int]) -> np.ndarray:
        """Error bounds of the window's deltas: PSN estimates narrowed port by port from the
        ports' exact totals (``psn_bounds.psn_bounds``), 0 for exact ones."""
        eb = w.error_bound
        est = w.byte_source == PSN_ESTIMATE
        if not est.any():
            return eb
        pd = {(p.device, p.port): p for p in port_deltas}
        gid = w.qps.gid
        for g in np.unique(gid[est]).tolist():
            key = self.qps.port_keys[g]
            rows = gid == g
            p = pd.get(key)
            b = psn_bounds(w.tx_bytes[rows], w.tx_packets[rows], est[rows], mtu.get(key, self.cfg.default_mtu),
                           self.cfg.frame_overhead, None if p is None else p.tx_bytes_lower,
                           None if p is None else p.tx_packets_upper)
            if b.dtype == object and eb.dtype != object:
                eb = eb.astype(object)
            eb[rows & est] = b
        return eb

    def _flows(self, w: QpWindow, error_bound: np.ndarray, peers: PeerDirectory,
               stats: WindowStats) -> dict[str, bytes]:
        """The encoded ``flows`` field of each leaf's batch: one Flow per QP that moved data."""
        if len(self._addr_ids) + len(self._tag_ids) > _MAX_INTERNED:  # ids of long-gone jobs: start over
            self._addr_ids.clear()
            self._tag_ids.clear()
            self._cache.valid[:] = False
        moved = (w.tx_bytes != 0) | (w.rx_bytes != 0) | (w.tx_packets != 0) | (w.rx_packets != 0)
        every = bool(moved.all())
        act = np.flatnonzero(moved)
        n = len(act)
        if not n:
            return {}
        q = w.qps if every else w.qps.take(act)
        slot = w.slot if every else w.slot[act]
        src = w.byte_source if every else w.byte_source[act]
        stats.flows = n
        stats.exact = int((src == QP_COUNTER).sum())
        stats.estimated = n - stats.exact
        # per (device, port): source address, leaf and each QP's peer
        dst_id = np.full(n, -1, np.int64)
        addr = np.zeros(n, np.int64)
        leaf_of: dict[str, np.ndarray] = {}
        gids = np.unique(q.gid).tolist()
        for g in gids:
            key = self.qps.port_keys[g]
            rows = q.gid == g if len(gids) > 1 else np.ones(n, bool)
            s = self._src.get(key) or _NO_SRC
            end = self._endpoint(*key)
            dst_id[rows] = peers.peers(end, q.lqpn[rows], q.rqpn[rows])
            addr[rows] = intern_id(self._addr_ids, (s[0], s[1]))
            leaf_of[s[2]] = rows if s[2] not in leaf_of else leaf_of[s[2]] | rows
        used, inverse = np.unique(dst_id, return_inverse=True)  # intern only the peers these flows have
        used_ips = peers.ips_of(used)
        dst = np.array([intern_id(self._addr_ids, ip) for ip in used_ips], np.int64)[inverse]
        dst_ips = np.array(used_ips, dtype=object)[inverse]
        stats.unresolved_dst = int((dst_id < 0).sum())
        tags, tag_id = self._tags(q)
        # cached Flow bytes: valid while the generation's address, state, comm and NCCL tag stay
        c = self._cache
        cached = slot >= 0
        aligned = len(c) == n and is_range(slot, n)  # flow i is cache row i
        if len(c):
            cs = slot if aligned else np.where(cached, slot, 0)
            pick = (lambda a: a) if aligned else (lambda a: a[cs])
            ok = (pick(c.valid) & (pick(c.dst) == dst) & (pick(c.addr) == addr) & (pick(c.tag) == tag_id)
                  & (pick(c.state) == q.state) & (pick(c.comm) == q.comm))
            if not aligned:
                ok &= cached
        else:
            ok = np.zeros(n, bool)
        fresh: dict[int, FlowTemplate] = {}
        if not ok.all():
            fresh = self._templates(q, np.flatnonzero(~ok), slot, dst_ips, dst, addr, tags, tag_id)
        ghosts = [i for i in fresh if slot[i] < 0]
        spliced = self._collectives(tags, slot, fresh) if tags is not None else {}
        if aligned and not ghosts and not spliced:
            parts = c.parts  # every flow's bytes are in the cache, in order
        else:
            parts = c.parts.take(np.where(cached, slot, -1))
            parts.set(ghosts, [fresh[i].pre for i in ghosts], [fresh[i].suf for i in ghosts])
            parts.set(list(spliced), None, list(spliced.values()))
        columns = (w.tx_bytes, w.rx_bytes, w.tx_packets, w.rx_packets, w.byte_source, error_bound)
        values = np.stack(columns if every else [a[act] for a in columns], axis=1)
        if len(leaf_of) == 1:
            (leaf,) = leaf_of
            return {leaf: encode_flows(parts, values)}
        out = {}
        for leaf, rows in leaf_of.items():
            r = np.flatnonzero(rows)
            out[leaf] = encode_flows(parts.take(r), values[r])
        return out

    def _retain_nccl(self) -> None:
        """Let the NCCL log forget the tags of QPs gone from this sample's listing (a reused number
        must not inherit a stale tag)."""
        rows, keys = self.qps.rows, self.qps.port_keys
        lqpn = rows.lqpn.tolist()
        self.nccl.retain({(keys[g][0], n) for g, n in zip(rows.gid.tolist(), lqpn, strict=True)},
                         set(zip(rows.pid.tolist(), lqpn, strict=True)))

    def _tags(self, q: QpRows) -> tuple[list[QpTag | None] | None, np.ndarray]:
        """NCCL tag of each QP (None: the log says nothing about any) and an id per distinct tag."""
        n = len(q)
        if not self.nccl.knows_anything():
            return None, np.full(n, -1, np.int64)
        tag = self.nccl.tag
        keys = self.qps.port_keys
        tags = [tag(pid, keys[g][0], lqpn)
                for pid, g, lqpn in zip(q.pid.tolist(), q.gid.tolist(), q.lqpn.tolist(), strict=True)]
        ids = self._tag_ids
        out = [-1 if t is None else intern_id(ids, (t.comm.id, t.comm.rank, t.comm.nranks, t.channel, t.peer_rank))
               for t in tags]
        return tags, np.array(out, np.int64)

    def _templates(self, q: QpRows, rows: np.ndarray, slot: np.ndarray, dst_ip: np.ndarray, dst: np.ndarray,
                   addr: np.ndarray, tags: list[QpTag | None] | None, tag_id: np.ndarray) -> dict[int, FlowTemplate]:
        """Build the fixed Flow bytes of ``rows`` (new generations, or whose address, state, comm
        or NCCL tag changed); store them in the cache, and return them by row."""
        c = self._cache
        keys = self.qps.port_keys
        cfg = self.cfg
        out: dict[int, FlowTemplate] = {}
        store: list[int] = []
        cols = [a[rows].tolist() for a in (q.gid, q.lqpn, q.rqpn, q.pid, q.comm, q.qp_type, q.state, q.generation,
                                           dst_ip, slot)]
        for i, (g, lqpn, rqpn, pid, comm, qp_type, state, gen, d, sl) in zip(rows.tolist(), zip(*cols, strict=True),
                                                                            strict=True):
            device, port = keys[g]
            sip, netdev, _ = self._src.get((device, port)) or _NO_SRC
            tag = tags[i] if tags is not None else None
            tc = self.nccl.traffic_class(pid)
            job = self._jobs.get(pid) or cfg.job_id  # a pid's job does not change: the cached bytes stay right
            f = pb.Flow(rdma_device=device, port=port, netdev=netdev, lqpn=lqpn, rqpn=rqpn,
                        qp_type=_QP_TYPES.get(qp_type, pb.QP_TYPE_UNSPECIFIED),
                        qp_state=_QP_STATES.get(state, pb.QP_STATE_UNSPECIFIED), qp_generation=gen,
                        src_ip=sip, dst_ip=d, udp_src_port=rocev2_udp_sport(lqpn, rqpn),
                        udp_dst_port=ROCEV2_UDP_DPORT, dscp=(tc >> 2) if tc is not None else cfg.dscp,
                        pid=pid, comm=comm, job_id=job)
            if tag is not None:
                f.nccl.comm_id, f.nccl.rank, f.nccl.nranks = tag.comm.id, tag.comm.rank, tag.comm.nranks
                f.nccl.peer_rank, f.nccl.channel = tag.peer_rank, tag.channel
            full = f.SerializeToString()
            base = pb.Flow(pid=pid, comm=comm, job_id=job).SerializeToString()
            nccl = f.nccl.SerializeToString() if f.HasField("nccl") else None
            suf = base if nccl is None else base + NCCL_TAG + varint(len(nccl)) + nccl
            if not full.endswith(suf):  # protobuf writes fields in number order; checked, not assumed
                raise AssertionError("Flow serialization is not in field-number order")
            t = out[i] = FlowTemplate(full[:len(full) - len(suf)], suf, None if nccl is None else (base, nccl))
            if sl >= 0:
                store.append(i)
                c.valid[sl] = True
                c.dst[sl], c.addr[sl], c.tag[sl] = dst[i], addr[i], tag_id[i]
                c.state[sl], c.comm[sl], c.nccl[sl] = state, comm, t.nccl
        c.parts.set([int(slot[i]) for i in store], [out[i].pre for i in store], [out[i].suf for i in store])
        return out

    def _collectives(self, tags: list[QpTag | None], slot: np.ndarray,
                     fresh: dict[int, FlowTemplate]) -> dict[int, bytes]:
        """``suf`` of each flow whose communicator enqueued a collective: the last collective and
        its op count spliced into the NCCL tag."""
        c = self._cache
        done: dict[tuple[str, int], bytes] = {}
        out: dict[int, bytes] = {}
        for i, t in enumerate(tags):
            if t is None or not t.comm.collective:
                continue
            k = (t.comm.collective, t.comm.op_count)
            dyn = done.get(k)
            if dyn is None:
                dyn = done[k] = pb.NcclTag(collective=k[0], op_count=k[1]).SerializeToString()
            sl = int(slot[i])
            base, nccl = c.nccl[sl] if sl >= 0 else fresh[i].nccl
            body = nccl + dyn
            out[i] = base + NCCL_TAG + varint(len(body)) + body
        return out


@dataclass(slots=True)
class _Batch:
    flows: bytes = b""
    ports: list[pb.PortTotals] = field(default_factory=list)


def _totals(view: SysfsView) -> Totals:
    out: Totals = {}
    for key, pv in view.ports.items():
        t = (pv.tx_bytes, pv.rx_bytes, pv.tx_packets, pv.rx_packets)
        if None not in t:
            out[key] = t  # type: ignore[assignment]
    return out
