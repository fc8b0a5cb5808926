"""Simulator transport: probes as JSON requests to the simulator's trace responder (loopback UDP).

The same prober drives it as the kernel transport; only where a probe goes differs. A request
names the probe's 5-tuple and TTL and a token (``id``), and for a RoCE-formed probe (``TraceFlow.bth``) the
BTH destination QP it carries (``dqp``); the responder answers with the address
that would have sent the ICMP error, or not at all (``sim/hosts/trace_responder.py``;
docs/tracing.md, "Simulator answers").
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable
from pathlib import Path

from flowtracer.collectors.agent.config import ConfigError
from flowtracer.collectors.agent.sources.registry import read_ready_json
from flowtracer.collectors.agent.tracing.plan import TraceFlow
from flowtracer.collectors.agent.tracing.trace import Answer
from flowtracer.collectors.agent.tracing.udp_probe import enable_rx_timestamps, rx_time_ns


def responder_address(ready_json: Path) -> tuple[str, int]:
    """``(host, port)`` of the trace responder named in the ready JSON of ``flowtracer sim``."""
    addr = read_ready_json(ready_json).get("trace_responder")
    host, sep, port = str(addr or "").rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"{ready_json}: no trace_responder address (a simulator with its trace responder on)")
    return host, int(port)


class SimTransport:
    """Probes of every flow go to one responder over one UDP socket; the token matches answers."""

    def __init__(self, address: tuple[str, int], clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.address = address
        self.clock = clock
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect(address)
        self.sock.setblocking(False)
        enable_rx_timestamps(self.sock)

    def open(self, flow: TraceFlow) -> object:
        return flow

    def send(self, handle: object, ttl: int, token: int) -> None:
        f: TraceFlow = handle  # type: ignore[assignment]
        # the request as json.dumps would write it (addresses and ints need no escaping), without its cost
        bth = f', "dqp": {int(f.dst_qpn)}' if f.bth else ""
        self.sock.send(f'{{"id": {int(token)}, "src": {json.dumps(f.src_ip)}, "dst": {json.dumps(f.dst_ip)}, '
                       f'"sport": {int(f.udp_src_port)}, "dport": {int(f.udp_dst_port)}, "ttl": {int(ttl)}{bth}}}'
                       .encode())

    def close(self, handle: object) -> None:
        pass

    def poll(self, timeout_s: float) -> list[Answer]:
        """Answers, waiting at most ``timeout_s`` for the first; each stamped with its arrival time."""
        r, _, _ = select.select([self.sock], [], [], max(0.0, timeout_s))
        return self._drain() if r else []

    def collect(self, wait_s: float) -> list[Answer]:
        """Sleep ``wait_s`` (answers do not wake it), then every queued answer, stamped with its arrival."""
        if wait_s > 0:
            time.sleep(wait_s)
        return self._drain()

    def _drain(self) -> list[Answer]:
        out: list[Answer] = []
        offset = None
        while True:
            try:
                data, anc, _flags, _addr = self.sock.recvmsg(2048, 64)
            except (BlockingIOError, ConnectionRefusedError):
                break
            now = self.clock()
            if offset is None:
                offset = time.time_ns() - now
            try:
                a = json.loads(data)
                out.append(Answer(int(a["id"]), str(a["addr"]), int(a["type"]), int(a["code"]),
                                  rx_time_ns(anc, offset, now)))
            except (ValueError, KeyError, TypeError):
                continue
        return out

    def shutdown(self) -> None:
        self.sock.close()
