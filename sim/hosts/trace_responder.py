"""Trace answers for the fluid model: a loopback UDP service that plays the fabric's ICMP errors.

The fluid model has no packets, so a host agent's ``sim`` tracing transport asks this service what a
TTL-limited probe would have met. Request and answer are one JSON object per UDP datagram on
127.0.0.1 (docs/tracing.md, "Simulator answers"):

- request: ``{"id": 7, "src": "10.0.0.1", "dst": "10.0.0.2", "sport": 49152, "dport": 4791, "ttl": 2}``, plus
  ``"dqp": 1234`` when the probe is RoCE-formed (a BTH carrying that destination QP)
- answer: ``{"id": 7, "addr": "172.16.0.1", "type": 11, "code": 0}``, or no answer at all (lost, rate
  limited, unknown addresses, or the path is down).

The probe's path is the simulator's own ``Fabric.hash_path`` over the probe's headers (a plain UDP
probe has no BTH: destination QP 0; a RoCE-formed one carries ``dqp``) with the links currently down,
and a per-probe member at switches that spray or route adaptively (``probe_route``); hop ``ttl``
answers time exceeded (11/0) from the address of the port the probe came in on
(``fabric.addressing.interface_addresses``). A TTL beyond the last switch reaches the destination NIC:
a plain UDP probe meets port unreachable (3/3) from the NIC's address; a RoCE-formed probe is taken by
the NIC's RoCE engine, which sends no ICMP and drops a BTH it has no matching QP state for
(docs/tracing.md): no answer, and ``nic_roce_probes`` counts it (agents cap a RoCE probe's TTL at the
switch hops, so it should stay 0). ``loss`` drops that share of answers at random;
``icmp_rate``/``icmp_burst`` give every switch a token bucket of ICMP errors per second (0 = unlimited), as a
switch's CoPP would.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time
from dataclasses import dataclass

from flowtracer.fabric.addressing import interface_addresses
from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.hosts.probe_route import ProbeRouter

log = logging.getLogger(__name__)


@dataclass
class ResponderLimits:
    """ICMP behaviour: ``loss`` share of answers dropped (0..1); per switch ``icmp_rate`` errors/s with
    ``icmp_burst`` saved up (rate 0 = no limit)."""

    loss: float = 0.0
    icmp_rate: float = 0.0
    icmp_burst: float = 10.0


class TraceResponder:
    """Answers probe requests for ``engine``'s fabric on a loopback UDP port (see the module docstring)."""

    def __init__(self, engine: Engine, limits: ResponderLimits | None = None, address: str = "127.0.0.1",
                 port: int = 0, seed: int | None = None) -> None:
        self.engine = engine
        self.limits = limits or ResponderLimits()
        self._rng = random.Random(seed)
        self._addr = interface_addresses(engine.fabric.topology)
        self._router = ProbeRouter(engine.fabric, seed)
        self._tokens: dict[str, tuple[float, float]] = {}  # switch -> (tokens, at monotonic s)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((address, port))
        self.sock.settimeout(0.2)
        bound = self.sock.getsockname()
        self.address = f"{bound[0]}:{bound[1]}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.requests = 0
        self.answered = 0
        self.malformed = 0
        self.nic_roce_probes = 0  # RoCE-formed probes that reached a destination NIC (must stay 0)

    def start(self) -> str:
        """Serve on a daemon thread; return ``host:port``."""
        self._thread = threading.Thread(target=self._serve, name="sim-trace-responder", daemon=True)
        self._thread.start()
        return self.address

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sock.close()

    def set_limits(self, limits: ResponderLimits) -> None:
        """Change loss and rate limits while running (buckets start full)."""
        self.limits = limits
        self._tokens.clear()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(2048)
            except TimeoutError:
                continue
            except OSError:
                return
            self.requests += 1
            try:
                req = json.loads(data)
                dqp = req.get("dqp")
                ans = self.answer(str(req["src"]), str(req["dst"]), int(req["sport"]), int(req["dport"]),
                                  int(req["ttl"]), None if dqp is None else int(dqp))
                rid = req["id"]
            except (ValueError, KeyError, TypeError):
                self.malformed += 1
                continue
            if ans is None:
                continue
            self.answered += 1
            self.sock.sendto(json.dumps({"id": rid, "addr": ans[0], "type": ans[1], "code": ans[2]}).encode(), peer)

    def answer(self, src: str, dst: str, sport: int, dport: int, ttl: int,
               dqp: int | None = None) -> tuple[str, int, int] | None:
        """(address, ICMP type, code) the probe meets, or None (no answer). ``dqp``: the BTH destination QP of a
        RoCE-formed probe; None for a plain UDP probe."""
        fab = self.engine.fabric
        s, d = fab.nic_by_ip.get(src), fab.nic_by_ip.get(dst)
        if s is None or d is None or ttl < 1:
            return None
        path = self._router.path(HeaderFields(src, dst, sport, dport, dst_qpn=dqp or 0), s.name, d.name,
                                 down=self.engine.faults.down_links(), weights=self.engine.faults.weights)
        if path is None:
            return None
        if ttl >= len(path):  # past the last switch: the destination NIC
            if dqp is not None:
                self.nic_roce_probes += 1
                return None
            return (dst, 3, 3) if self._lucky() else None
        link = fab.links[path[ttl - 1]]
        if link.dst_node in self.engine.faults.rebooting or not self._lucky() or not self._token(link.dst_node):
            return None
        addr = self._addr.get((link.dst_node, link.dst_port))
        return (addr, 11, 0) if addr else None

    def _lucky(self) -> bool:
        return self.limits.loss <= 0 or self._rng.random() >= self.limits.loss

    def _token(self, switch: str) -> bool:
        lim = self.limits
        if lim.icmp_rate <= 0:
            return True
        now = time.monotonic()
        tokens, at = self._tokens.get(switch, (lim.icmp_burst, now))
        tokens = min(lim.icmp_burst, tokens + (now - at) * lim.icmp_rate)
        ok = tokens >= 1
        self._tokens[switch] = (tokens - 1 if ok else tokens, now)
        return ok
