"""Collective profiles: one host's NCCL COLL log lines aggregated per job, communicator, operation and size.

``CollectiveProfiler.call`` takes one parsed COLL line (``sources.nccl_log`` calls it); ``take`` returns the
window's ``CollectiveProfile`` messages and starts the next window. Per (job, communicator, operation,
datatype, count) a window reports:

* ``calls``: the most lines any one local rank (process and rank) logged: each rank of a communicator logs
  every call, so 8 local ranks of one AllReduce are one call, not eight;
* ``call_bytes``: the call's size as nccl-tests counts it, ``count`` x the datatype's size (``DTYPE_BYTES``),
  times nranks for AllGather and ReduceScatter, whose logged count is per rank;
* ``ranks`` (local ranks that logged), ``peers`` (Send / Recv: the ``root`` field is the peer);
* with timestamped lines: the first and last call's time, and an ESTIMATE of the time the calls took. NCCL
  logs a call when it is enqueued, never when it ends, so a rank's call is given the interval until that
  rank's next call on the same communicator (lines of one instant share it, in proportion to their bytes).
  That interval holds the call and whatever the rank did before its next call (compute), so the algorithm
  bandwidth ``call_bytes x timed_calls / timed_ns`` is a lower bound and the bus bandwidth is that x NCCL's
  factor (``BUS_FACTOR``). An interval counts in the window in which it closes (when the next call is read);
  a communicator's last call before a pause stays open until its next call, and is never timed if none comes.

Pure: no I/O; ``job_of`` maps a logging pid to its job (the agent's pid -> job table of the window).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from flowtracer.schemas.bounds import MAX_PROFILES
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import flows_pb2 as pb

#: Element size in bytes of each ncclDataType_t (nccl.h): Int8 0, Uint8 1, Int32 2, Uint32 3, Int64 4, Uint64 5,
#: Float16 6, Float32 7, Float64 8, Bfloat16 9, Float8e4m3 10, Float8e5m2 11. Another value: size 0 (unknown).
DTYPE_BYTES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}
#: Operations whose logged count is per rank (the call moves nranks x count elements).
PER_RANK_COUNT = frozenset({"AllGather", "ReduceScatter"})
MAX_OPEN = 1 << 16
"""Ranks whose last call is remembered for timing (the oldest is forgotten first)."""


def bus_factor(operation: str, nranks: int) -> float:
    """NCCL's bus bandwidth factor (nccl-tests doc/PERFORMANCE.md): AllReduce 2(n-1)/n, AllGather and
    ReduceScatter (n-1)/n, every other operation 1."""
    if nranks < 1:
        return 1.0
    if operation == "AllReduce":
        return 2 * (nranks - 1) / nranks
    if operation in PER_RANK_COUNT:
        return (nranks - 1) / nranks
    return 1.0


def call_bytes(operation: str, count: int, datatype: int, nranks: int) -> int:
    """Bytes of one call as nccl-tests counts them (0 for an unknown datatype)."""
    b = count * DTYPE_BYTES.get(datatype, 0)
    return b * max(nranks, 1) if operation in PER_RANK_COUNT else b


@dataclass(frozen=True, slots=True)
class _Key:
    pid: int
    rank: int
    comm_id: str
    operation: str
    datatype: int
    count: int
    nranks: int


@dataclass(slots=True)
class _Stats:
    lines: int = 0
    peers: set[int] = field(default_factory=set)
    first_ns: int = 0
    last_ns: int = 0
    timed_calls: int = 0
    timed_ns: float = 0.0


@dataclass(slots=True)
class _Open:
    """A rank's calls at its latest timestamp on one communicator, waiting for the next call to time them."""

    t_ns: int
    lines: dict[_Key, int] = field(default_factory=dict)


class CollectiveProfiler:
    """The window's COLL lines of one host, by (pid, rank, communicator, operation, datatype, count)."""

    def __init__(self, max_open: int = MAX_OPEN, max_keys: int = MAX_PROFILES) -> None:
        self.max_open = max_open
        #: (pid, rank, communicator, operation, datatype, count) keys aggregated per window; a call of a new key
        #: beyond them is dropped (counted in ``dropped``): the window's profiles stay within what the processor
        #: accepts (``MAX_PROFILES``).
        self.max_keys = max_keys
        #: Calls dropped because the window already held ``max_keys`` keys (cumulative).
        self.dropped = 0
        self._stats: dict[_Key, _Stats] = {}
        self._open: dict[tuple[int, int, str], _Open] = {}  # (pid, rank, comm) -> its latest calls
        #: COLL lines seen, in total.
        self.lines = 0

    def call(self, pid: int, rank: int, comm_id: str, operation: str, count: int, datatype: int, root: int,
             nranks: int, t_ns: int) -> None:
        """One COLL line: ``t_ns`` its timestamp (ns since the epoch; 0 when the line has none)."""
        self.lines += 1
        key = _Key(pid, rank, comm_id, operation, datatype, count, nranks)
        s = self._stats.get(key)
        if s is None:
            if len(self._stats) >= self.max_keys:
                self.dropped += 1
                return
            s = self._stats[key] = _Stats()
        s.lines += 1
        if operation in ("Send", "Recv") and root >= 0:
            s.peers.add(root)
        if not t_ns:
            return
        s.first_ns = min(s.first_ns, t_ns) if s.first_ns else t_ns
        s.last_ns = max(s.last_ns, t_ns)
        rk = (pid, rank, comm_id)
        o = self._open.get(rk)
        if o is not None and o.t_ns == t_ns:
            o.lines[key] = o.lines.get(key, 0) + 1
            return
        if o is not None and t_ns > o.t_ns:
            self._close(o, t_ns - o.t_ns)
        self._open.pop(rk, None)  # re-inserted last: the oldest rank is forgotten first
        if len(self._open) >= self.max_open:
            del self._open[next(iter(self._open))]
        self._open[rk] = _Open(t_ns, {key: 1})

    def _close(self, o: _Open, interval_ns: int) -> None:
        """Time the calls of ``o`` by the ``interval_ns`` until the rank's next call, shared by bytes."""
        weights = {k: n * max(call_bytes(k.operation, k.count, k.datatype, k.nranks), 1) for k, n in o.lines.items()}
        total = sum(weights.values())
        for k, n in o.lines.items():
            s = self._stats.get(k)
            if s is None:
                if len(self._stats) >= self.max_keys:
                    self.dropped += n
                    continue
                s = self._stats[k] = _Stats()
            s.timed_calls += n
            s.timed_ns += interval_ns * weights[k] / total

    def take(self, host: str, job_of: Callable[[int], str], start_ns: int, end_ns: int) -> list[pb.CollectiveProfile]:
        """The window's profiles, sorted by (job, communicator, operation, datatype, count); starts the next window."""
        groups: dict[tuple[str, str, str, int, int, int], list[tuple[_Key, _Stats]]] = {}
        for k, s in self._stats.items():
            groups.setdefault((job_of(k.pid), k.comm_id, k.operation, k.datatype, k.count, k.nranks), []).append((k, s))
        self._stats = {}
        out = []
        for (job, comm, op, dt, count, nranks), members in sorted(groups.items()):
            per_rank: dict[tuple[int, int], int] = {}
            peers: set[int] = set()
            firsts, lasts = [], []
            timed_calls, timed_ns = 0, 0.0
            for k, s in members:
                per_rank[(k.pid, k.rank)] = per_rank.get((k.pid, k.rank), 0) + s.lines
                peers |= s.peers
                if s.first_ns:
                    firsts.append(s.first_ns)
                    lasts.append(s.last_ns)
                timed_calls += s.timed_calls
                timed_ns += s.timed_ns
            size = call_bytes(op, count, dt, nranks)
            algbw = size * timed_calls / (timed_ns / 1e9) if timed_ns > 0 else 0.0
            out.append(pb.CollectiveProfile(
                schema_version=SCHEMA_VERSION, window_start_ns=start_ns, window_end_ns=end_ns, host=host, job_id=job,
                comm_id=comm, operation=op, datatype=dt, datatype_bytes=DTYPE_BYTES.get(dt, 0), count=count,
                call_bytes=size, calls=max(per_rank.values()), nranks=nranks,
                ranks=sorted({r for _, r in per_rank if r >= 0}), peers=sorted(peers),
                first_call_ns=min(firsts, default=0), last_call_ns=max(lasts, default=0), timed_calls=timed_calls,
                timed_ns=round(timed_ns), algo_bw_bytes_per_s=algbw, bus_bw_bytes_per_s=algbw * bus_factor(op, nranks)))
        return out
