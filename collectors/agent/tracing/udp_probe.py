"""Kernel transport: unprivileged UDP probes carrying a flow's exact 5-tuple, answers from the error queue.

Like tracepath: one UDP socket per traced flow, bound to the flow's source address and UDP source
port (``SO_REUSEADDR``/``SO_REUSEPORT``, so a traffic sender that bound the port with
``SO_REUSEPORT`` does not stop us; on a real host RoCE traffic is in the NIC, not the kernel) and
``connect()``-ed to (dst, dport) so ICMP errors for it are delivered to this socket. With
``IP_RECVERR`` on, each ICMP error is queued on the socket's error queue; ``recvmsg(MSG_ERRQUEUE)``
returns the probe's own payload (the token) and a ``struct sock_extended_err`` (errno, origin,
ICMP type and code) followed by the offender's ``sockaddr_in``. ``IP_TTL`` is set per probe.

Network namespaces: for a data plane of namespaces (one per host), the agent runs in the root
namespace and creates each host's probe socket inside that host's namespace, in a short-lived
thread that entered it with ``setns(CLONE_NEWNET)``; a socket stays in the namespace it was
created in. Needs CAP_SYS_ADMIN only for that; plain probing needs no privilege.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from flowtracer.collectors.agent.tracing.plan import TraceFlow
from flowtracer.collectors.agent.tracing.trace import Answer

IP_RECVERR = 11  # <linux/in.h>; not in every build of the socket module
MSG_ERRQUEUE = 0x2000
SO_EE_ORIGIN_ICMP = 2
CLONE_NEWNET = 0x40000000
SOCK_EXTENDED_ERR = struct.Struct("=IBBBBII")  # ee_errno, ee_origin, ee_type, ee_code, ee_pad, ee_info, ee_data
SOCKADDR_IN = struct.Struct("=HH4s")  # family, port (network order), address
TOKEN = struct.Struct("!Q")
SO_TIMESTAMPNS = 35  # <asm-generic/socket.h>; = SCM_TIMESTAMPNS, a struct timespec (CLOCK_REALTIME)
TIMESPEC = struct.Struct("=qq")
NETNS_DIR = Path("/run/netns")


def parse_extended_err(cmsg_data: bytes) -> tuple[int, int, int, int, str] | None:
    """``(ee_errno, ee_origin, ee_type, ee_code, offender IPv4)`` of an ``IP_RECVERR`` control message;
    None when it is too short. The offender is "" when the kernel gave none."""
    if len(cmsg_data) < SOCK_EXTENDED_ERR.size:
        return None
    ee_errno, origin, typ, code, _pad, _info, _data = SOCK_EXTENDED_ERR.unpack_from(cmsg_data)
    offender = ""
    if len(cmsg_data) >= SOCK_EXTENDED_ERR.size + SOCKADDR_IN.size:
        family, _port, addr = SOCKADDR_IN.unpack_from(cmsg_data, SOCK_EXTENDED_ERR.size)
        if family == socket.AF_INET:
            offender = socket.inet_ntoa(addr)
    return ee_errno, origin, typ, code, offender


def enable_rx_timestamps(s: socket.socket) -> None:
    """Have the kernel stamp each datagram (and each error-queue message) with its arrival time."""
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def rx_time_ns(anc: list[tuple[int, int, bytes]], realtime_minus_clock_ns: int, default_ns: int) -> int:
    """The arrival time in a ``recvmsg`` ancillary list (``SCM_TIMESTAMPNS``) on the caller's clock
    (``realtime_minus_clock_ns`` = ``time.time_ns() - clock()``); ``default_ns`` when there is none."""
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(data)
            return min(default_ns, sec * 1_000_000_000 + nsec - realtime_minus_clock_ns)
    return default_ns


def netns_path(name_or_path: str) -> str:
    """``/run/netns/<name>`` for a bare name (``ip netns`` names), the path itself otherwise."""
    return name_or_path if "/" in name_or_path else str(NETNS_DIR / name_or_path)


def socket_in_netns(netns: str | None, factory: Callable[[], socket.socket]) -> socket.socket:
    """``factory()`` run in network namespace ``netns`` (name or path; None = this one), in a short-lived
    thread that entered it (``setns`` changes only the calling thread's namespace)."""
    if netns is None:
        return factory()
    out: list[socket.socket | BaseException] = []

    def enter_and_create() -> None:
        try:
            fd = os.open(netns_path(netns), os.O_RDONLY | os.O_CLOEXEC)
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, f"setns({netns}): {os.strerror(e)}")
            finally:
                os.close(fd)
            out.append(factory())
        except BaseException as e:  # handed to the caller
            out.append(e)

    t = threading.Thread(target=enter_and_create, name=f"netns-{netns}", daemon=True)
    t.start()
    t.join()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


class KernelTransport:
    """Probes as kernel UDP datagrams (see the module docstring).

    Args:
        netns: host name -> network namespace (name under /run/netns, or a path) its sockets are made
            in; hosts not listed probe from this namespace.
        payload_bytes: UDP payload of each probe (>= 8: the token).
        clock: monotonic ns, the prober's clock (answer times).
    """

    def __init__(self, netns: Mapping[str, str] | None = None, payload_bytes: int = 16,
                 clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.netns = dict(netns or {})
        self.pad = b"\0" * max(0, payload_bytes - TOKEN.size)
        self.clock = clock
        self._poll = select.poll()
        self._socks: dict[int, socket.socket] = {}

    def _make(self, flow: TraceFlow) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.setsockopt(socket.SOL_IP, IP_RECVERR, 1)
            enable_rx_timestamps(s)
            s.bind((flow.src_ip, flow.udp_src_port))
            s.connect((flow.dst_ip, flow.udp_dst_port))
            s.setblocking(False)
        except BaseException:
            s.close()
            raise
        return s

    def open(self, flow: TraceFlow) -> object:
        """A socket bound to the flow's source address and port, connected to its destination."""
        s = socket_in_netns(self.netns.get(flow.host), lambda: self._make(flow))
        self._socks[s.fileno()] = s
        self._poll.register(s.fileno(), select.POLLERR | select.POLLIN)
        return s

    def send(self, handle: object, ttl: int, token: int) -> None:
        """One probe with IP TTL ``ttl`` whose payload starts with ``token``."""
        s: socket.socket = handle  # type: ignore[assignment]
        s.setsockopt(socket.SOL_IP, socket.IP_TTL, ttl)
        data = TOKEN.pack(token) + self.pad
        try:
            s.send(data)
        except OSError as e:  # a queued ICMP error of an earlier probe is reported once on send
            if e.errno not in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
                raise
            s.send(data)

    def close(self, handle: object) -> None:
        s: socket.socket = handle  # type: ignore[assignment]
        fd = s.fileno()
        if fd >= 0 and self._socks.pop(fd, None) is not None:
            self._poll.unregister(fd)
        s.close()

    def poll(self, timeout_s: float) -> list[Answer]:
        """ICMP errors queued on the probe sockets, waiting at most ``timeout_s`` for the first; each
        stamped with its arrival time (``SO_TIMESTAMPNS``), on the prober's clock."""
        out: list[Answer] = []
        for fd, _ev in self._poll.poll(max(0, int(timeout_s * 1000))):
            s = self._socks.get(fd)
            if s is not None:
                self._drain(s, out)
        return out

    def collect(self, wait_s: float) -> list[Answer]:
        """Sleep ``wait_s`` (answers do not wake it), then every queued answer, stamped with its arrival."""
        if wait_s > 0:
            time.sleep(wait_s)
        return self.poll(0)

    def _drain(self, s: socket.socket, out: list[Answer]) -> None:
        offset = None
        while True:
            try:
                data, anc, _flags, _addr = s.recvmsg(64, 512, MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError:
                break
            now = self.clock()
            if offset is None:
                offset = time.time_ns() - now
            now = rx_time_ns(anc, offset, now)
            if len(data) < TOKEN.size:
                continue
            (token,) = TOKEN.unpack_from(data)
            for level, typ, cdata in anc:
                if level != socket.SOL_IP or typ != IP_RECVERR:
                    continue
                ee = parse_extended_err(cdata)
                if ee is not None and ee[1] == SO_EE_ORIGIN_ICMP and ee[4]:
                    out.append(Answer(token, ee[4], ee[2], ee[3], now))
        while True:  # ordinary datagrams from the destination are not answers: discard
            try:
                s.recv(2048, socket.MSG_DONTWAIT)
            except OSError:
                break
