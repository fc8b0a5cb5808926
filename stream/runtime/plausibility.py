"""What the topology and physics allow of an input record (pure): anything else is a ``BadRecord`` naming the field.

A record whose numbers no NIC or link could produce (a flow of 2^63 bytes, a counter delta beyond the port's speed
times its interval, a collective call larger than any GPU's memory) would otherwise flow into sums and encoders and
crash the worker on every replay. Each bound is a physical one with a margin (``MARGIN``), loose enough that no
honest source reaches it: docs/operations.md, Bounds, lists them with the tests that exceed them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import cache, lru_cache
from operator import attrgetter
from typing import Any

from google.protobuf.message import Message

from flowtracer.fabric.routing import Fabric
from flowtracer.schemas.bounds import INT32_MAX, INT64_MAX, MAX_CALL_BYTES, MAX_NRANKS, MAX_PROFILES
from flowtracer.schemas.v1 import common_pb2, counters_pb2, flows_pb2, traces_pb2
from flowtracer.stream.runtime.inputs import BadRecord

MARGIN = 2.0
"""Bytes and packets a source may report beyond its speed times its interval (clock jitter between the two reads
of a delta, PSN estimates, headers the NIC counts apart)."""
MIN_FRAME_BYTES = 64
"""The smallest Ethernet frame: packets in an interval are at most its bytes over this."""
UNSET_INTERVAL_NS = 600_000_000_000
"""The interval a counter without one is bounded over (10 min). Long intervals are accepted: an agent's window after
it stopped, or a switch's first delta after an outage, spans the gap, its bound with it (every bound is at most
2^63 - 1, InfluxDB's integer, so no interval can let a value through that an encoder refuses)."""
MAX_FLOWS_PER_BATCH = 1 << 16
"""Flows (QPs) in one FlowBatch: 65,536, far above the QPs a host's NICs hold for training."""
MAX_ITEMS_PER_BATCH = 1 << 16
"""Interfaces, next hops, queues or PFC entries in one switch batch, ports in one FlowBatch (a switch has at most a
few hundred ports)."""
MAX_RANK_BYTES_PER_S = 1 << 46
"""Bytes one rank's calls can move per second (70 TB/s, about 9x the fastest HBM): calls x call_bytes bound."""
MAX_DATATYPE_BYTES = 16
"""The widest NCCL datatype's element (bytes; 8 today)."""
MAX_TRACE_HOPS = 64
"""Hops of a path trace: the TTL field allows 255, a Clos fabric has a handful."""
MAX_QUEUE_BYTES = 1 << 36
"""A queue's watermark (64 GiB: switch buffers are at most a few hundred MB)."""
_COUNTER = common_pb2.Counter.DESCRIPTOR.full_name
_FLOW_FIELDS = attrgetter("tx_bytes", "rx_bytes", "byte_error_bound", "tx_packets", "rx_packets", "src_ip")


@cache
def _reader(descriptor: object, lead: tuple[str, ...] = ()) -> tuple[attrgetter[tuple[Any, ...]], int, int]:
    """For a message type: a getter of the fields ``lead`` then the deltas of its ``Counter`` fields, octets first,
    in one C call (the fast path; ``_counters`` names the field when one is over), with where octets start and
    end in what it returns."""
    names = [fd.name for fd in descriptor.fields  # type: ignore[attr-defined]
             if fd.message_type is not None and fd.message_type.full_name == _COUNTER]
    octets = [f"{n}.delta" for n in names if "octets" in n]  # in_octets, octets_forwarded, dropped_octets, ...
    other = [f"{n}.delta" for n in names if "octets" not in n]
    # "__class__" last: a getter of one field would return a bare value, not a tuple
    return attrgetter(*lead, *octets, *other, "__class__"), len(lead), len(lead) + len(octets)


def _over(values: tuple[Any, ...], at: int, other_at: int, nbytes: int, npackets: int) -> bool:
    """Whether a delta read by a ``_reader`` getter (``values``: octets in [at, other_at), the others up to the
    last) is over its bound."""
    return bool((other_at > at and max(values[at:other_at]) > nbytes)
                or (len(values) - 1 > other_at and max(values[other_at:-1]) > npackets))


def _item_over(item: Message, nbytes: int, npackets: int) -> bool:
    """Whether any ``Counter`` delta of ``item`` is over its bound."""
    read, at, other_at = _reader(item.DESCRIPTOR)
    return _over(read(item), at, other_at, nbytes, npackets)


@lru_cache(maxsize=1024)  # bounded: intervals come from the inputs
def _bounds(speed_bps: int, interval_ns: int) -> tuple[int, int]:
    """(bytes, packets) a port of ``speed_bps`` can move in ``interval_ns``, with ``MARGIN``."""
    return byte_bound(speed_bps, interval_ns), packet_bound(speed_bps, interval_ns)


class Plausibility:
    """The checks, with what they need of the topology worked out once (a FlowBatch is checked in time linear in
    its own size, not the fabric's)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.switches = fabric.switch_names
        #: host -> RDMA device -> NIC speed (bit/s), and the leaves the host's NICs are cabled to
        self.nic_speeds: dict[str, dict[str, int]] = defaultdict(dict)
        self.host_leaves: dict[str, set[str]] = defaultdict(set)
        for n in fabric.nics.values():
            self.nic_speeds[n.host][n.nic.rdma_device] = n.nic.speed
            self.host_leaves[n.host].add(n.leaf)
        self.nic_speeds, self.host_leaves = dict(self.nic_speeds), dict(self.host_leaves)
        self.fastest_nic_bps = max((n.nic.speed for n in fabric.nics.values()), default=0) or \
            max((lk.speed_bps for lk in fabric.links.values()), default=400_000_000_000)
        #: (switch, port) -> the speed of the link it transmits on; switch -> its fastest link
        self.port_speed = {(lk.src_node, lk.src_port): lk.speed_bps for lk in fabric.links.values()}
        self.switch_fastest = {sw: max((lk.speed_bps for lk in out), default=0) or self.fastest_nic_bps
                               for sw, out in fabric.out_links.items()}
        self.owner_of_ip = {ip: (ref.host, ref.name) for ip, ref in fabric.nic_by_ip.items()}

    def check(self, msg: Message) -> None:
        """Raise BadRecord if ``msg`` (a decoded input record) is not what the topology and physics allow."""
        if isinstance(msg, flows_pb2.FlowBatch):
            self.flow_batch(msg)
        elif isinstance(msg, counters_pb2.CounterBatch):
            self.counter_batch(msg)
        elif isinstance(msg, counters_pb2.CongestionBatch):
            self.congestion_batch(msg)
        elif isinstance(msg, traces_pb2.PathTrace):
            self.trace(msg)

    def _switch(self, what: str, switch: str) -> None:
        if switch not in self.switches:
            raise BadRecord(f"{what}: switch {switch!r} is not in the topology")

    def _port(self, switch: str, port: str, reported_bps: int) -> int:
        return self.port_speed.get((switch, port)) or reported_bps or self.switch_fastest[switch]

    def counter_batch(self, msg: counters_pb2.CounterBatch) -> None:
        """A switch the topology knows; every delta within its port's speed times its interval."""
        what = f"CounterBatch from switch {msg.switch}"
        self._switch(what, msg.switch)
        _at_most(what, "len(interfaces)", len(msg.interfaces), MAX_ITEMS_PER_BATCH, "ports a switch can have")
        _at_most(what, "len(next_hops)", len(msg.next_hops), MAX_ITEMS_PER_BATCH, "next hops a switch can have")
        port_speed, fastest, sw = self.port_speed, self.switch_fastest[msg.switch], msg.switch
        read, at, other_at = _reader(counters_pb2.InterfaceCounters.DESCRIPTOR, ("name", "interval_ns", "speed_bps"))
        for i, itf in enumerate(msg.interfaces):
            v = read(itf)
            interval = v[1] or UNSET_INTERVAL_NS
            speed = port_speed.get((sw, v[0])) or v[2] or fastest
            if interval <= 0 or _over(v, at, other_at, *_bounds(speed, interval)):
                where = f"interfaces[{i}] ({itf.name})"
                _interval(what, f"{where}.interval_ns", interval)
                _counters(what, where, itf, speed, interval)
        for i, nh in enumerate(msg.next_hops):
            interval = nh.interval_ns or UNSET_INTERVAL_NS
            if interval <= 0 or _item_over(nh, *_bounds(fastest, interval)):
                _interval(what, f"next_hops[{i}].interval_ns", interval)
                _counters(what, f"next_hops[{i}]", nh, fastest, interval)

    def congestion_batch(self, msg: counters_pb2.CongestionBatch) -> None:
        """A switch the topology knows; queue and PFC counters within their port's speed times the interval."""
        what = f"CongestionBatch from switch {msg.switch}"
        self._switch(what, msg.switch)
        _at_most(what, "len(queues)", len(msg.queues), MAX_ITEMS_PER_BATCH, "queues a switch can have")
        _at_most(what, "len(pfc)", len(msg.pfc), MAX_ITEMS_PER_BATCH, "PFC entries a switch can have")
        for name, items in (("queues", msg.queues), ("pfc", msg.pfc)):
            for i, item in enumerate(items):
                interval = item.interval_ns or UNSET_INTERVAL_NS
                speed = self._port(msg.switch, item.interface, 0)
                if interval <= 0 or _item_over(item, *_bounds(speed, interval)):
                    where = f"{name}[{i}] ({item.interface})"
                    _interval(what, f"{where}.interval_ns", interval)
                    _counters(what, where, item, speed, interval)
        for i, q in enumerate(msg.queues):
            _at_most(what, f"queues[{i}] ({q.interface}).max_queue_len_bytes", q.max_queue_len_bytes,
                     MAX_QUEUE_BYTES, "no switch has that much buffer")

    def flow_batch(self, msg: flows_pb2.FlowBatch) -> None:
        """A host and leaf the topology knows, cabled together; a sane window; every flow from one of the host's
        own addresses (when the topology knows the address), its bytes and packets (and their sum per NIC) within
        the NIC's speed times the window; collective profiles within what a GPU can hold."""
        what = f"FlowBatch from host {msg.host} (leaf {msg.leaf})"
        host = msg.host
        if msg.leaf not in self.switches:
            raise BadRecord(f"{what}: leaf {msg.leaf!r} is not in the topology")
        speeds = self.nic_speeds.get(host)
        if not speeds:
            raise BadRecord(f"{what}: host {host!r} is not in the topology")
        if msg.leaf not in self.host_leaves[host]:
            raise BadRecord(f"{what}: no NIC of host {host!r} is cabled to leaf {msg.leaf!r}")
        window = msg.window_end_ns - msg.window_start_ns
        _interval(what, "window_end_ns - window_start_ns", window)
        _at_most(what, "len(flows)", len(msg.flows), MAX_FLOWS_PER_BATCH, "QPs one host can hold")
        _at_most(what, "len(collectives)", len(msg.collectives), MAX_PROFILES, "profiles per batch")
        _at_most(what, "len(ports)", len(msg.ports), MAX_ITEMS_PER_BATCH, "RDMA ports a host can have")
        fastest = max(speeds.values())
        flows = msg.flows
        if flows:
            # Fast path (C-level reads, one pass per field): every value and the batch's total within the tightest
            # NIC's bound, and every source address the host's own. The slow path below names what is not.
            nbytes, npackets = _bounds(min(speeds.values()), window)
            tx, rx, err, txp, rxp, src = zip(*map(_FLOW_FIELDS, flows), strict=True)  # one read per flow: 2x faster
            if (max(tx) > nbytes or max(rx) > nbytes or max(err) > nbytes or max(txp) > npackets
                    or max(rxp) > npackets or sum(tx) > nbytes
                    or any(self.owner_of_ip.get(ip, (host,))[0] != host for ip in set(src))):
                self._flows(what, msg, speeds, fastest, window)
        for i, port in enumerate(msg.ports):
            speed = speeds.get(port.rdma_device, fastest)
            where = f"ports[{i}] ({port.rdma_device})"
            nbytes, npackets = _bounds(speed, window)
            if (port.tx_bytes > nbytes or port.rx_bytes > nbytes or port.tx_packets > npackets
                    or port.rx_packets > npackets):  # the fast path; the checks below name the field
                for name in ("tx_bytes", "rx_bytes"):
                    _at_most(what, f"{where}.{name}", getattr(port, name), nbytes, "the NIC's speed")
                for name in ("tx_packets", "rx_packets"):
                    _at_most(what, f"{where}.{name}", getattr(port, name), npackets, "the NIC's speed")
            if port.HasField("congestion"):
                c = port.congestion
                interval = c.interval_ns or window
                _interval(what, f"{where}.congestion.interval_ns", interval)
                bounds = _bounds(speed, interval)
                if _item_over(c, *bounds):
                    _counters(what, f"{where}.congestion", c, speed, interval)
                for j, pfc in enumerate(c.pfc):
                    if _item_over(pfc, *bounds):
                        _counters(what, f"{where}.congestion.pfc[{j}]", pfc, speed, interval)
        for i, p in enumerate(msg.collectives):
            check_collective(what, f"collectives[{i}]", p, window)

    def _flows(self, what: str, msg: flows_pb2.FlowBatch, speeds: dict[str, int], fastest: int, window: int
               ) -> None:
        """The slow path of ``flow_batch``: flow by flow, each against its own NIC, naming the first that is not
        plausible (a batch over the fast path's tightest bound may still be fine: NICs of other speeds, several
        NICs sharing the total)."""
        host = msg.host
        limits: dict[str, tuple[int, int]] = {dev: _bounds(v, window) for dev, v in speeds.items()}
        sent: dict[str, int] = defaultdict(int)
        owner_of_ip = self.owner_of_ip
        for i, f in enumerate(msg.flows):
            device = f.rdma_device
            lim = limits.get(device)
            if lim is None:  # a device the topology does not list: its host's fastest NIC
                lim = limits[device] = _bounds(fastest, window)
            nbytes, npackets = lim
            sent[device] += f.tx_bytes
            if (f.tx_bytes > nbytes or f.rx_bytes > nbytes or f.byte_error_bound > nbytes or f.tx_packets > npackets
                    or f.rx_packets > npackets or sent[device] > nbytes):
                speed = speeds.get(device, fastest)
                why = f"what NIC {host}:{device} ({speed / 1e9:g} Gbit/s) can move in the {window / 1e9:g} s window, " \
                      f"x{MARGIN:g}"
                for name, limit in (("tx_bytes", nbytes), ("rx_bytes", nbytes), ("byte_error_bound", nbytes),
                                    ("tx_packets", npackets), ("rx_packets", npackets)):
                    _at_most(what, f"flows[{i}].{name}", getattr(f, name), limit, why)
                _at_most(what, f"flows[..{i}].tx_bytes summed on {device}", sent[device], nbytes,
                         f"all QPs share the NIC: {why}")
            owner = owner_of_ip.get(f.src_ip)
            if owner is not None and owner[0] != host:
                raise BadRecord(f"{what}: flows[{i}].src_ip {f.src_ip} is {owner[1]}'s address, not a NIC of host "
                                f"{host}: a host's flows leave from its own NICs")

    def trace(self, msg: traces_pb2.PathTrace) -> None:
        """A source NIC the topology knows, of the host named; a sane number of hops."""
        what = f"PathTrace of flow {msg.flow_id!r} from {msg.src_nic}"
        nic = self.fabric.nics.get(msg.src_nic)
        if nic is None:
            raise BadRecord(f"{what}: src_nic {msg.src_nic!r} is not in the topology")
        if msg.host and msg.host != nic.host:
            raise BadRecord(f"{what}: host {msg.host!r} is not the host of src_nic {msg.src_nic!r}")
        _at_most(what, "len(hops)", len(msg.hops), MAX_TRACE_HOPS, "hops a fabric path can have")
        for i, hop in enumerate(msg.hops):
            _at_most(what, f"hops[{i}].ttl", hop.ttl, 255, "an IP TTL")
            if hop.rtt_ns < 0:
                raise BadRecord(f"{what}: hops[{i}].rtt_ns = {hop.rtt_ns} is negative")


def byte_bound(speed_bps: float, interval_ns: int) -> int:
    """Most bytes a port of ``speed_bps`` can move in ``interval_ns``, with ``MARGIN`` (at most 2^63 - 1)."""
    return min(math.ceil(speed_bps / 8 * interval_ns / 1e9 * MARGIN), INT64_MAX)


def packet_bound(speed_bps: float, interval_ns: int) -> int:
    """Most packets a port of ``speed_bps`` can move in ``interval_ns`` (minimum-size frames), with ``MARGIN``."""
    return byte_bound(speed_bps, interval_ns) // MIN_FRAME_BYTES + 1


def _interval(what: str, where: str, interval_ns: int) -> None:
    if interval_ns <= 0:
        raise BadRecord(f"{what}: {where} = {interval_ns} ns is not an interval (must be > 0)")


def _at_most(what: str, where: str, value: int, limit: int, why: str) -> None:
    if value > limit:
        raise BadRecord(f"{what}: {where} = {value} exceeds {limit} ({why})")


def _counters(what: str, where: str, msg: Message, speed_bps: float, interval_ns: int) -> None:
    """Every ``Counter`` field of ``msg``: deltas of octets within the byte bound, of anything else within the
    packet bound."""
    nbytes, npackets = byte_bound(speed_bps, interval_ns), packet_bound(speed_bps, interval_ns)
    for fd, value in msg.ListFields():
        if fd.message_type is not None and fd.message_type.full_name == _COUNTER:
            octets = "octets" in fd.name  # in_octets, octets_forwarded, dropped_octets, ...
            if value.delta > (nbytes if octets else npackets):
                _at_most(what, f"{where}.{fd.name}.delta", value.delta, nbytes if octets else npackets,
                         f"{'bytes' if octets else 'packets'} a {speed_bps / 1e9:g} Gbit/s port can carry in "
                         f"{interval_ns / 1e9:g} s, x{MARGIN:g}")


def check_collective(what: str, where: str, p: flows_pb2.CollectiveProfile, window_ns: int) -> None:
    """One collective profile of a batch whose window is ``window_ns``."""
    _at_most(what, f"{where}.call_bytes", p.call_bytes, MAX_CALL_BYTES, "one call's buffers fit one GPU's memory")
    _at_most(what, f"{where}.count", p.count, MAX_CALL_BYTES, "elements of one call")
    _at_most(what, f"{where}.datatype_bytes", p.datatype_bytes, MAX_DATATYPE_BYTES, "the widest NCCL datatype")
    seconds = max(window_ns, 1_000_000_000) / 1e9
    _at_most(what, f"{where}.calls x call_bytes", p.calls * p.call_bytes,
             min(math.ceil(MAX_RANK_BYTES_PER_S * seconds), INT64_MAX), "what one rank can move in the window")
    _at_most(what, f"{where}.calls", p.calls, min(math.ceil(seconds * 1e7), INT64_MAX), "one call per 100 ns")
    _at_most(what, f"{where}.timed_calls", p.timed_calls, min(math.ceil(seconds * 1e7) * 1024, INT64_MAX),
             "one call per 100 ns per local rank")
    _at_most(what, f"{where}.timed_ns", p.timed_ns, INT64_MAX, "a duration in ns")
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
