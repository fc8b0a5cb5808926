"""NCCL_DEBUG=INFO logs -> which communicator, rank, channel and collective a QP serves.

Lines are taken apart by ``nccl_line`` (launchers' prefixes, NCCL's prefix, local-time stamps) and their messages
read by ``nccl_formats`` (every format since 2.7, with the NCCL source lines they come from); this module keeps the
state that correlates them. Lines it does not understand are counted by shape (``nccl_shapes``), never dropped
silently; every line lands in exactly one of ``used``, ``ignored``, ``other``, ``unknown`` and ``bad``.

Correlation, as far as the log allows (documented in docs/agent.md). State is kept per GPU of a process, the
``(pid, cudaDev)`` of the line's prefix (a process may drive several GPUs, as nccl-tests ``-g 8`` does; NCCL's proxy
thread sets the device of the GPU it serves, so its QP lines carry it too):

* a ``Channel ... [send] via NET/IB/d`` line queues a send (channel, the sender's rank and the peer, both from the
  line) on net device ``d`` of the GPU whose process connects it: its own, or for PXN (``NET/IB/d(p)``) the GPU
  that rank ``p`` of the same communicator runs on (learned from that process's own lines; a send waits for it);
* each QP line of net device ``d`` of a GPU takes the oldest send queued there, the order
  ``ncclTransportP2pSetup`` sets up and then connects them; with ``NCCL_IB_QPS_PER_CONNECTION=n`` (read from
  the log) n QP lines share one send, and QP lines beyond the queue get the last connection's tag;
* a send's communicator is the one its line names (RCCL), else the GPU's communicator of that rank; a log that
  starts after ``Init START`` (agent started late, rotated log) gives the send a communicator of that rank alone,
  which later lines of the GPU (``Init COMPLETE``, a COLL line) complete.

Bounded: at most ``max_pids`` processes (least recently logging forgotten first, ``forgotten_pids``),
``max_comms`` communicators and ``max_sends`` waiting sends per process, ``max_tags`` QP tags between two
``retain`` calls; ``retain(live_dev, live_pid)``, called with each window's QP listing, forgets the tags of QPs
that are gone (a tag learned since the previous call is kept one more call).

Every COLL line also goes to ``on_call`` (the agent's ``collective_profile.CollectiveProfiler.call``) with the
line's pid, the communicator's rank and id, the operation, count, datatype, root, nranks and timestamp (ns since
the epoch, from NCCL's local-time stamp read in ``zone``; 0 without one).

Pure apart from logging: ``NcclLog.feed(lines)`` updates the state; nothing here reads files.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo

from flowtracer.collectors.agent.sources.nccl_formats import (
    IGNORED,
    MAX_CUDA_DEVS,
    OTHER,
    Coll,
    CommEvent,
    Conn,
    Devices,
    Qp,
    Setting,
    Unknown,
    number,
    parse_message,
)
from flowtracer.collectors.agent.sources.nccl_line import split_line, timestamp_ns
from flowtracer.collectors.agent.sources.nccl_shapes import ShapeCounter, shape_of
from flowtracer.collectors.agent.sources.nccl_tags import MAX_TAGS, CommInfo, QpTag, QpTags
from flowtracer.collectors.agent.sources.rdma_json import PID_MAX

log = logging.getLogger(__name__)

__all__ = ["MAX_TAGS", "CommInfo", "NcclLog", "QpTag", "timestamp_ns"]

MAX_PIDS = 4096
"""Processes remembered at once (``NcclLog.max_pids``)."""
MAX_COMMS = 1024
"""Communicators remembered per process (``NcclLog.max_comms``); the least recently used is forgotten first."""
MAX_SENDS = 8192
"""Channel [send] lines per process waiting for their QP line (``NcclLog.max_sends``); the oldest goes first."""
#: What ``NcclLog`` tells of each COLL line: pid, rank, comm id, operation, count, datatype, root, nranks, t_ns.
CallSink = Callable[[int, int, str, str, int, int, int, int, int], None]


@dataclass(frozen=True, slots=True)
class _Where:
    """``file:line`` of a line, formatted only when a log line names it."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file or 'NCCL log'}:{self.line}"


@dataclass(slots=True)
class _Send:
    comm: CommInfo
    channel: int
    peer: int
    qps: int = 0  # QP lines that took it so far


@dataclass(slots=True)
class _Gpu:
    current: CommInfo | None = None
    pending: dict[int, deque[_Send]] = field(default_factory=dict)  # by NCCL net device
    last: dict[int, _Send] = field(default_factory=dict)


@dataclass(slots=True)
class _Proc:
    ib_devs: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: By pointer (or "gpu G rank R" while unnamed), least recently used first.
    comms: dict[str, CommInfo] = field(default_factory=dict)
    gpus: dict[int, _Gpu] = field(default_factory=dict)
    queued: int = 0  # sends in the GPUs' ``pending``
    traffic_class: int | None = None
    qps_per_connection: int = 1


class NcclLog:
    """Accumulated knowledge from one host's NCCL INFO lines (one or many processes).

    ``feed`` lines in log order; ``tag(pid, device, lqpn)`` answers for a QP of ``rdma res show qp``. ``malformed``
    counts lines not understood outside history (``unknown`` and ``bad``); ``shapes`` has them by shape. Never
    raises on input. ``zone``: the zone of the hosts that wrote the log (None: this process's local zone).
    """

    def __init__(self, max_pids: int = MAX_PIDS, on_call: CallSink | None = None, max_comms: int = MAX_COMMS,
                 max_sends: int = MAX_SENDS, max_tags: int = MAX_TAGS, zone: tzinfo | None = None,
                 shapes: ShapeCounter | None = None) -> None:
        for name, v in (("max_pids", max_pids), ("max_comms", max_comms), ("max_sends", max_sends)):
            if v < 1:
                raise ValueError(f"{name} must be at least 1, not {v}")
        self.max_pids = max_pids
        self.max_comms, self.max_sends = max_comms, max_sends
        #: The QP tags learned (bounded by ``max_tags``; ``retain`` forgets those of QPs gone).
        self.tags = QpTags(max_tags)
        self.on_call = on_call
        self.zone = zone
        self.shapes = shapes if shapes is not None else ShapeCounter()
        self._seconds: dict[str, int] = {}
        self._stamp_ns = 0  # the newest NCCL stamp read, ns (a repeated fall-back hour is read after it)
        self._procs: dict[int, _Proc] = {}  # least recently logging first
        self._where: dict[tuple[str, int], tuple[int, int]] = {}  # (comm id or "", rank) -> (pid, gpu)
        self._parked: dict[tuple[str, int], list[tuple[int, _Send]]] = {}  # PXN sends waiting for their proxy
        self.malformed = 0
        self.lines = 0
        #: Lines by what became of them: used, known and not needed, of no family read here, not understood.
        self.used = self.ignored = self.other = self.unknown = 0
        #: Lines of a known format whose numbers are out of bounds (or that tripped a bug here).
        self.bad = 0
        self._warned_bad = False  # the first bad line outside history was logged
        #: While True, COLL lines teach communicators but are not calls (``on_call``): a log's history.
        self.history = False
        self.forgotten_pids = 0
        self.forgotten_comms = 0
        self.forgotten_sends = 0

    # -- feeding ------------------------------------------------------------------------------------------------

    def feed(self, lines: list[str], where: str = "", first_line: int = 1, history: bool = False) -> None:
        """Consume log lines (with or without trailing newlines): ``lines[i]`` is line ``first_line + i`` of
        ``where`` (a file name, for the log). ``history``: lines the log held before the agent first read it
        (``log_tail.LogChunk.history``): they teach communicators and QPs, but their COLL lines are not calls of
        this window and their lines not understood are not counted in ``malformed`` again (their shapes are)."""
        self.history = history
        try:
            for i, line in enumerate(lines):
                self._line(line.rstrip("\r\n"), where, first_line + i)
        finally:
            self.history = False

    def _line(self, line: str, file: str, lineno: int) -> None:
        self.lines += 1
        if "NCCL INFO" not in line:
            self.other += 1
            return
        parts = split_line(line)
        if parts is None:
            self._unknown(shape_of("line", line), line, _Where(file, lineno))
            return
        if " NCCL INFO " in parts.msg:  # records glued into one line (a paste, interleaved writers)
            self._unknown("glued|NCCL records glued into one line", line, _Where(file, lineno))
            return
        if parts.unknown_prefix:
            self.shapes.add(shape_of("prefix", parts.unknown_prefix), line, _Where(file, lineno))
        try:
            msg = parse_message(parts.msg)
            if isinstance(msg, Unknown):
                self._unknown(shape_of(msg.family, parts.msg), line, _Where(file, lineno))
            elif msg == IGNORED:
                self.ignored += 1
            elif msg == OTHER:
                self.other += 1
            else:
                self._apply(number(parts.pid, PID_MAX), number(parts.dev, MAX_CUDA_DEVS, -1), msg, parts.stamp)
                self.used += 1
        except Exception as e:  # out of bounds (``number``), or a bug on one line: that line, not the agent
            where = _Where(file, lineno)
            self.bad += 1
            self.shapes.add(shape_of("bounds", parts.msg), line, where)
            if not self.history:
                self.malformed += 1
                if not self._warned_bad:
                    self._warned_bad = True
                    log.warning("%s: NCCL log line skipped (%s), counted as malformed; further ones are only "
                                "counted (flowtracer_agent_malformed_records_total): %.200r", where,
                                e if isinstance(e, ValueError) else f"{type(e).__name__}: {e}", line)

    def _unknown(self, shape: str, line: str, where: _Where) -> None:
        self.unknown += 1
        self.shapes.add(shape, line, where)
        if not self.history:
            self.malformed += 1

    def _apply(self, pid: int, dev: int, msg: object, stamp: str | None) -> None:
        p = self._proc(pid)
        if isinstance(msg, Coll):  # by far the most frequent, once a job runs
            self._coll(pid, p, dev, msg, stamp)
        elif isinstance(msg, Conn):
            self._conn(pid, p, dev, msg)
        elif isinstance(msg, Qp):
            self._qp(pid, p, dev, msg)
        elif isinstance(msg, CommEvent):
            self._comm_event(pid, p, dev, msg)
        elif isinstance(msg, Devices):
            for index, name, port in msg.devs:
                p.ib_devs[index] = (name, port)
        elif isinstance(msg, Setting):
            if msg.name == "NCCL_IB_TC":
                p.traffic_class = msg.value
            else:
                p.qps_per_connection = max(1, msg.value)

    # -- processes, GPUs and communicators ----------------------------------------------------------------------

    def _proc(self, pid: int) -> _Proc:
        p = self._procs.pop(pid, None)
        if p is None:
            p = _Proc()
            if len(self._procs) >= self.max_pids:
                self._forget_pid(next(iter(self._procs)))
        self._procs[pid] = p  # most recent last
        return p

    def _forget_pid(self, pid: int) -> None:
        del self._procs[pid]
        self.tags.forget_pid(pid)
        self.forgotten_pids += 1

    def _keep_comm(self, p: _Proc, c: CommInfo) -> CommInfo:
        """``c`` as the most recently used communicator of ``p``, the least recently used forgotten beyond
        ``max_comms`` (a process that creates communicators without destroying them)."""
        key = c.pointer or f"gpu {c.gpu} rank {c.rank}"  # a pointer is unique in its process
        p.comms.pop(key, None)
        if len(p.comms) >= self.max_comms:
            del p.comms[next(iter(p.comms))]
            self.forgotten_comms += 1
        p.comms[key] = c
        return c

    def _comm_of_rank(self, p: _Proc, gpu: int, rank: int) -> CommInfo:
        """The communicator of ``gpu`` whose rank is ``rank``: the GPU's current one, else the most recent such,
        else a new one named only by that rank (completed by the GPU's later lines, ``_adopt``)."""
        g = p.gpus.setdefault(gpu, _Gpu())
        if g.current is not None and g.current.rank == rank:
            return g.current
        for c in reversed(p.comms.values()):
            if c.gpu == gpu and c.rank == rank:
                return c
        c = self._keep_comm(p, CommInfo("", rank, 0, gpu=gpu))
        g.current = c
        return c

    def _adopt(self, p: _Proc, gpu: int, pointer: str, rank: int, nranks: int) -> CommInfo | None:
        """The communicator known only by its rank on ``gpu`` that ``pointer`` turns out to be, now named."""
        for key, c in reversed(p.comms.items()):
            if not c.pointer and c.gpu == gpu and rank in (c.rank, -1):
                del p.comms[key]
                c.pointer, c.nranks = pointer, nranks
                return self._keep_comm(p, c)
        return None

    def _comm_event(self, pid: int, p: _Proc, dev: int, e: CommEvent) -> None:
        gpu = e.cuda_dev if e.cuda_dev >= 0 else dev
        g = p.gpus.setdefault(gpu, _Gpu())
        if e.event == "end":
            c = p.comms.pop(e.pointer, None)
            if c is not None and g.current is c:
                g.current = None
            return
        c = p.comms.get(e.pointer)
        if c is None or c.rank != e.rank or c.nranks != e.nranks:  # new, or a freed pointer reused
            c = self._adopt(p, gpu, e.pointer, e.rank, e.nranks) or CommInfo(e.pointer, e.rank, e.nranks)
        c.gpu = gpu
        self._keep_comm(p, c)
        if e.comm_id:
            c.comm_id = e.comm_id
        if e.event == "start":
            g.current = c
        self._located(c.comm_id, c.rank, pid, gpu)

    def _coll(self, pid: int, p: _Proc, dev: int, e: Coll, stamp: str | None) -> None:
        c = p.comms.get(e.pointer) or self._adopt(p, dev, e.pointer, -1, e.nranks) \
            or CommInfo(e.pointer, -1, e.nranks, gpu=dev)
        self._keep_comm(p, c)
        c.collective, c.op_count = e.op, e.op_count
        p.gpus.setdefault(dev, _Gpu()).current = c
        if self.on_call is not None and not self.history:
            at = timestamp_ns(stamp, self._seconds, self.zone, self._stamp_ns)
            self._stamp_ns = max(self._stamp_ns, at)
            self.on_call(pid, c.rank, c.id, c.collective, e.count, e.datatype, e.root, e.nranks, at)

    # -- connections and QPs ------------------------------------------------------------------------------------

    def _conn(self, pid: int, p: _Proc, dev: int, e: Conn) -> None:
        me = e.rank if e.send else e.peer  # a [receive] line names the peer first
        if e.comm:
            c = p.comms.get(e.comm) or self._adopt(p, dev, e.comm, me, 0) \
                or self._keep_comm(p, CommInfo(e.comm, me, 0, gpu=dev))
        else:
            c = self._comm_of_rank(p, dev, me)
        self._located(c.comm_id, me, pid, dev)
        if not e.send or "IB" not in e.net:  # no QP of ours: the receiving side's, or a socket
            return
        send = _Send(c, e.channel, e.peer)
        if e.proxy_rank == e.rank:
            self._queue(p, dev, e.net_dev, send)
            return
        where = self._where.get((c.comm_id, e.proxy_rank)) or self._where.get(("", e.proxy_rank))
        if where is not None and where[0] in self._procs:
            self._queue(self._procs[where[0]], where[1], e.net_dev, send)
        else:  # the proxy's process has not logged yet
            parked = self._parked.setdefault((c.comm_id, e.proxy_rank), [])
            parked.append((e.net_dev, send))
            if sum(len(v) for v in self._parked.values()) > self.max_sends:
                oldest = next(iter(self._parked))
                self._parked[oldest].pop(0)
                if not self._parked[oldest]:
                    del self._parked[oldest]
                self.forgotten_sends += 1

    def _located(self, comm_id: str, rank: int, pid: int, gpu: int) -> None:
        """Rank ``rank`` of communicator ``comm_id`` runs on ``gpu`` of ``pid``: PXN sends through it go there."""
        if len(self._where) >= 2 * self.tags.max_tags:
            self._where.clear()
        for key in {(comm_id, rank), ("", rank)}:
            self._where[key] = (pid, gpu)
            for net_dev, send in self._parked.pop(key, ()):
                self._queue(self._procs[pid], gpu, net_dev, send)

    def _queue(self, p: _Proc, gpu: int, net_dev: int, send: _Send) -> None:
        """Queue a send for the next QP line of ``net_dev`` on ``gpu``; beyond ``max_sends`` waiting in the process
        the oldest of that device (else of the longest queue) is dropped: its QP line never came."""
        pending = p.gpus.setdefault(gpu, _Gpu()).pending
        queue = pending.setdefault(net_dev, deque())
        if p.queued >= self.max_sends:
            victim = queue if queue else max((q for g in p.gpus.values() for q in g.pending.values()), key=len)
            victim.popleft()
            p.queued -= 1
            self.forgotten_sends += 1
        queue.append(send)
        p.queued += 1

    def _qp(self, pid: int, p: _Proc, dev: int, e: Qp) -> None:
        g = p.gpus.setdefault(dev, _Gpu())
        send = g.last.get(e.net_dev)
        queue = g.pending.get(e.net_dev)
        if queue and (send is None or send.qps >= p.qps_per_connection):
            send = queue.popleft()
            p.queued -= 1
            g.last[e.net_dev] = send
        if send is None:
            if g.current is None:
                return
            tag = QpTag(g.current, -1, -1)
        else:
            send.qps += 1
            tag = QpTag(send.comm, send.channel, send.peer)
        self.tags.hold(p.ib_devs.get(e.ib_dev, ("", 0))[0], pid, e.qpn, tag)

    # -- answers ------------------------------------------------------------------------------------------------

    @property
    def forgotten_qps(self) -> int:
        """QP tags forgotten by ``retain`` because the QP was gone."""
        return self.tags.forgotten_qps

    @property
    def forgotten_tags(self) -> int:
        """QP tags dropped because ``max_tags`` were held between two ``retain`` calls."""
        return self.tags.forgotten_tags

    def retain(self, live_dev: set[tuple[str, int]], live_pid: set[tuple[int, int]]) -> None:
        """Forget the tags of QPs gone from the host's QP listing (``QpTags.retain``)."""
        self.tags.retain(live_dev, live_pid)

    def knows_anything(self) -> bool:
        """False while no ``tag`` or ``traffic_class`` can be anything but None (no NCCL lines yet)."""
        return bool(self._procs or self.tags)

    def tag(self, pid: int, device: str, lqpn: int) -> QpTag | None:
        """The tag of a QP, or a communicator-only tag (channel and peer -1) for a QP of a process
        with exactly one known communicator; None when the log says nothing about it."""
        t = self.tags.get(pid, device, lqpn)
        if t is not None:
            return t
        p = self._procs.get(pid)
        if p is not None and len(p.comms) == 1:
            return QpTag(next(iter(p.comms.values())), -1, -1)
        return None

    def traffic_class(self, pid: int) -> int | None:
        """NCCL_IB_TC of a process (DSCP = TC >> 2), None when the log did not say."""
        p = self._procs.get(pid)
        return None if p is None else p.traffic_class

    def devices(self, pid: int) -> dict[int, tuple[str, int]]:
        """The IB devices a process named in ``NET/IB : Using``: index -> (RDMA device, port)."""
        p = self._procs.get(pid)
        return {} if p is None else dict(p.ib_devs)
