"""One host's agent state across windows: samples in, FlowBatch messages (one per leaf) out.

A round of the agent is two steps per host, so that peers can be matched across hosts:
``prepare(sample)`` (source addresses, NCCL lines, the host's QP ends for the peer directory),
then ``window(sample, start_ns, end_ns, peers)``. Each Flow is the transmit direction of one QP
from this host: ``src_ip`` is the local NIC, ``udp_src_port`` the port upstream Linux derives from
(lqpn, rqpn) with flow label 0 (``schemas.roce``), bytes are window deltas.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowtracer.schemas.roce import ROCEV2_UDP_DPORT, rocev2_udp_sport
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import flows_pb2 as pb

from .inventory import Inventory, NicInfo
from .nccl_log import NcclLog, QpTag
from .peers import Endpoint, PeerDirectory
from .qp_windows import FLOW_QP_TYPES, PortDelta, PortTracker, QpDelta, QpTracker, Totals, psn_error_bounds
from .rdma_json import QpCounter, QpRecord, per_qp_counters
from .sysfs import Gid, PortView, SysfsView, roce_path_mtu

_QP_TYPES = {"RC": pb.QP_TYPE_RC, "UC": pb.QP_TYPE_UC, "UD": pb.QP_TYPE_UD, "XRC_INI": pb.QP_TYPE_XRC,
             "XRC_TGT": pb.QP_TYPE_XRC, "RAW_PACKET": pb.QP_TYPE_RAW}
_QP_STATES = {"RESET": pb.QP_STATE_RESET, "INIT": pb.QP_STATE_INIT, "RTR": pb.QP_STATE_RTR,
              "RTS": pb.QP_STATE_RTS, "SQD": pb.QP_STATE_SQD, "SQE": pb.QP_STATE_SQE, "ERR": pb.QP_STATE_ERR}


@dataclass(slots=True)
class HostSample:
    """What a source read from one host at one instant.

    ``qps`` is None when the QP view is unavailable (sysfs-only mode); ``counters`` None when
    ``rdma statistic qp`` is unavailable. ``malformed`` counts input records skipped while reading.
    """

    host: str
    taken_ns: int
    qps: list[QpRecord] | None
    counters: list[QpCounter] | None
    sysfs: SysfsView
    nccl_lines: list[str] = field(default_factory=list)
    malformed: int = 0
    #: Port counters read just before the QP snapshot (``sysfs`` is read just after); None when
    #: both come from one instant (the simulator's snapshots).
    sysfs_before: SysfsView | None = None


@dataclass(slots=True)
class WindowStats:
    """Counts of one host window, for the agent's self-metrics."""

    flows: int = 0
    exact: int = 0
    estimated: int = 0
    unresolved_dst: int = 0
    malformed: int = 0


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Per-host knobs (see ``config.AgentConfig`` for their documentation)."""

    agent_id: str
    default_mtu: int = 4096
    frame_overhead: int = 62
    initial_psn: int | None = None
    dscp: int = 0
    job_id: str = ""


class HostPipeline:
    """State of one host across windows: QP generations, port baselines, NCCL knowledge, sequences."""

    def __init__(self, host: str, inventory: Inventory, cfg: PipelineConfig) -> None:
        self.host = host
        self.inventory = inventory
        self.cfg = cfg
        self.qps = QpTracker(default_mtu=cfg.default_mtu, frame_overhead=cfg.frame_overhead,
                             initial_psn=cfg.initial_psn)
        self.ports = PortTracker()
        self.nccl = NcclLog()
        self._gids: dict[tuple[str, int], list[Gid]] = {}
        self._netdev_mtu: dict[tuple[str, int], int] = {}
        self._src: dict[tuple[str, int], tuple[str, str, str]] = {}  # (device, port) -> (ip, netdev, leaf)
        self._ends: dict[tuple[str, int], Endpoint] = {}
        self._seq: dict[str, int] = {}
        self._nccl_malformed = 0
        self._carry_malformed = 0
        self._primed = False

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
        if sample.qps is None:
            return
        ends = self._ends
        add = peers.add
        for r in sample.qps:
            if r.rqpn is not None and r.rqpn != r.lqpn and r.qp_type in FLOW_QP_TYPES:
                end = ends.get((r.device, r.port))
                if end is None:
                    end = ends[(r.device, r.port)] = self._endpoint(r.device, r.port)
                add(end, r.lqpn, r.rqpn)

    def _endpoint(self, device: str, port: int) -> Endpoint:
        s = self._src.get((device, port))
        if s is None:
            s = self._src[(device, port)] = self._address(PortView(device, port))
        return Endpoint(self.host, device, port, s[0])

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

    def window(self, sample: HostSample, start_ns: int, end_ns: int,
               peers: PeerDirectory) -> tuple[list[pb.FlowBatch], WindowStats]:
        """Deltas since the previous sample as FlowBatches, one per leaf of this host.

        The first call returns no batches (baselines only). A host without topology entry gets
        one batch with an empty leaf.
        """
        stats = WindowStats()
        primed, self._primed = self._primed, True
        counters = None if sample.counters is None else per_qp_counters(sample.counters)
        mtu = {k: roce_path_mtu(v) for k, v in self._netdev_mtu.items()}
        deltas = self.qps.update(sample.qps or [], counters, sample.taken_ns, mtu)
        port_deltas = self.ports.update(_totals(sample.sysfs),
                                        None if sample.sysfs_before is None else _totals(sample.sysfs_before))
        self._bound(deltas, port_deltas, mtu)
        malformed = sample.malformed + self.nccl.malformed - self._nccl_malformed
        self._nccl_malformed = self.nccl.malformed
        stats.malformed = malformed
        if not primed:
            self._carry_malformed += malformed  # reported with the first batch: nothing goes uncounted
            return [], stats
        malformed += self._carry_malformed
        self._carry_malformed = 0

        leaves = self.inventory.leaves(self.host)
        batches: dict[str, pb.FlowBatch] = {}
        for leaf in leaves:
            batches[leaf] = self._batch(leaf, start_ns, end_ns)
        src = self._src
        for d in deltas:
            if not (d.tx_bytes or d.rx_bytes or d.tx_packets or d.rx_packets):
                continue
            st = d.qp
            s = src.get((st.device, st.port)) or ("", "", "")
            b = batches.get(s[2])
            if b is None:
                b = batches[s[2]] = self._batch(s[2], start_ns, end_ns)
            if not self._add_flow(b, d, s, peers):
                stats.unresolved_dst += 1
            stats.flows += 1
            if d.byte_source == pb.BYTE_SOURCE_QP_COUNTER:
                stats.exact += 1
            else:
                stats.estimated += 1
        for p in port_deltas:
            s = src.get((p.device, p.port)) or ("", "", "")
            b = batches.get(s[2])
            if b is None:
                b = batches[s[2]] = self._batch(s[2], start_ns, end_ns)
            b.ports.add(rdma_device=p.device, port=p.port, netdev=s[1], tx_bytes=p.tx_bytes,
                        rx_bytes=p.rx_bytes, tx_packets=p.tx_packets, rx_packets=p.rx_packets)
        if not batches:
            batches[""] = self._batch("", start_ns, end_ns)
        out = [batches[k] for k in sorted(batches)]
        out[0].malformed_records = malformed  # once per host and window, on the first leaf's batch
        for b in out:
            seq = self._seq.get(b.leaf, 0) + 1
            self._seq[b.leaf] = seq
            b.sequence = seq
        return out, stats

    def _bound(self, deltas: list[QpDelta], port_deltas: list[PortDelta], mtu: dict[tuple[str, int], int]) -> None:
        """Error bounds of PSN estimates, port by port, from the ports' exact totals."""
        by_port: dict[tuple[str, int], list[QpDelta]] = {}
        for d in deltas:
            by_port.setdefault((d.qp.device, d.qp.port), []).append(d)
        pd = {(p.device, p.port): p for p in port_deltas}
        for key, ds in by_port.items():
            p = pd.get(key)
            psn_error_bounds(ds, mtu.get(key, self.cfg.default_mtu), self.cfg.frame_overhead,
                             None if p is None else p.tx_bytes_lower, None if p is None else p.tx_packets_upper)

    def _batch(self, leaf: str, start_ns: int, end_ns: int) -> pb.FlowBatch:
        return pb.FlowBatch(schema_version=SCHEMA_VERSION, host=self.host, leaf=leaf, window_start_ns=start_ns,
                            window_end_ns=end_ns, agent_id=self.cfg.agent_id)

    def _add_flow(self, batch: pb.FlowBatch, d: QpDelta, s: tuple[str, str, str], peers: PeerDirectory) -> bool:
        """Append the Flow of one QP delta; False when its destination could not be resolved."""
        st = d.qp
        end = self._ends.get((st.device, st.port)) or self._endpoint(st.device, st.port)
        peer = peers.peer(end, st.lqpn, st.rqpn)
        dst = peer.ip if peer is not None else ""
        tag = self.nccl.tag(st.pid, st.device, st.lqpn)
        key = (dst, s[0], s[1], st.state, st.comm, None if tag is None else (tag.comm.id, tag.comm.rank,
                                                                              tag.comm.nranks, tag.channel,
                                                                              tag.peer_rank))
        cache = st.cache
        if cache is None or cache[0] != key:
            cache = st.cache = (key, self._template(d, s, dst, tag))
        f = batch.flows.add()
        f.MergeFrom(cache[1])
        f.tx_bytes, f.rx_bytes, f.tx_packets, f.rx_packets = d.tx_bytes, d.rx_bytes, d.tx_packets, d.rx_packets
        f.byte_source = d.byte_source
        if d.error_bound:
            f.byte_error_bound = d.error_bound
        if tag is not None and tag.comm.collective:
            f.nccl.collective, f.nccl.op_count = tag.comm.collective, tag.comm.op_count
        return bool(dst)

    def _template(self, d: QpDelta, s: tuple[str, str, str], dst: str, tag: QpTag | None) -> pb.Flow:
        """The parts of a QP's Flow that do not change from window to window."""
        st = d.qp
        tc = self.nccl.traffic_class(st.pid)
        f = pb.Flow(rdma_device=st.device, port=st.port, netdev=s[1], lqpn=st.lqpn, rqpn=st.rqpn,
                    qp_type=_QP_TYPES.get(st.qp_type, pb.QP_TYPE_UNSPECIFIED),
                    qp_state=_QP_STATES.get(st.state, pb.QP_STATE_UNSPECIFIED), qp_generation=st.generation,
                    src_ip=s[0], dst_ip=dst, udp_src_port=rocev2_udp_sport(st.lqpn, st.rqpn),
                    udp_dst_port=ROCEV2_UDP_DPORT, dscp=(tc >> 2) if tc is not None else self.cfg.dscp,
                    pid=st.pid, comm=st.comm, job_id=self.cfg.job_id)
        if tag is not None:
            f.nccl.comm_id, f.nccl.rank, f.nccl.nranks = tag.comm.id, tag.comm.rank, tag.comm.nranks
            f.nccl.peer_rank, f.nccl.channel = tag.peer_rank, tag.channel
        return f


def _totals(view: SysfsView) -> Totals:
    out: Totals = {}
    for key, pv in view.ports.items():
        t = (pv.tx_bytes, pv.rx_bytes, pv.tx_packets, pv.rx_packets)
        if None not in t:
            out[key] = t  # type: ignore[assignment]
    return out
