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
"""

from __future__ import annotations

import hashlib
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
        lq = np.array(p.lqpn, np.int64)
        rq = np.array(p.rqpn, np.int64)
        if len(lq) and max(int(lq.max()), int(rq.max())) >= _MAX_QPN:
            raise BadQpEnds(f"{where}: a QP number is not 24 bits")
        ends[Endpoint(msg.host, p.rdma_device, p.port, p.ip)] = (lq, rq)
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
    """

    def __init__(self, local_hosts: Collection[str], known_hosts: Collection[str] = (),
                 max_age_ns: int = 90_000_000_000) -> None:
        self.local_hosts = frozenset(local_hosts)
        self.known_hosts = frozenset(known_hosts)
        self.max_age_ns = max_age_ns
        self.malformed = 0
        self.ignored = 0  # records of local or unknown hosts
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
        with self._lock:
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
