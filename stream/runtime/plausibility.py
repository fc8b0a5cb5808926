"""What the topology and physics allow of an input record (pure): anything else is a ``BadRecord`` naming the field.

A record whose numbers no NIC or link could produce (a flow of 2^63 bytes, a counter delta beyond the port's speed
times its interval, a collective call larger than any GPU's memory) would otherwise flow into sums and encoders and
crash the worker on every replay. Each bound is a physical one with a margin (``MARGIN``), loose enough that no
honest source reaches it: docs/operations.md, Bounds, lists them with the tests that exceed them.
"""

from __future__ import annotations

import math
from collections import defaultdict

from google.protobuf.message import Message

from flowtracer.schemas.bounds import INT32_MAX, MAX_CALL_BYTES, MAX_NRANKS, MAX_PROFILES
from flowtracer.schemas.fabric import Fabric
from flowtracer.schemas.v1 import common_pb2, counters_pb2, flows_pb2, traces_pb2
from flowtracer.stream.runtime.inputs import BadRecord

MARGIN = 2.0
"""Bytes and packets a source may report beyond its speed times its interval (clock jitter between the two reads
of a delta, PSN estimates, headers the NIC counts apart)."""
MIN_FRAME_BYTES = 64
"""The smallest Ethernet frame: packets in an interval are at most its bytes over this."""
MAX_WINDOW_NS = 600_000_000_000
"""The longest agent window or counter interval accepted (10 min; agents and collectors sample every second)."""
MAX_FLOWS_PER_BATCH = 1 << 16
"""Flows (QPs) in one FlowBatch: 65,536, far above the QPs a host's NICs hold for training."""
MAX_RANK_BYTES_PER_S = 1 << 46
"""Bytes one rank's calls can move per second (70 TB/s, about 9x the fastest HBM): calls x call_bytes bound."""
MAX_DATATYPE_BYTES = 16
MAX_TRACE_HOPS = 64
"""Hops of a path trace: the TTL field allows 255, a Clos fabric has a handful."""
MAX_QUEUE_BYTES = 1 << 36
"""A queue's watermark (64 GiB: switch buffers are at most a few hundred MB)."""


def check(msg: Message, fabric: Fabric, nic_speed_bps: int) -> None:
    """Raise BadRecord if ``msg`` (a decoded input record) is not what the topology and physics allow.
    ``nic_speed_bps``: the speed assumed for a NIC the topology does not list (the fastest it lists)."""
    if isinstance(msg, flows_pb2.FlowBatch):
        check_flow_batch(msg, fabric, nic_speed_bps)
    elif isinstance(msg, counters_pb2.CounterBatch):
        check_counter_batch(msg, fabric)
    elif isinstance(msg, counters_pb2.CongestionBatch):
        check_congestion_batch(msg, fabric)
    elif isinstance(msg, traces_pb2.PathTrace):
        check_trace(msg, fabric)


def fastest_nic_bps(fabric: Fabric) -> int:
    """The fastest NIC (or, with no hosts, link) of the topology, bit/s."""
    return max((n.nic.speed for n in fabric.nics.values()), default=0) or \
        max((lk.speed_bps for lk in fabric.links.values()), default=400_000_000_000)


def byte_bound(speed_bps: float, interval_ns: int) -> int:
    """Most bytes a port of ``speed_bps`` can move in ``interval_ns``, with ``MARGIN``."""
    return math.ceil(speed_bps / 8 * interval_ns / 1e9 * MARGIN)


def packet_bound(speed_bps: float, interval_ns: int) -> int:
    """Most packets a port of ``speed_bps`` can move in ``interval_ns`` (minimum-size frames), with ``MARGIN``."""
    return byte_bound(speed_bps, interval_ns) // MIN_FRAME_BYTES + 1


def _interval(what: str, where: str, interval_ns: int) -> None:
    if not 0 < interval_ns <= MAX_WINDOW_NS:
        raise BadRecord(f"{what}: {where} = {interval_ns} ns is not an interval (0, {MAX_WINDOW_NS} ns]")


def _at_most(what: str, where: str, value: int, limit: int, why: str) -> None:
    if value > limit:
        raise BadRecord(f"{what}: {where} = {value} exceeds {limit} ({why})")


def _counters(what: str, where: str, msg: Message, speed_bps: float, interval_ns: int) -> None:
    """Every ``Counter`` field of ``msg``: deltas of octets within the byte bound, of anything else within the
    packet bound."""
    for fd, value in msg.ListFields():
        if fd.message_type is not None and fd.message_type.full_name == common_pb2.Counter.DESCRIPTOR.full_name:
            octets = "octets" in fd.name  # in_octets, octets_forwarded, dropped_octets, ...
            limit = byte_bound(speed_bps, interval_ns) if octets else packet_bound(speed_bps, interval_ns)
            _at_most(what, f"{where}.{fd.name}.delta", value.delta, limit,
                     f"{'bytes' if octets else 'packets'} a {speed_bps / 1e9:g} Gbit/s port can carry in "
                     f"{interval_ns / 1e9:g} s, x{MARGIN:g}")


def _port_speed(fabric: Fabric, switch: str, port: str, reported_bps: int) -> float:
    out = fabric.out_links.get(switch, ())
    known = next((lk.speed_bps for lk in out if lk.src_port == port), 0)
    return known or reported_bps or max((lk.speed_bps for lk in out), default=0) or fastest_nic_bps(fabric)


def _switch(what: str, fabric: Fabric, switch: str) -> None:
    if switch not in fabric.switch_names:
        raise BadRecord(f"{what}: switch {switch!r} is not in the topology")


def check_counter_batch(msg: counters_pb2.CounterBatch, fabric: Fabric) -> None:
    """A switch the topology knows; every delta within its port's speed times its interval."""
    what = f"CounterBatch from switch {msg.switch}"
    _switch(what, fabric, msg.switch)
    for i, itf in enumerate(msg.interfaces):
        where = f"interfaces[{i}] ({itf.name})"
        if itf.interval_ns:
            _interval(what, f"{where}.interval_ns", itf.interval_ns)
        speed = _port_speed(fabric, msg.switch, itf.name, itf.speed_bps)
        _counters(what, where, itf, speed, itf.interval_ns or MAX_WINDOW_NS)
    fastest = max((lk.speed_bps for lk in fabric.out_links.get(msg.switch, ())), default=0) or fastest_nic_bps(fabric)
    for i, nh in enumerate(msg.next_hops):
        if nh.interval_ns:
            _interval(what, f"next_hops[{i}].interval_ns", nh.interval_ns)
        _counters(what, f"next_hops[{i}]", nh, fastest, nh.interval_ns or MAX_WINDOW_NS)


def check_congestion_batch(msg: counters_pb2.CongestionBatch, fabric: Fabric) -> None:
    """A switch the topology knows; queue and PFC counters within their port's speed times the interval."""
    what = f"CongestionBatch from switch {msg.switch}"
    _switch(what, fabric, msg.switch)
    for name, items in (("queues", msg.queues), ("pfc", msg.pfc)):
        for i, item in enumerate(items):
            where = f"{name}[{i}] ({item.interface})"
            if item.interval_ns:
                _interval(what, f"{where}.interval_ns", item.interval_ns)
            _counters(what, where, item, _port_speed(fabric, msg.switch, item.interface, 0),
                      item.interval_ns or MAX_WINDOW_NS)
    for i, q in enumerate(msg.queues):
        _at_most(what, f"queues[{i}] ({q.interface}).max_queue_len_bytes", q.max_queue_len_bytes, MAX_QUEUE_BYTES,
                 "no switch has that much buffer")


def check_flow_batch(msg: flows_pb2.FlowBatch, fabric: Fabric, nic_speed_bps: int) -> None:
    """A host and leaf the topology knows, cabled together; a sane window; every flow from one of the host's own
    addresses (when the topology knows the address), its bytes and packets (and their sum per NIC) within the
    NIC's speed times the window; collective profiles within what a GPU can hold."""
    what = f"FlowBatch from host {msg.host} (leaf {msg.leaf})"
    if msg.leaf not in fabric.switch_names:
        raise BadRecord(f"{what}: leaf {msg.leaf!r} is not in the topology")
    speeds = {n.nic.rdma_device: n.nic.speed for n in fabric.nics.values() if n.host == msg.host}
    if not speeds:
        raise BadRecord(f"{what}: host {msg.host!r} is not in the topology")
    if not any(n.host == msg.host and n.leaf == msg.leaf for n in fabric.nics.values()):
        raise BadRecord(f"{what}: no NIC of host {msg.host!r} is cabled to leaf {msg.leaf!r}")
    window = msg.window_end_ns - msg.window_start_ns
    _interval(what, "window_end_ns - window_start_ns", window)
    _at_most(what, "len(flows)", len(msg.flows), MAX_FLOWS_PER_BATCH, "QPs one host can hold")
    _at_most(what, "len(collectives)", len(msg.collectives), MAX_PROFILES, "profiles per batch")
    sent: dict[str, int] = defaultdict(int)
    for i, f in enumerate(msg.flows):
        speed = speeds.get(f.rdma_device) or max(speeds.values()) or nic_speed_bps
        nic = f"NIC {msg.host}:{f.rdma_device} ({speed / 1e9:g} Gbit/s)"
        why = f"what {nic} can move in the {window / 1e9:g} s window, x{MARGIN:g}"
        for name, limit in (("tx_bytes", byte_bound(speed, window)), ("rx_bytes", byte_bound(speed, window)),
                            ("byte_error_bound", byte_bound(speed, window)),
                            ("tx_packets", packet_bound(speed, window)), ("rx_packets", packet_bound(speed, window))):
            _at_most(what, f"flows[{i}].{name}", getattr(f, name), limit, why)
        owner = fabric.nic_by_ip.get(f.src_ip) if f.src_ip else None
        if owner is not None and owner.host != msg.host:
            raise BadRecord(f"{what}: flows[{i}].src_ip {f.src_ip} is {owner.name}'s address, not a NIC of host "
                            f"{msg.host}: a host's flows leave from its own NICs")
        sent[f.rdma_device] += f.tx_bytes
        speed_limit = byte_bound(speed, window)
        _at_most(what, f"flows[..{i}].tx_bytes summed on {f.rdma_device}", sent[f.rdma_device], speed_limit,
                 f"all QPs share the NIC: {why}")
    for i, port in enumerate(msg.ports):
        speed = speeds.get(port.rdma_device) or max(speeds.values())
        where = f"ports[{i}] ({port.rdma_device})"
        for name in ("tx_bytes", "rx_bytes"):
            _at_most(what, f"{where}.{name}", getattr(port, name), byte_bound(speed, window), "the NIC's speed")
        for name in ("tx_packets", "rx_packets"):
            _at_most(what, f"{where}.{name}", getattr(port, name), packet_bound(speed, window), "the NIC's speed")
        if port.HasField("congestion"):
            c = port.congestion
            interval = c.interval_ns or window
            _interval(what, f"{where}.congestion.interval_ns", interval)
            _counters(what, f"{where}.congestion", c, speed, interval)
            for j, pfc in enumerate(c.pfc):
                _counters(what, f"{where}.congestion.pfc[{j}]", pfc, speed, interval)
    for i, p in enumerate(msg.collectives):
        check_collective(what, f"collectives[{i}]", p, window)


def check_collective(what: str, where: str, p: flows_pb2.CollectiveProfile, window_ns: int) -> None:
    """One collective profile of a batch whose window is ``window_ns``."""
    _at_most(what, f"{where}.call_bytes", p.call_bytes, MAX_CALL_BYTES, "one call's buffers fit one GPU's memory")
    _at_most(what, f"{where}.count", p.count, MAX_CALL_BYTES, "elements of one call")
    _at_most(what, f"{where}.datatype_bytes", p.datatype_bytes, MAX_DATATYPE_BYTES, "the widest NCCL datatype")
    _at_most(what, f"{where}.calls x call_bytes", p.calls * p.call_bytes,
             math.ceil(MAX_RANK_BYTES_PER_S * max(window_ns, 1_000_000_000) / 1e9),
             "what one rank can move in the window")
    _at_most(what, f"{where}.calls", p.calls, max(window_ns, 1_000_000_000) // 100, "one call per 100 ns")
    _at_most(what, f"{where}.timed_calls", p.timed_calls, max(window_ns, 1_000_000_000) // 100 * 1024,
             "one call per 100 ns per local rank")
    if not 0 <= p.nranks <= MAX_NRANKS:
        raise BadRecord(f"{what}: {where}.nranks = {p.nranks} is outside [0, {MAX_NRANKS}]")
    for name, ranks in (("ranks", p.ranks), ("peers", p.peers)):
        bad = next((r for r in ranks if not 0 <= r < max(p.nranks, 1) or r > INT32_MAX), None)
        if bad is not None:
            raise BadRecord(f"{what}: {where}.{name} holds {bad}, not a rank of a {p.nranks}-rank communicator")
    for name in ("timed_ns", "first_call_ns", "last_call_ns"):
        if getattr(p, name) < 0:
            raise BadRecord(f"{what}: {where}.{name} = {getattr(p, name)} is negative")
    for name in ("algo_bw_bytes_per_s", "bus_bw_bytes_per_s"):
        v = getattr(p, name)
        if not (math.isfinite(v) and 0 <= v <= MAX_RANK_BYTES_PER_S * 4):
            raise BadRecord(f"{what}: {where}.{name} = {v} is not a bandwidth a rank can reach")


def check_trace(msg: traces_pb2.PathTrace, fabric: Fabric) -> None:
    """A source NIC the topology knows, of the host named; a sane number of hops."""
    what = f"PathTrace of flow {msg.flow_id!r} from {msg.src_nic}"
    nic = fabric.nics.get(msg.src_nic)
    if nic is None:
        raise BadRecord(f"{what}: src_nic {msg.src_nic!r} is not in the topology")
    if msg.host and msg.host != nic.host:
        raise BadRecord(f"{what}: host {msg.host!r} is not the host of src_nic {msg.src_nic!r}")
    _at_most(what, "len(hops)", len(msg.hops), MAX_TRACE_HOPS, "hops a fabric path can have")
    for i, hop in enumerate(msg.hops):
        _at_most(what, f"hops[{i}].ttl", hop.ttl, 255, "an IP TTL")
        if hop.rtt_ns < 0:
            raise BadRecord(f"{what}: hops[{i}].rtt_ns = {hop.rtt_ns} is negative")
