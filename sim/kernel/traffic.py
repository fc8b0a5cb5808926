"""Real UDP packets for the simulated flows: one paced sender thread, one draining receiver thread.

Every flow direction gets an unconnected UDP socket created inside its source host's namespace
(``run_in_netns``), bound with SO_REUSEPORT to (source IP, the flow's RoCEv2 UDP source port), so a
host agent's prober can bind the same pair with a connected socket of its own. Packets go to
(destination IP, 4791). Each packet is one RoCEv2 frame of the modelled size: UDP payload = BTH (12
bytes: RDMA WRITE opcode, destination QP, PSN) + data + ICRC (4) + 4 bytes standing for the FCS the
veth does not count, so the veth's L2 bytes equal the modelled frame bytes (payload + ``header_bytes``).

Pacing: at every engine tick the owner calls ``update`` with, per flow, the real bytes the model says
it has moved so far (modelled frame bytes / scale) and its current rate (real bytes/s); until the
tick's end the sender aims linearly at ``base + rate x tick`` from where it actually stands, so errors
(a rate that changed inside the tick, whole packets) are made up in the next tick, spread over it.
Every host namespace has a UDP socket on port 4791 that a single thread drains with epoll (no ICMP
port-unreachable ever). ``sent_while(read)`` tells what each flow has sent at the instant ``read`` runs (the
data plane reads the switches' counters so: hosts then report what the kernel carried).
"""

from __future__ import annotations

import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from flowtracer.sim.kernel.netns import run_in_netns

log = logging.getLogger(__name__)
T = TypeVar("T")

ROCEV2_PORT = 4791
#: Ethernet 14 + IPv4 20 + UDP 8: what a veth counts besides the UDP payload.
L2_L4_BYTES = 42
#: Loop period of the sender, s: packets due are sent in bursts at most this far apart.
SEND_PERIOD_S = 0.002
#: Most packets one flow sends in one loop (a burst bigger than this waits for the next loop).
MAX_BURST = 64


@dataclass(frozen=True)
class FlowKey:
    """A flow direction's identity for the sender: its namespace (path) and 5-tuple."""

    netns: Path
    src_ip: str
    dst_ip: str
    sport: int
    dst_qpn: int = 0


def frame_payload(frame_bytes: int, dst_qpn: int) -> bytes:
    """UDP payload that makes a ``frame_bytes`` veth frame: a BTH (RDMA WRITE, ``dst_qpn``), then zeros."""
    size = max(frame_bytes - L2_L4_BYTES, 12)
    bth = struct.pack("!BBHI I", 0x0A, 0x40, 0xFFFF, dst_qpn & 0xFFFFFF, 0)
    return bth + bytes(size - len(bth))


class TrafficSender:
    """Sends every flow's packets at the pace ``update`` sets; drains the receivers. ``close()`` ends it."""

    def __init__(self, host_netns: list[Path]) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._keys: list[FlowKey] = []
        self._index: dict[FlowKey, int] = {}
        self._socks: list[socket.socket] = []
        self._payload: list[bytes] = []
        self._dest: list[tuple[str, int]] = []
        n = 0
        self._frame = np.zeros(n)
        self._sent = np.zeros(n)  # real bytes sent, cumulative
        self._from = np.zeros(n)  # where the current aim started (real bytes)
        self._to = np.zeros(n)  # where the flow should be at the tick end (real bytes)
        self._t0 = 0.0
        self._t1 = 0.0
        self.packets_sent = 0
        self.send_errors = 0
        self.packets_received = 0
        self._receivers = run_in_netns(host_netns, lambda _p: _receiver())
        self._epoll = select.epoll()
        self._by_fd = {s.fileno(): s for s in self._receivers}
        for s in self._receivers:
            self._epoll.register(s.fileno(), select.EPOLLIN)
        self._threads = [threading.Thread(target=self._send_loop, name="kernel-traffic-send", daemon=True),
                         threading.Thread(target=self._drain_loop, name="kernel-traffic-drain", daemon=True)]
        for t in self._threads:
            t.start()

    # -- flows ------------------------------------------------------------------------------------

    def update(self, flows: dict[FlowKey, tuple[int, float, float]], tick_s: float, within_s: float) -> None:
        """New aims: per flow (frame bytes, real bytes moved so far per the model, real bytes/s for the
        ``tick_s`` ahead), to be reached ``within_s`` from now. Flows left out stop (their sockets stay)."""
        new = [k for k in flows if k not in self._index]
        if new:
            by_ns: dict[Path, list[FlowKey]] = {}
            for k in new:
                by_ns.setdefault(k.netns, []).append(k)
            made = run_in_netns(list(by_ns), lambda p: [_sender(k.src_ip, k.sport) for k in by_ns[p]])  # type: ignore[index]
        with self._lock:
            if new:
                for ks, socks in zip(by_ns.values(), made, strict=True):
                    for k, s in zip(ks, socks, strict=True):
                        self._index[k] = len(self._keys)
                        self._keys.append(k)
                        self._socks.append(s)
                        self._dest.append((k.dst_ip, ROCEV2_PORT))
                        self._payload.append(b"")
                grow = len(self._keys) - len(self._sent)
                self._frame = np.concatenate([self._frame, np.zeros(grow)])
                self._sent = np.concatenate([self._sent, np.zeros(grow)])
                self._from = np.concatenate([self._from, np.zeros(grow)])
                self._to = np.concatenate([self._to, np.zeros(grow)])
            self._from = self._sent.copy()
            self._to = self._sent.copy()  # flows left out stop where they are
            for k, (frame, base, rate) in flows.items():
                i = self._index[k]
                if self._frame[i] != frame:
                    self._frame[i] = frame
                    self._payload[i] = frame_payload(frame, k.dst_qpn)
                self._to[i] = base + rate * tick_s
            self._t0 = time.monotonic()
            self._t1 = self._t0 + within_s

    def sent_while(self, read: Callable[[], T]) -> tuple[T, dict[FlowKey, float]]:
        """``read()`` called with sending paused, and the real frame bytes each flow had sent by then: both
        describe one instant (no frame leaves a sender between the two), e.g. the switches' counters."""
        with self._lock:
            return read(), {k: float(self._sent[i]) for k, i in self._index.items()}

    # -- threads ----------------------------------------------------------------------------------

    def _send_loop(self) -> None:
        while not self._stop.wait(SEND_PERIOD_S):
            with self._lock:
                if not len(self._sent) or self._t1 <= self._t0:
                    continue
                frac = min(1.0, max(0.0, (time.monotonic() - self._t0) / (self._t1 - self._t0)))
                aim = self._from + (self._to - self._from) * frac
                due = np.flatnonzero(aim - self._sent >= self._frame)
                if not len(due):
                    continue
                counts = np.minimum((aim[due] - self._sent[due]) // self._frame[due], MAX_BURST).astype(np.int64)
                for i, n in zip(due.tolist(), counts.tolist(), strict=True):
                    s, payload, dest = self._socks[i], self._payload[i], self._dest[i]
                    done = 0
                    try:
                        for _ in range(n):
                            s.sendto(payload, dest)
                            done += 1
                    except OSError:  # ENOBUFS and the like: the rest goes in the next loop
                        self.send_errors += 1
                    self._sent[i] += done * self._frame[i]
                    self.packets_sent += done

    def _drain_loop(self) -> None:
        buf = bytearray(65536)
        while not self._stop.is_set():
            for fd, _ev in self._epoll.poll(0.2):
                s = self._by_fd[fd]
                while True:
                    try:
                        s.recv_into(buf)
                    except (BlockingIOError, OSError):
                        break
                    self.packets_received += 1

    def close(self) -> None:
        """Stop both threads and close every socket (the namespaces can then go)."""
        self._stop.set()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join()
        self._epoll.close()
        for s in [*self._socks, *self._receivers]:
            s.close()
        self._socks, self._receivers = [], []


def _sender(src_ip: str, sport: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    s.bind((src_ip, sport))
    return s


def _receiver() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", ROCEV2_PORT))
    s.setblocking(False)
    return s
