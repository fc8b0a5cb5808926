"""Parser for NCCL_DEBUG=INFO logs: which communicator, rank, channel and collective a QP serves.

NCCL prefixes every INFO line with ``host:pid:tid [cudaDev] NCCL INFO `` (``src/debug.cc``; from 2.23 a
``[timestamp] `` may come before it, NCCL_DEBUG_TIMESTAMP_FORMAT / _LEVELS: a ``[YYYY-MM-DD HH:MM:SS(.frac)]``
one is read as UTC, any other is ignored). The lines used here, verbatim formats from NCCL:

* ``NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>``
  (transport/net_ib: IB device index -> RDMA device and port);
* ``comm 0x55d0c2a0 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0`` (init starts);
* ``ncclCommInitRank comm 0x55d0c2a0 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 3d000
  commId 0x8a2d1c4e5f6a7b8c - Init START`` and ``... - Init COMPLETE`` (older: without the
  function name), ``comm 0x55d0c2a0 rank 3 nranks 16 cudaDev 3 busId 3d000 - Destroy COMPLETE``;
* ``Channel 02/0 : 3[3] -> 11[3] [send] via NET/IB/1/GDRDMA`` (older: ``Channel 02 : 3[3d000] -> ...``);
* ``NET/IB: NCCL Dev 1 IbDev 1 Port 1 qpn 4711 mtu 5 GID 3 (0/...) fifoRkey=0x.. fifoLkey=0x..``
  (printed by ``ncclIbConnect`` on the sending side, once per QP it created);
* ``AllReduce: opCount 1f sendbuff 0x.. recvbuff 0x.. count 262144 datatype 7 op 0 root 0
  comm 0x55d0c2a0 [nranks=16] stream 0x..`` (NCCL_DEBUG_SUBSYS including COLL);
* ``NCCL_IB_TC set by environment to 106.`` (traffic class of the process's QPs; DSCP = TC >> 2).

Correlation, as far as the log allows (documented in docs/agent.md): a process's Channel [send]
lines queue per NCCL net device; each ``NET/IB ... qpn`` line of that device takes the oldest
queued send, which is the order ``ncclTransportP2pSetup`` sets up and then connects them. Channel
lines belong to the communicator the process last initialised or last enqueued a collective on.
This assumes NCCL_IB_QPS_PER_CONNECTION=1 (the default); extra QPs of one connection are given
the tag of the last connection of that device.

Bounded: at most ``max_pids`` processes are remembered (the least recently logging one is
forgotten first, counted in ``forgotten_pids``; a host that starts 20,000 short-lived processes keeps
at most that many), and ``retain(live_dev, live_pid)``, called with the QPs of each window's
``rdma`` listing, forgets the tags of QPs that are gone, so a later QP that reuses the number is not
given a stale tag. A tag learned since the previous ``retain`` is kept one more call: its QP may have
been created after the listing was taken.

Every COLL line also goes to ``on_call`` (the agent's ``collective_profile.CollectiveProfiler.call``) with
the line's pid, the communicator's rank and id, the operation, count, datatype, root, nranks and timestamp (ns
since the epoch, 0 without one).

Pure: ``NcclLog.feed(lines)`` updates the state; nothing here reads files.

Why one module over 400 lines: the line formats, the bounds every number they give must keep (a line beyond is one
malformed line, never a value that later overflows a protobuf field) and the bounded per-process state they feed
are one parser; split, each part would have to know the others' rules.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from flowtracer.collectors.agent.collective_profile import call_bytes
from flowtracer.collectors.agent.sources.rdma_json import PID_MAX, QPN_MASK
from flowtracer.schemas.bounds import INT64_MAX, MAX_CALL_BYTES, MAX_NRANKS, bounded_int

log = logging.getLogger(__name__)

_PREFIX = re.compile(r"^(?:\[([^\]]*)\]\s*)?([^\s:]+):(\d+):(\d+) \[(-?\d+)\] NCCL INFO (.*)$")
_USING = re.compile(r"^NET/IB : Using((?: \[\d+\][^\s:]+:\d+/\w+)*)")
_USING_DEV = re.compile(r"\[(\d+)\]([^\s:]+):(\d+)/(\w+)")
_COMM_START = re.compile(r"^comm (0x[0-9a-fA-F]+) rank (\d+) nRanks (\d+)\b")
_INIT = re.compile(r"^(?:\w+ )?comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) "
                   r".*?- (Init START|Init COMPLETE|Destroy COMPLETE)$")
_COMM_ID = re.compile(r"\bcommId (0x[0-9a-fA-F]+)\b")
_CHANNEL = re.compile(r"^Channel (\d+)(?:/\d+)? : (\d+)\[[0-9a-fA-F]+\] -> (\d+)\[[0-9a-fA-F]+\] "
                      r"\[(send|receive)\] via NET/[^/\s]+/(\d+)")
_QPN = re.compile(r"^NET/IB: NCCL (?:Merged)?Dev (\d+) IbDev (\d+) Port (\d+) qpn (\d+) mtu (\d+)")
_COLL = re.compile(r"^(\w+): opCount ([0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) "
                   r"op (\d+) root (-?\d+) comm (0x[0-9a-fA-F]+) \[nranks=(\d+)\]")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?$")
_TC = re.compile(r"^NCCL_IB_TC set by environment to (\d+)")

# Messages this parser claims: a line that starts like one of them but does not parse is malformed.
_CLAIMED = ("NET/IB : Using", "comm 0x", "Channel ", "NET/IB: NCCL ")
MAX_PIDS = 4096
"""Processes remembered at once (``NcclLog.max_pids``)."""
MAX_CHANNEL = 1 << 16
"""Channels and ports a line may name (NCCL has at most 64 channels)."""
MAX_NET_DEVS = 1024
"""NCCL net and IB device indices a line may name (NCCL drives at most a few dozen NICs per process)."""
MAX_COMMS = 1024
"""Communicators remembered per process (``NcclLog.max_comms``); the least recently used is forgotten first."""
MAX_SENDS = 8192
"""Channel [send] lines per process waiting for their QP line (``NcclLog.max_sends``); the oldest goes first."""
MAX_TAGS = 1 << 16
"""QP tags held per host between two ``retain`` calls (``NcclLog.max_tags``); the oldest goes first."""
#: What ``NcclLog`` tells of each COLL line: pid, rank, comm id, operation, count, datatype, root, nranks, t_ns.
CallSink = Callable[[int, int, str, str, int, int, int, int, int], None]


def timestamp_ns(text: str | None, cache: dict[str, int]) -> int:
    """ns since the epoch of NCCL's ``YYYY-MM-DD HH:MM:SS[.frac]`` timestamp (read as UTC), 0 when ``text`` is
    None or another format. ``cache`` holds the seconds already converted (lines of one second share them)."""
    if not text:
        return 0
    m = _STAMP.match(text)
    if m is None:
        return 0
    sec = cache.get(m.group(1))
    if sec is None:
        try:
            sec = int(datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC).timestamp())
        except ValueError:  # month 13 and the like
            return 0
        if len(cache) > 4096:
            cache.clear()
        cache[m.group(1)] = sec
    frac = m.group(2) or ""
    return sec * 1_000_000_000 + int(frac.ljust(9, "0")) if frac else sec * 1_000_000_000

def _int(text: str, high: int, low: int = 0) -> int:
    """The decimal number ``text`` within [``low``, ``high``]; ValueError (the line is malformed) otherwise. Every
    number the parser keeps goes through here: a line of 2^64 or a thousand digits is one bad line, never a value
    that later overflows a protobuf field and takes the agent down."""
    n = bounded_int(text, low, high)
    if n is None:
        raise ValueError(f"{text[:32]!r} is outside [{low}, {high}]")
    return n


def _hex(text: str, high: int) -> int:
    """The hex number ``text`` within [0, ``high``]; ValueError otherwise."""
    if len(text) > len(f"{high:x}") or int(text, 16) > high:
        raise ValueError(f"0x{text[:32]} is above {high:#x}")
    return int(text, 16)


@dataclass(slots=True)
class CommInfo:
    """One communicator as seen by one process."""

    pointer: str
    rank: int
    nranks: int
    comm_id: str = ""  # commId hash from "Init COMPLETE"; "" until seen
    collective: str = ""  # last collective enqueued (AllReduce, ...), "" before the first
    op_count: int = 0

    @property
    def id(self) -> str:
        """The id to report: NCCL's commId hash, or the comm pointer when NCCL did not log one."""
        return self.comm_id or self.pointer


@dataclass(frozen=True, slots=True)
class QpTag:
    """What the log says one QP is for. ``peer_rank`` / ``channel`` are -1 when unknown."""

    comm: CommInfo
    channel: int
    peer_rank: int


@dataclass(slots=True)
class _Send:
    comm: CommInfo | None
    channel: int
    rank: int
    peer: int


@dataclass(slots=True)
class _Proc:
    ib_devs: dict[int, tuple[str, int]] = field(default_factory=dict)
    comms: dict[str, CommInfo] = field(default_factory=dict)  # by pointer, least recently used first
    current: CommInfo | None = None
    pending: dict[int, deque[_Send]] = field(default_factory=dict)  # by NCCL net device
    queued: int = 0  # sends in ``pending``
    last: dict[int, _Send] = field(default_factory=dict)
    traffic_class: int | None = None


class NcclLog:
    """Accumulated knowledge from one host's NCCL INFO lines (one or many processes).

    ``feed`` lines in log order; ``tag(pid, device, lqpn)`` answers for a QP of ``rdma res show
    qp``. ``malformed`` counts claimed lines that did not parse (never raises on input).
    """

    def __init__(self, max_pids: int = MAX_PIDS, on_call: CallSink | None = None, max_comms: int = MAX_COMMS,
                 max_sends: int = MAX_SENDS, max_tags: int = MAX_TAGS) -> None:
        for name, v in (("max_pids", max_pids), ("max_comms", max_comms), ("max_sends", max_sends),
                        ("max_tags", max_tags)):
            if v < 1:
                raise ValueError(f"{name} must be at least 1, not {v}")
        self.max_pids = max_pids
        self.max_comms, self.max_sends, self.max_tags = max_comms, max_sends, max_tags
        self.on_call = on_call
        self._seconds: dict[str, int] = {}
        self._procs: dict[int, _Proc] = {}  # least recently logging first
        self._by_dev: dict[tuple[str, int], QpTag] = {}  # (device, qpn): unique on a host at a time
        self._by_pid: dict[tuple[int, int], QpTag] = {}  # (pid, qpn): when the device is not known
        self._pid_qpns: dict[int, set[int]] = {}  # pid -> qpns in _by_pid
        self._fresh_dev: set[tuple[str, int]] = set()  # learned since the last retain
        self._fresh_pid: set[tuple[int, int]] = set()
        self.malformed = 0
        self.lines = 0
        #: While True, COLL lines teach communicators but are not calls (``on_call``): a log's history.
        self.history = False
        #: Processes forgotten because more than ``max_pids`` logged.
        self.forgotten_pids = 0
        #: QP tags forgotten by ``retain`` because the QP was gone.
        self.forgotten_qps = 0
        #: Communicators forgotten because a process had more than ``max_comms``.
        self.forgotten_comms = 0
        #: Channel [send] lines dropped because a process had ``max_sends`` waiting for their QP line.
        self.forgotten_sends = 0
        #: QP tags dropped because ``max_tags`` were held between two ``retain`` calls.
        self.forgotten_tags = 0

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
        for qpn in self._pid_qpns.pop(pid, ()):
            self._by_pid.pop((pid, qpn), None)
            self._fresh_pid.discard((pid, qpn))
        self.forgotten_pids += 1

    def retain(self, live_dev: set[tuple[str, int]], live_pid: set[tuple[int, int]]) -> None:
        """Forget the tags of QPs gone from the host's QP listing: ``live_dev`` holds its (device,
        qpn), ``live_pid`` its (pid, qpn). Tags learned since the previous call are kept once more."""
        for key in [k for k in self._by_dev if k not in live_dev and k not in self._fresh_dev]:
            del self._by_dev[key]
            self.forgotten_qps += 1
        for key in [k for k in self._by_pid if k not in live_pid and k not in self._fresh_pid]:
            del self._by_pid[key]
            qpns = self._pid_qpns.get(key[0])
            if qpns is not None:
                qpns.discard(key[1])
                if not qpns:
                    del self._pid_qpns[key[0]]
        self._fresh_dev.clear()
        self._fresh_pid.clear()

    def _comm(self, p: _Proc, pointer: str, rank: int, nranks: int) -> CommInfo:
        c = p.comms.pop(pointer, None)
        if c is None or c.rank != rank or c.nranks != nranks:
            c = CommInfo(pointer, rank, nranks)  # new, or a freed pointer reused by a new comm
        return self._keep_comm(p, c)

    def _keep_comm(self, p: _Proc, c: CommInfo) -> CommInfo:
        """``c`` as ``p``'s most recently used communicator, the least recently used forgotten beyond
        ``max_comms`` (a process that creates communicators without destroying them)."""
        p.comms.pop(c.pointer, None)
        if len(p.comms) >= self.max_comms:
            del p.comms[next(iter(p.comms))]
            self.forgotten_comms += 1
        p.comms[c.pointer] = c
        return c

    def feed(self, lines: list[str], where: str = "", first_line: int = 1, history: bool = False) -> None:
        """Consume log lines (with or without trailing newlines): ``lines[i]`` is line ``first_line + i`` of
        ``where`` (a file name, for the log). ``history``: lines the log held before the agent first read it
        (``log_tail.LogChunk.history``): they teach communicators and QPs, but their COLL lines are not calls of
        this window and their malformed lines are not counted again. Never raises: a line that does not parse,
        whose numbers are out of bounds or that trips a bug here is skipped and counted in ``malformed``; the
        first is logged with its ``file:line``."""
        self.history = history
        try:
            for i, line in enumerate(lines):
                self.lines += 1
                if "NCCL INFO" not in line:
                    continue
                m = _PREFIX.match(line.rstrip("\r\n"))
                try:
                    ok = m is not None and self._message(_int(m.group(3), PID_MAX), m.group(6), m.group(1))
                    why = "does not parse"
                except ValueError as e:  # a number out of its bounds (``_int``): one bad line, not a dead agent
                    ok, why = False, str(e)
                except Exception as e:  # the boundary: a bug on one line costs that line
                    ok, why = False, f"{type(e).__name__}: {e}"
                if not ok and not history:
                    self.malformed += 1
                    if self.malformed == 1:
                        log.warning("%s:%d: NCCL log line skipped (%s), counted as malformed; further ones are only "
                                    "counted (flowtracer_agent_malformed_records_total): %.200r",
                                    where or "NCCL log", first_line + i, why, line)
        finally:
            self.history = False

    def _message(self, pid: int, msg: str, stamp: str | None = None) -> bool:
        """Apply one message (``stamp``: the line's timestamp text, if any); False when it is one of ours but does
        not parse."""
        if msg.startswith("Channel "):
            m = _CHANNEL.match(msg)
            if m is None:
                return "via NET/" not in msg  # P2P / SHM channels are not ours
            if m.group(4) == "send":
                send = _Send(None, _int(m.group(1), MAX_CHANNEL), _int(m.group(2), MAX_NRANKS),
                             _int(m.group(3), MAX_NRANKS))
                p = self._proc(pid)
                send.comm = p.current
                self._queue(p, _int(m.group(5), MAX_NET_DEVS), send)
            return True
        if msg.startswith("NET/IB: NCCL "):
            m = _QPN.match(msg)
            if m is None:
                return False
            self._qpn(pid, _int(m.group(1), MAX_NET_DEVS), _int(m.group(2), MAX_NET_DEVS),
                      _int(m.group(3), MAX_CHANNEL), _int(m.group(4), QPN_MASK))
            return True
        if msg.startswith("comm 0x") or msg.endswith(("Init START", "Init COMPLETE", "Destroy COMPLETE")):
            return self._init(pid, msg)
        if "opCount" in msg:
            m = _COLL.match(msg)
            if m is None:
                return False
            op, op_count, nranks = m.group(1), _hex(m.group(2), INT64_MAX), _int(m.group(8), MAX_NRANKS)
            count, datatype, root = _int(m.group(3), MAX_CALL_BYTES), _int(m.group(4), 255), \
                _int(m.group(6), MAX_NRANKS, -1)
            if call_bytes(op, count, datatype, nranks) > MAX_CALL_BYTES:
                return False  # no GPU holds such a call: a corrupt or forged line
            p = self._proc(pid)
            c = self._keep_comm(p, p.comms.get(m.group(7)) or CommInfo(m.group(7), -1, nranks))
            c.collective, c.op_count = op, op_count
            p.current = c
            if self.on_call is not None and not self.history:
                self.on_call(pid, c.rank, c.id, c.collective, count, datatype, root, nranks,
                             timestamp_ns(stamp, self._seconds))
            return True
        if msg.startswith("NET/IB : Using"):
            m = _USING.match(msg)
            if m is None:
                return False
            devs = self._proc(pid).ib_devs
            for d in _USING_DEV.finditer(m.group(1)):
                devs[_int(d.group(1), MAX_NET_DEVS)] = (d.group(2), _int(d.group(3), MAX_CHANNEL))
            return True
        if msg.startswith("NCCL_IB_TC"):
            m = _TC.match(msg)
            if m is None:
                return False
            self._proc(pid).traffic_class = _int(m.group(1), 255)
            return True
        return not msg.startswith(_CLAIMED)

    def _init(self, pid: int, msg: str) -> bool:
        p = self._proc(pid)
        m = _INIT.match(msg)
        if m is not None:
            if m.group(4) == "Destroy COMPLETE":
                c = p.comms.pop(m.group(1), None)
                if p.current is c:
                    p.current = None
                return True
            c = self._comm(p, m.group(1), _int(m.group(2), MAX_NRANKS), _int(m.group(3), MAX_NRANKS))
            cid = _COMM_ID.search(msg)
            if cid is not None:
                c.comm_id = cid.group(1).lower()
            if m.group(4) == "Init START":
                p.current = c
            return True
        m = _COMM_START.match(msg)
        if m is None:
            return not msg.startswith("comm 0x")
        p.current = self._comm(p, m.group(1), _int(m.group(2), MAX_NRANKS), _int(m.group(3), MAX_NRANKS))
        return True

    def _qpn(self, pid: int, net_dev: int, ib_dev: int, port: int, qpn: int) -> None:
        p = self._proc(pid)
        queue = p.pending.get(net_dev)
        if queue:
            send = queue.popleft()
            p.queued -= 1
            p.last[net_dev] = send
        else:
            send = p.last.get(net_dev)  # another QP of the last connection (QPS_PER_CONNECTION > 1)
        comm = send.comm if send is not None and send.comm is not None else p.current
        if comm is None:
            return
        tag = QpTag(comm, send.channel if send else -1, send.peer if send else -1)
        device = p.ib_devs.get(ib_dev, ("", port))[0]
        if device:
            if len(self._by_dev) >= self.max_tags and (device, qpn) not in self._by_dev:
                old = next(iter(self._by_dev))
                del self._by_dev[old]
                self._fresh_dev.discard(old)
                self.forgotten_tags += 1
            self._by_dev[(device, qpn)] = tag
            self._fresh_dev.add((device, qpn))
        if len(self._by_pid) >= self.max_tags and (pid, qpn) not in self._by_pid:
            old_pid, old_qpn = old = next(iter(self._by_pid))
            del self._by_pid[old]
            self._fresh_pid.discard(old)
            qpns = self._pid_qpns.get(old_pid)
            if qpns is not None:
                qpns.discard(old_qpn)
                if not qpns:
                    del self._pid_qpns[old_pid]
            self.forgotten_tags += 1
        self._by_pid[(pid, qpn)] = tag
        self._fresh_pid.add((pid, qpn))
        self._pid_qpns.setdefault(pid, set()).add(qpn)

    def _queue(self, p: _Proc, net_dev: int, send: _Send) -> None:
        """Queue a Channel [send] line for the next QP line of its net device; beyond ``max_sends`` waiting in the
        process the oldest of that device (else of the longest queue) is dropped: its QP line never came."""
        queue = p.pending.setdefault(net_dev, deque())
        if p.queued >= self.max_sends:
            victim = queue if queue else max(p.pending.values(), key=len)
            victim.popleft()
            p.queued -= 1
            self.forgotten_sends += 1
        queue.append(send)
        p.queued += 1

    def knows_anything(self) -> bool:
        """False while no ``tag`` or ``traffic_class`` can be anything but None (no NCCL lines yet)."""
        return bool(self._procs or self._by_dev or self._by_pid)

    def tag(self, pid: int, device: str, lqpn: int) -> QpTag | None:
        """The tag of a QP, or a communicator-only tag (channel and peer -1) for a QP of a process
        with exactly one known communicator; None when the log says nothing about it."""
        # By device first: the log's pid is the one in NCCL's pid namespace, which may differ from
        # the pid rdma shows when NCCL runs in a container.
        t = self._by_dev.get((device, lqpn)) or self._by_pid.get((pid, lqpn))
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
