"""The QP ends host agents exchange (``QpEnds``, topic ``flowtracer.qp-ends.v1``): encode, validate, keep.

A lone agent on a real host sees only its own QPs, so it cannot tell where an RC connection goes:
``rdma res show qp`` names the remote QP number, not the remote address. Every agent therefore
publishes its hosts' connected QPs (``encode``, when they change and every ``refresh``) and keeps
the latest table of every other host (``RemoteEnds``), from which it builds the ``remote``
``PeerDirectory`` its flows' ``dst_ip`` lookups fall back to. Pure: no Kafka here
(``peer_exchange`` moves the bytes).

What a table is worth: it is the host's QPs as of ``time_ns``, so a connection made after its
publisher's last window boundary is unknown until the next one; a table older than ``max_age``
(its agent stopped) is dropped, because QP numbers are reused.

What a table may say: its ports' ``ip`` must be IP addresses, and, with the topology's addresses, the named
host's own (the address of that RDMA device): a record naming another host's or a made-up address would
otherwise become flows' ``dst_ip`` and probe destinations. Its ``time_ns`` is clamped to the agent's clock plus
``max_ahead_ns``: a table stamped in the future would otherwise win over every real one until it expired.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
from google.protobuf.message import DecodeError

from flowtracer.collectors.agent.peers.matching import Endpoint, PeerDirectory
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import peers_pb2 as pb

log = logging.getLogger(__name__)

Ends = Mapping[Endpoint, tuple[np.ndarray, np.ndarray]]
"""A host's connected QPs per NIC port: (lqpns, rqpns), equal length."""

_MAX_QPN = 1 << 24  # QP numbers are 24 bits on the wire (BTH DestQP)
MAX_AHEAD_NS = 10_000_000_000
"""How far (ns) a QP table's time may be ahead of the agent's clock; beyond, it is clamped (``RemoteEnds``)."""


class BadQpEnds(ValueError):
    """A QpEnds record that cannot be used; ``str()`` says what is wrong with it."""


def _published(ends: Ends) -> list[tuple[Endpoint, np.ndarray, np.ndarray]]:
    """The ports a table carries, in (device, port) order, each QP list in lqpn order. A port
    without an address (no RoCEv2 GID, not in the topology) is left out: no flow can name it as
    its destination."""
    out = []
    for end in sorted((e for e in ends if e.ip), key=lambda e: (e.device, e.port)):
        lq, rq = (np.asarray(a, np.int64) for a in ends[end])
        order = np.argsort(lq, kind="stable")
        out.append((end, lq[order], rq[order]))
    return out


def digest(ends: Ends) -> bytes:
    """A fingerprint of the table (equal = the same table, whatever the time); cheap enough for
    every window, where the table itself is encoded only when it is sent."""
    h = hashlib.blake2b(digest_size=16)
    for end, lq, rq in _published(ends):
        h.update(f"{end.device}\0{end.port}\0{end.ip}\0{len(lq)}\0".encode())
        h.update(lq.tobytes())
        h.update(rq.tobytes())
    return h.digest()


def encode(host: str, time_ns: int, agent_id: str, ends: Ends) -> tuple[bytes, bytes]:
    """(digest, value): the table's ``digest`` and the serialized ``QpEnds`` of ``host``."""
    msg = pb.QpEnds(schema_version=SCHEMA_VERSION, host=host, time_ns=time_ns, agent_id=agent_id)
    for end, lq, rq in _published(ends):
        msg.ports.add(rdma_device=end.device, port=end.port, ip=end.ip, lqpn=lq.tolist(), rqpn=rq.tolist())
    return digest(ends), msg.SerializeToString()


@dataclass(frozen=True, slots=True)
class HostEnds:
    """One host's latest table, as decoded from the wire."""

    host: str
    time_ns: int
    ends: dict[Endpoint, tuple[np.ndarray, np.ndarray]]


def decode(value: bytes) -> HostEnds:
    """Parse and check one ``QpEnds`` record; ``BadQpEnds`` names what is wrong."""
    try:
        msg = pb.QpEnds.FromString(value)
    except DecodeError as e:
        raise BadQpEnds(f"not a QpEnds message ({e})") from None
    if msg.schema_version != SCHEMA_VERSION:
        raise BadQpEnds(f"schema_version {msg.schema_version}, expected {SCHEMA_VERSION}")
    if not msg.host:
        raise BadQpEnds("host is empty")
    ends: dict[Endpoint, tuple[np.ndarray, np.ndarray]] = {}
    for i, p in enumerate(msg.ports):
        where = f"host {msg.host!r} ports[{i}] ({p.rdma_device}/{p.port})"
        if len(p.lqpn) != len(p.rqpn):
            raise BadQpEnds(f"{where}: {len(p.lqpn)} lqpn but {len(p.rqpn)} rqpn")
        if not p.ip:
            raise BadQpEnds(f"{where}: ip is empty")
        try:
            ip = str(ipaddress.ip_address(p.ip))  # one spelling per address, as the topology's
        except ValueError:
            raise BadQpEnds(f"{where}: ip {p.ip[:64]!r} is not an IP address") from None
        lq = np.array(p.lqpn, np.int64)
        rq = np.array(p.rqpn, np.int64)
        if len(lq) and max(int(lq.max()), int(rq.max())) >= _MAX_QPN:
            raise BadQpEnds(f"{where}: a QP number is not 24 bits")
        ends[Endpoint(msg.host, p.rdma_device, p.port, ip)] = (lq, rq)
    if msg.time_ns <= 0:
        raise BadQpEnds(f"host {msg.host!r}: time_ns {msg.time_ns} is not a time")
    return HostEnds(msg.host, msg.time_ns, ends)


class RemoteEnds:
    """The latest QP table of every other host, and the ``PeerDirectory`` built from them.

    ``offer`` is called from the consumer thread, ``directory`` from the agent's: a lock guards
    the tables, and the directory is rebuilt only when a table changed or expired.

    Args:
        local_hosts: hosts this agent reads itself (their own tables are fresher than any record).
        known_hosts: when not empty, only these hosts' tables are kept (the topology's inventory):
            a stray publisher cannot grow this agent's memory.
        max_age_ns: a table older than this (by its publisher's clock) is dropped.
        addresses: the topology's address of each host's RDMA devices (host -> device -> IP); when given, only
            its hosts' tables are kept (as ``known_hosts``), a table is skipped (as malformed) if a port names
            another address than its device's, and ports of devices it does not list are left out.
        max_ahead_ns: a table's ``time_ns`` is clamped to the agent's clock (the latest ``directory`` call)
            plus this, so one stamped in the future cannot pin its host's table.
    """

    def __init__(self, local_hosts: Collection[str], known_hosts: Collection[str] = (),
                 max_age_ns: int = 90_000_000_000, addresses: Mapping[str, Mapping[str, str]] | None = None,
                 max_ahead_ns: int = MAX_AHEAD_NS) -> None:
        self.local_hosts = frozenset(local_hosts)
        self.addresses = {h: {d: str(ipaddress.ip_address(ip)) for d, ip in devs.items()}
                          for h, devs in (addresses or {}).items()}
        self.known_hosts = frozenset(known_hosts) | frozenset(self.addresses)
        self.max_age_ns = max_age_ns
        self.max_ahead_ns = max_ahead_ns
        self._clock_ns: int | None = None  # the agent's clock at the latest ``directory``; None before the first
        self.malformed = 0
        self.ignored = 0  # records of local or unknown hosts
        self.unknown_ports = 0  # ports of RDMA devices the topology does not list, left out of tables
        self._tables: dict[str, HostEnds] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.version = 0  # +1 whenever a table changed what this agent knows
        self._dirty = False
        self._directory: PeerDirectory | None = None

    def offer(self, value: bytes) -> bool:
        """Take one record off the topic; True when it changed what this agent knows."""
        try:
            he = decode(value)
        except BadQpEnds as e:
            self.malformed += 1
            if self.malformed <= 20:  # a broken publisher repeats itself every window
                log.warning("skipping a QpEnds record: %s", e)
            return False
        if he.host in self.local_hosts or (self.known_hosts and he.host not in self.known_hosts):
            self.ignored += 1
            return False
        wrong = self._foreign_address(he)
        if wrong:
            self.malformed += 1
            if self.malformed <= 20:
                log.warning("skipping a QpEnds record: %s", wrong)
            return False
        with self._lock:
            he = self._clamped(he)
            old = self._tables.get(he.host)
            if old is not None and old.time_ns >= he.time_ns:
                return False  # a redelivered or reordered older table
            self._tables[he.host] = he
            if old is None or not _same(old.ends, he.ends):
                self._dirty = True
                self.version += 1
                self._changed.notify_all()
                return True
            return False

    def _foreign_address(self, he: HostEnds) -> str:
        """Why ``he`` names an address that is not its host's in the topology; "" when it does not (or no
        addresses are known). Ports of RDMA devices the topology does not list are dropped from ``he`` (counted in
        ``unknown_ports``): no flow of the fabric can go to them, and a host may have such NICs (storage)."""
        own = self.addresses.get(he.host)
        if own is None:
            return ""
        for end in list(he.ends):
            ip = own.get(end.device)
            if ip is None:
                del he.ends[end]
                self.unknown_ports += 1
            elif ip != end.ip:
                return (f"host {he.host!r} {end.device}/{end.port}: ip {end.ip!r} is not the topology's address of "
                        f"{he.host}:{end.device} ({ip})")
        return ""

    def _clamped(self, he: HostEnds) -> HostEnds:
        """``he`` with its time at most the agent's clock plus ``max_ahead_ns`` (as is before the first window)."""
        if self._clock_ns is None or he.time_ns <= self._clock_ns + self.max_ahead_ns:
            return he
        return HostEnds(he.host, self._clock_ns + self.max_ahead_ns, he.ends)

    def wait_newer(self, version: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a change after ``version``; True when there was one."""
        with self._changed:
            return self._changed.wait_for(lambda: self.version != version, max(0.0, timeout_s))

    def seen(self) -> dict[str, int]:
        """Host -> ``time_ns`` of the latest table held."""
        with self._lock:
            return {h: t.time_ns for h, t in self._tables.items()}

    def directory(self, now_ns: int) -> PeerDirectory | None:
        """The other hosts' ends as of ``now_ns`` (tables older than ``max_age_ns`` dropped), or None."""
        with self._lock:
            self._clock_ns = now_ns if self._clock_ns is None else max(self._clock_ns, now_ns)
            for h, t in self._tables.items():  # tables taken before the first window, clamped now
                self._tables[h] = self._clamped(t)
            stale = [h for h, t in self._tables.items() if now_ns - t.time_ns > self.max_age_ns]
            for h in stale:
                log.info("dropping the QP table of %s: none for more than %.0f s", h, self.max_age_ns / 1e9)
                del self._tables[h]
            if stale or self._dirty:
                d = PeerDirectory()
                for t in self._tables.values():
                    for end, (lq, rq) in t.ends.items():
                        d.add_many(end, lq, rq)
                self._directory = d if self._tables else None
                self._dirty = False
            return self._directory


def _same(a: Mapping[Endpoint, tuple[np.ndarray, np.ndarray]],
          b: Mapping[Endpoint, tuple[np.ndarray, np.ndarray]]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k][0], b[k][0]) and np.array_equal(a[k][1], b[k][1])
                                        for k in a)


class Publisher:
    """When to publish a host's table: when it changed, and at least every ``refresh_ns`` (so a
    newly started agent, or one whose consumer fell behind compaction, learns every table)."""

    def __init__(self, refresh_ns: int) -> None:
        self.refresh_ns = refresh_ns
        self._last: dict[str, tuple[bytes, int]] = {}  # host -> (digest, time_ns) last published

    def last(self, host: str) -> int | None:
        """``time_ns`` of the table last published for ``host``, or None."""
        last = self._last.get(host)
        return None if last is None else last[1]

    def due(self, host: str, digest: bytes, time_ns: int) -> bool:
        """True (and remembered as published) when ``host``'s table is new, changed or due a refresh."""
        last = self._last.get(host)
        if last is not None and last[0] == digest and time_ns - last[1] < self.refresh_ns:
            return False
        self._last[host] = (digest, time_ns)
        return True
