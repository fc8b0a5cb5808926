"""Benchmark: stream-processor records/s per worker against the rate of merely decoding the same batches.

Scenario: a generated rail-optimized fabric (default 256 hosts x 8 NICs on 8 rails, 64 leaves, 16
spines: 2,048 NICs, 80 switches). Every NIC keeps ``--qps`` RC QPs to random NICs of its rail on other
hosts; per 1 s window the host agents' FlowBatches (one per host and leaf: 2,048 of ``--qps`` flows
each, with NCCL tags) and the collectors' CounterBatches (one per switch: every port's ten counters
with exact deltas that equal the bytes the fabric's ECMP hash puts on each link, plus the leaves'
uplink next hops) are built once, serialized, and fed to one worker's ``Processor`` in this process,
exactly as ``stream/app.py`` feeds it from Kafka: ``accept`` (decode, check, buffer) for every input
record, ``finalize``, every output serialized for Kafka, the line protocol for the store, and the
internal attribution and group-FIM records fed back through ``accept`` (Kafka round trip left out).
The worker owns all ``--partitions`` partitions, so it does the whole fabric's work.

Reported (per window, median over the measured windows, after ``--warmup`` windows):

* ``decode``: ``ParseFromString`` of the same input batches into fresh messages: the library limit;
* ``worker``: everything above; ``ratio`` = worker records/s / decode records/s;
* the rates in input batches/s, flow records/s and counter records/s (one interface's counters);
* the worker's time split: accept, finalize (stages), serialize (Kafka values), lines (store);
* ``realtime_share``: worker seconds per 1 s window (below 1: one worker keeps up with this fabric).

``--congestion`` adds the congestion counters as the collectors and agents send them with the counters on: per
switch a CongestionBatch (every port's 8 egress queues x 6 openconfig-qos counters + watermark, 8 PFC priorities x
2), and per NIC the port's NicCongestion (8 mlx5 hw_counters, 8 PFC priorities x 4) in its FlowBatch; the queue 3
of about 1 in 20 switch links marks ECN (their flows' receivers send CNPs), so the worker also writes
LinkCongestion, NicCongestionSample, harm and CongestionCause records. Both modes carry the ports' byte totals, as
the agent sends them. The decode limit decodes the same inputs, so ``ratio`` says what the counters cost.

    .venv/bin/python bench/bench_processor.py                 # ~40 s on 2 cores
    .venv/bin/python bench/bench_processor.py --hosts 64 --leaves 16 --spines 8 --windows 5
    .venv/bin/python bench/bench_processor.py --congestion    # the congestion counters on
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.roce import ROCE_PRIORITY, rocev2_udp_sport
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.v1 import common_pb2, counters_pb2, flows_pb2
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.runtime.app import Processor
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.heap import settle_heap
from flowtracer.stream.runtime.worker import emitted_lines
from flowtracer.stream.stages.emitted import Emitted

S = 1_000_000_000
T0 = 1_800_000_000 * S
QUEUES = 8
"""Egress queues and PFC priorities per port with the congestion counters on."""
MARKED_SHARE = 20
"""With the counters on, one link in this many marks ECN on its RoCE queue each window."""
COUNTER_NAMES = ("in_octets", "out_octets", "in_pkts", "out_pkts", "in_unicast_pkts", "out_unicast_pkts",
                 "in_discards", "out_discards", "in_errors", "out_errors")


@dataclass
class Qp:
    src_nic: str
    dst_nic: str
    host: str
    leaf: str
    device: str
    src_ip: str
    dst_ip: str
    lqpn: int
    rqpn: int
    path: tuple[str, ...]


@dataclass
class Window:
    """One window's serialized input records: (topic, key, value)."""

    end_ns: int
    records: list[tuple[str, str, bytes]] = field(default_factory=list)
    flows: int = 0
    interfaces: int = 0


def build_qps(fabric: Fabric, qps: int, rng: random.Random) -> list[Qp]:
    by_rail: dict[int, list[Any]] = defaultdict(list)
    for ref in fabric.nics.values():
        by_rail[ref.nic.rail].append(ref)
    out = []
    for s in fabric.nics.values():
        peers = [d for d in by_rail[s.nic.rail] if d.host != s.host]
        for _ in range(qps):
            d = rng.choice(peers)
            lqpn, rqpn = rng.randrange(0x100, 1 << 24), rng.randrange(0x100, 1 << 24)
            sport = rocev2_udp_sport(lqpn, rqpn)
            path = fabric.hash_path(HeaderFields(str(s.nic.ip), str(d.nic.ip), sport, 4791, dst_qpn=rqpn),
                                    s.name, d.name)
            assert path is not None
            out.append(Qp(s.name, d.name, s.host, s.leaf, s.nic.rdma_device, str(s.nic.ip), str(d.nic.ip),
                          lqpn, rqpn, path))
    return out


def _counter(delta: int, total: int) -> common_pb2.Counter:
    return common_pb2.Counter(value=total, delta=delta, status=common_pb2.DELTA_STATUS_OK)


def _nic_congestion(k: int, marked: int) -> flows_pb2.NicCongestion:
    """A NIC port's congestion counters of window k: ``marked`` ECN-marked packets received, a CNP per 2."""
    def c(delta: int) -> common_pb2.Counter:
        return _counter(delta, k * delta)
    cnps = marked // 2
    return flows_pb2.NicCongestion(
        interval_ns=S, np_ecn_marked_roce_packets=c(marked), np_cnp_sent=c(cnps), rp_cnp_handled=c(cnps),
        rp_cnp_ignored=c(0), out_of_sequence=c(0), packet_seq_err=c(0), local_ack_timeout_err=c(0),
        implied_nak_seq_err=c(0),
        pfc=[flows_pb2.NicPfc(priority=p, rx_pause=c(0), tx_pause=c(0), rx_pause_duration_us=c(0),
                              tx_pause_duration_us=c(0)) for p in range(QUEUES)])


def _switch_congestion(sw: str, ports: dict[str, dict[str, int]], marks: dict[str, int], k: int,
                       end: int) -> counters_pb2.CongestionBatch:
    """A switch's CongestionBatch of window k: every port's queues and PFC priorities, ECN marks where given."""
    def c(delta: int) -> common_pb2.Counter:
        return _counter(delta, k * delta)
    batch = counters_pb2.CongestionBatch(schema_version=1, switch=sw, timestamp_ns=end, collector_id="bench",
                                         sequence=k, received_ns=end + 5_000_000, session=1)
    for name, cs in sorted(ports.items()):
        octets = cs.get("out_octets", 0)
        for q in range(QUEUES):
            roce = q == ROCE_PRIORITY
            m = marks.get(name, 0) if roce else 0
            tx = octets if roce else 0
            batch.queues.add(interface=name, queue=str(q), interval_ns=S, transmit_pkts=c(tx // 4158),
                             transmit_octets=c(tx), dropped_pkts=c(0), dropped_octets=c(0),
                             ecn_marked_pkts=c(m), ecn_marked_octets=c(m * 4158),
                             max_queue_len_bytes=200_000 if m else 0, has_max_queue_len=True)
        for prio in range(QUEUES):
            batch.pfc.add(interface=name, priority=prio, interval_ns=S, pause_frames_rx=c(0), pause_frames_tx=c(0))
    return batch


def build_window(fabric: Fabric, qps: list[Qp], k: int, rng: random.Random, congestion: bool = False,
                 t0: int = T0) -> Window:
    """Serialized FlowBatches and CounterBatches of window k (ends at ``t0`` + k s, ns); with ``congestion``, also
    the switches' CongestionBatches and the NICs' congestion counters."""
    end = t0 + k * S
    w = Window(end)
    link_bytes: dict[str, int] = defaultdict(int)
    per_batch: dict[tuple[str, str], list[flows_pb2.Flow]] = defaultdict(list)
    marked = {lid for lid in sorted(fabric.links) if rng.randrange(MARKED_SHARE) == 0} if congestion else set()
    link_marks: dict[str, int] = defaultdict(int)
    nic_marks: dict[str, int] = defaultdict(int)
    nic_bytes: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tx, rx bytes, tx, rx packets
    for q in qps:
        pkts = rng.randrange(10_000, 2_000_000)
        b = pkts * 4158
        for lid in q.path:
            link_bytes[lid] += b
        hit = [lid for lid in q.path if lid in marked]
        for lid in hit:
            link_marks[lid] += pkts // 1000
        nic_marks[q.dst_nic] += len(hit) * (pkts // 1000)
        nic_bytes[q.src_nic][0] += b
        nic_bytes[q.src_nic][2] += pkts
        nic_bytes[q.dst_nic][1] += b
        nic_bytes[q.dst_nic][3] += pkts
        per_batch[(q.host, q.leaf)].append(flows_pb2.Flow(
            rdma_device=q.device, port=1, netdev="eth0", lqpn=q.lqpn, rqpn=q.rqpn, qp_type=flows_pb2.QP_TYPE_RC,
            qp_state=flows_pb2.QP_STATE_RTS, qp_generation=t0, src_ip=q.src_ip, dst_ip=q.dst_ip,
            udp_src_port=rocev2_udp_sport(q.lqpn, q.rqpn), udp_dst_port=4791, tx_bytes=b, tx_packets=pkts,
            byte_source=flows_pb2.BYTE_SOURCE_QP_COUNTER, pid=4242, comm="python3", job_id="184467",
            nccl=flows_pb2.NcclTag(comm_id="0x7ce42c8218072e8c", rank=1, nranks=8, peer_rank=2, channel=0,
                                   collective="AllReduce", op_count=k)))
    nics_of: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for ref in fabric.nics.values():
        nics_of[(ref.host, ref.leaf)].append(ref)
    for (host, leaf), flows in sorted(per_batch.items()):
        batch = flows_pb2.FlowBatch(schema_version=1, host=host, leaf=leaf, window_start_ns=end - S,
                                    window_end_ns=end, agent_id="bench", sequence=k, flows=flows)
        for ref in sorted(nics_of[(host, leaf)], key=lambda r: r.name):
            tx, rx, txp, rxp = nic_bytes[ref.name]
            port = batch.ports.add(rdma_device=ref.nic.rdma_device, port=1, netdev="eth0", tx_bytes=tx, rx_bytes=rx,
                                   tx_packets=txp, rx_packets=rxp)
            if congestion:
                port.congestion.CopyFrom(_nic_congestion(k, nic_marks[ref.name]))
        w.records.append((topics.FLOWS.name, leaf, batch.SerializeToString()))
        w.flows += len(flows)
    for sw in sorted(fabric.switch_names):
        batch = counters_pb2.CounterBatch(schema_version=1, switch=sw, timestamp_ns=end, collector_id="bench",
                                          sequence=k, received_ns=end + 5_000_000, session=1)
        ports: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for lk in fabric.links.values():
            if lk.src_node == sw:
                ports[lk.src_port]["out_octets"] += link_bytes.get(lk.id, 0)
                ports[lk.src_port]["speed"] = lk.speed_bps
            if lk.dst_node == sw:
                ports[lk.dst_port]["in_octets"] += link_bytes.get(lk.id, 0)
        for name, c in sorted(ports.items()):
            itf = batch.interfaces.add(name=name, oper_status=counters_pb2.OPER_STATUS_UP, speed_bps=c["speed"],
                                       interval_ns=S, last_clear_ns=t0 - 3600 * S)
            for cname in COUNTER_NAMES:
                octets = c.get("in_octets" if cname.startswith("in") else "out_octets", 0)
                delta = octets if cname.endswith("octets") else octets // 4158 if "pkts" in cname else 0
                getattr(itf, cname).CopyFrom(_counter(delta, k * delta))
        for i, lk in enumerate(lk for lk in fabric.out_links.get(sw, []) if not lk.host_link):
            b = link_bytes.get(lk.id, 0)
            batch.next_hops.add(group="1", index=i + 1, egress_interface=lk.src_port, next_hop_ip=f"10.255.{i}.1",
                                weight=1, interval_ns=S, octets_forwarded=_counter(b, k * b),
                                packets_forwarded=_counter(b // 4158, k * b // 4158))
        w.records.append((topics.COUNTERS.name, sw, batch.SerializeToString()))
        w.interfaces += len(batch.interfaces)
        if congestion:
            marks = {lk.src_port: link_marks[lk.id] for lk in fabric.out_links.get(sw, []) if lk.id in link_marks}
            w.records.append((topics.SWITCH_CONGESTION.name, sw,
                              _switch_congestion(sw, ports, marks, k, end).SerializeToString()))
    return w


DECODE = {topics.COUNTERS.name: counters_pb2.CounterBatch, topics.FLOWS.name: flows_pb2.FlowBatch,
          topics.SWITCH_CONGESTION.name: counters_pb2.CongestionBatch}


def decode_seconds(w: Window) -> float:
    """ParseFromString of every input record of the window into a fresh message (the library limit)."""
    started = time.process_time()
    for topic, _, value in w.records:
        DECODE[topic]().ParseFromString(value)
    return time.process_time() - started


@dataclass
class Split:
    accept: float = 0.0
    finalize: float = 0.0
    serialize: float = 0.0
    lines: float = 0.0
    windows: int = 0
    outputs: int = 0
    causes: int = 0

    @property
    def total(self) -> float:
        return self.accept + self.finalize + self.serialize + self.lines


def run_window(proc: Processor, w: Window, now_ns: int, partitions: int) -> Split:
    """Feed one window through the worker as the Faust app does (without Kafka I/O)."""
    sp = Split()
    t = time.process_time()
    for topic, key, value in w.records:
        proc.accept(topic, partition_for(key, partitions), value, None, now_ns)
    sp.accept += time.process_time() - t
    while True:
        t = time.process_time()
        e: Emitted = proc.finalize(now_ns)
        sp.finalize += time.process_time() - t
        if not e.windows:
            break
        sp.windows += e.windows
        t = time.process_time()
        values = [m.SerializeToString() for m in (*e.link_loads, *e.path_loads, *e.fims, *e.collisions,
                                                   *e.link_congestion, *e.nic_congestion, *e.ecmp_drift,
                                                   *e.congestion_causes)]
        internal = [(dest, ab.SerializeToString()) for dest, ab in e.attributions]
        groups = [gb.SerializeToString() for gb in e.group_fims]
        proc.states_to_save()
        sp.serialize += time.process_time() - t
        sp.outputs += len(values) + len(internal) + len(groups)
        sp.causes += len(e.congestion_causes)
        t = time.process_time()
        emitted_lines(e)
        sp.lines += time.process_time() - t
        t = time.process_time()
        for dest, value in internal:
            proc.accept(topics.ATTRIBUTIONS.name, dest, value, None, now_ns)
        for value in groups:
            proc.accept(topics.GROUP_FIM.name, 0, value, None, now_ns)
        sp.accept += time.process_time() - t
    return sp


def bench(spec: FabricSpec, qps: int, windows: int, warmup: int, partitions: int, seed: int,
          congestion: bool = False) -> dict[str, Any]:
    rng = random.Random(seed)
    started = time.process_time()
    fabric = Fabric(generate(spec))
    flows = build_qps(fabric, qps, rng)
    data = [build_window(fabric, flows, k + 1, rng, congestion) for k in range(warmup + windows)]
    setup_s = time.process_time() - started
    with tempfile.TemporaryDirectory() as tmp:
        topo = Path(tmp) / "fabric.yaml"
        topo.write_text(fabric.topology.to_yaml())
        cfg = ProcessorConfig(topology=topo, kafka="127.0.0.1:9", partitions=partitions, data_dir=Path(tmp))
        proc = Processor(cfg, fabric, RESOLVERS["hash"])
        settle_heap()  # as the worker does before records flow (stream/runtime/heap.py)
        # Window 1 has no history: its stages release it after the grace; later ones complete at once.
        now = T0 + S + cfg.grace_ns + S // 10
        splits = []
        for k, w in enumerate(data):
            splits.append(run_window(proc, w, now + k * S, partitions))
    measured = splits[warmup:]
    dec = [decode_seconds(w) for w in data[warmup:]]
    fin = {s: proc.metrics.registry.get_sample_value("flowtracer_processor_windows_total", {"stage": s})
           for s in ("flows", "links", "fabric")}
    w0 = data[-1]
    per_window_s = statistics.median(s.total for s in measured)
    decode_s = statistics.median(dec)
    records = len(w0.records)
    return {
        "fabric": {"hosts": spec.hosts, "nics": len(fabric.nics), "leaves": spec.leaves, "spines": spec.spines,
                   "switches": len(fabric.switch_names), "links": len(fabric.links), "groups": len(fabric.ecmp_groups)},
        "per_window": {"batches": records, "flows": w0.flows, "interfaces": w0.interfaces,
                       "input_mib": round(sum(len(v) for _, _, v in w0.records) / 2**20, 2),
                       "outputs": measured[-1].outputs, "congestion_causes": measured[-1].causes},
        "partitions": partitions, "windows": windows, "setup_s": round(setup_s, 1), "congestion": congestion,
        "windows_finalized": fin,
        "decode": {"s_per_window": round(decode_s, 4), "batches_per_s": round(records / decode_s),
                   "flows_per_s": round(w0.flows / decode_s), "counters_per_s": round(w0.interfaces / decode_s)},
        "worker": {"s_per_window": round(per_window_s, 4), "batches_per_s": round(records / per_window_s),
                   "flows_per_s": round(w0.flows / per_window_s),
                   "counters_per_s": round(w0.interfaces / per_window_s),
                   "split_s": {k: round(statistics.median(getattr(s, k) for s in measured), 4)
                               for k in ("accept", "finalize", "serialize", "lines")}},
        "ratio": round(decode_s / per_window_s, 4),
        "realtime_share": round(per_window_s / (S / 1e9), 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--nics-per-host", type=int, default=8)
    ap.add_argument("--rails", type=int, default=8)
    ap.add_argument("--leaves", type=int, default=64)
    ap.add_argument("--spines", type=int, default=16)
    ap.add_argument("--qps", type=int, default=4, help="QPs per NIC")
    ap.add_argument("--windows", type=int, default=6, help="measured windows")
    ap.add_argument("--warmup", type=int, default=2, help="windows before measuring (caches, history)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--congestion", action="store_true", help="switch and NIC congestion counters on")
    a = ap.parse_args()
    spec = FabricSpec(hosts=a.hosts, nics_per_host=a.nics_per_host, rails=a.rails, leaves=a.leaves, spines=a.spines,
                      name="bench-processor")
    print(json.dumps(bench(spec, a.qps, a.windows, a.warmup, a.partitions, a.seed, a.congestion), indent=1))


if __name__ == "__main__":
    main()
