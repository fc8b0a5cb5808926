"""One training job as the engine runs it: communicator life cycle, compute gaps, collective ops.

A job iterates: compute for ``compute_gap`` (times the slowest node's ``compute_scale``), then
runs its ops one after the other. An op starts the transfers ``collectives.op_sets`` describes and
ends when the last of them has finished (and at least ``op_latency`` after it started), so a
collective is exactly as slow as its most congested coupled set. Connections (QP pairs) are made
the first time a pattern needs them, as NCCL's runtime connect does, and live until the
communicator is destroyed (``recreate_every``, or the end of ``iterations``).

A job on a single node puts nothing on the fabric (NVLink only): it logs its communicator's
creation and then idles. The job talks to the engine through ``JobEnv``; everything it logs goes to the NCCL logs of the
hosts of its ranks (formats: ``nccl_log``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol

from flowtracer.sim.fabric.collectives import (
    NCCL_OP_NAMES,
    Algorithm,
    Collective,
    Conn,
    CoupledSet,
    dtree_parents,
    op_sets,
)
from flowtracer.sim.fabric.rdma import NicEnd, QpPair
from flowtracer.sim.fabric.workload import Job
from flowtracer.sim.hosts import nccl_log

#: PCI bus ids of the 8 GPUs of a typical HGX board, for log lines.
_BUS_IDS = (0x18000, 0x2A000, 0x3A000, 0x5D000, 0x9A000, 0xAB000, 0xBA000, 0xDB000)
COMM_NAME = "python3"


class JobEnv(Protocol):
    """What a job needs from the engine."""

    mtu: int
    coll_log: bool

    def open_pairs(self, src: NicEnd, dst: NicEnd, count: int, a_pid: int, b_pid: int, t_ns: int,
                   meta: dict[str, object]) -> list[QpPair]: ...

    def close_pairs(self, pairs: Sequence[QpPair], t_ns: int) -> None: ...

    def start_transfer(self, pairs: Sequence[QpPair], bytes_per_qp: int, on_done: Callable[[int], None]) -> None: ...

    def log(self, host: str, lines: Sequence[str]) -> None: ...

    def iteration_done(self, job: str, iteration: int, t_ns: int) -> None: ...


class JobRun:
    """State machine of one job. ``timer_ns`` is when it next needs ``poll`` (None: waiting on transfers)."""

    def __init__(self, spec: Job, nics: list[list[NicEnd]], compute_scale: float, rng: random.Random,
                 env: JobEnv, start_ns: int) -> None:
        self.spec = spec
        self.nics = nics  # nics[node][rail]
        self.nodes = len(nics)
        self.rails = len(nics[0])
        self.nranks = self.nodes * self.rails
        self.rng = rng
        self.env = env
        self.compute_ns = round(spec.compute_gap * compute_scale * 1e9)
        self.latency_ns = round(spec.op_latency * 1e9)
        self.state = "waiting"
        self.timer_ns: int | None = start_ns + round(spec.start * 1e9)
        self.iteration = 0
        self.op_index = 0
        self.op_count = 0  # NCCL opCount of the communicator
        self.pending = 0
        self.op_min_end = 0
        self.comm_created_ns = 0
        self.comm_id = 0
        self.conns: dict[Conn, list[QpPair]] = {}
        self.ranks: dict[tuple[int, int], nccl_log.RankInfo] = {}
        self.buffers: dict[tuple[int, int], tuple[int, int, int]] = {}
        self._sets = [op_sets(op.collective, op.algorithm, op.size, self.nodes, self.rails, spec.channels,
                              spec.qps_per_connection) for op in spec.ops]
        self.finished = False
        self._trees_logged = False
        self._op_pairs: dict[int, list[list[QpPair]]] = {}

    def rank(self, node: int, rail: int) -> int:
        return node * self.rails + rail

    # -- driving ----------------------------------------------------------------------------------

    def poll(self, now_ns: int) -> None:
        """Advance through every transition due at ``now_ns``."""
        for _ in range(1000):  # transitions at one instant are few; the bound guards against a loop
            if self.timer_ns is not None and self.timer_ns <= now_ns:
                self.timer_ns = None
                self._on_timer(now_ns)
            elif self.state == "op" and self.pending == 0:
                if now_ns < self.op_min_end:
                    self.timer_ns = self.op_min_end
                    return
                self._next_op(now_ns)
            else:
                return

    def _on_timer(self, now_ns: int) -> None:
        if self.state == "waiting":
            self._create_comm(now_ns)
            if not any(self._sets):  # one node: everything rides NVLink, nothing to simulate
                self.state, self.finished = "idle", True
                return
            self._begin_iteration(now_ns)
        elif self.state == "compute":
            self.op_index = 0
            self._start_op(now_ns)

    def _begin_iteration(self, now_ns: int) -> None:
        self.state = "compute"
        self.timer_ns = now_ns + self.compute_ns

    def _next_op(self, now_ns: int) -> None:
        self.op_index += 1
        if self.op_index < len(self.spec.ops):
            self._start_op(now_ns)
            return
        self.iteration += 1
        self.env.iteration_done(self.spec.name, self.iteration, now_ns)
        if self.spec.iterations is not None and self.iteration >= self.spec.iterations:
            self._destroy_comm(now_ns)
            self.state, self.finished, self.timer_ns = "done", True, None
            return
        if self.spec.recreate_every is not None and now_ns - self.comm_created_ns >= self.spec.recreate_every * 1e9:
            self._destroy_comm(now_ns)
            self._create_comm(now_ns)
        self._begin_iteration(now_ns)

    def _transfer_done(self, now_ns: int) -> None:
        self.pending -= 1

    # -- ops --------------------------------------------------------------------------------------

    def _start_op(self, now_ns: int) -> None:
        op = self.spec.ops[self.op_index]
        sets: list[CoupledSet] = self._sets[self.op_index]
        self.state = "op"
        self.op_min_end = now_ns + self.latency_ns
        self._log_coll(op.collective, op.size, op.count, op.dtype, now_ns)
        self.pending = len(sets)
        if self.op_index not in self._op_pairs:  # connect once per communicator, then reuse
            self._op_pairs[self.op_index] = [[p for conn in s.conns for p in self._connect(conn, now_ns)]
                                             for s in sets]
        for s, pairs in zip(sets, self._op_pairs[self.op_index], strict=True):
            self.env.start_transfer(pairs, s.bytes_per_qp * op.count, self._transfer_done)
        if op.algorithm is Algorithm.TREE and not self._trees_logged:
            self._log_trees(now_ns)

    def _connect(self, conn: Conn, now_ns: int) -> list[QpPair]:
        if conn in self.conns:
            return self.conns[conn]
        src, dst = self.nics[conn.src_node][conn.rail], self.nics[conn.dst_node][conn.rail]
        rs, rd = self.ranks[(conn.src_node, conn.rail)], self.ranks[(conn.dst_node, conn.rail)]
        ch = self._log_channel(conn)
        meta: dict[str, object] = {"job": self.spec.name, "kind": conn.kind, "channel": ch, "a_rank": rs.rank,
                                   "b_rank": rd.rank, "comm_id": self.comm_id}
        pairs = self.env.open_pairs(src, dst, self.spec.qps_per_connection, rs.pid, rd.pid, now_ns, meta)
        self.conns[conn] = pairs
        self._log(now_ns, src.host, [nccl_log.channel_line(rs, ch, rs.rank, rs.cuda_dev, rd.rank, rd.cuda_dev, True,
                                                       conn.rail)])
        self._log(now_ns, dst.host, [nccl_log.channel_line(rd, ch, rs.rank, rs.cuda_dev, rd.rank, rd.cuda_dev, False,
                                                       conn.rail)])
        lines: list[str] = []
        for p in pairs:
            lines += nccl_log.qp_lines(rs, conn.rail, p.a_qpn, p.b_qpn, self.env.mtu, src.ip,
                                       self.rng.randrange(0x1000, 0xFFFFFF))
        self._log(now_ns, src.host, lines)
        return pairs

    def _log_channel(self, conn: Conn) -> int:
        """NCCL channel id of a connection, as the logs number channels (rail-major)."""
        per_rail = 2 * self.spec.channels if conn.kind == "tree" else self.spec.channels
        return conn.rail * per_rail + conn.channel

    # -- communicator -----------------------------------------------------------------------------

    def _create_comm(self, now_ns: int) -> None:
        self.comm_created_ns = now_ns
        self.comm_id = self.rng.getrandbits(64)
        self.conns = {}
        self._op_pairs = {}
        self._trees_logged = False
        devices_of = {node: [n.rdma_device for n in self.nics[node]] for node in range(self.nodes)}
        for node in range(self.nodes):
            for rail in range(self.rails):
                nic = self.nics[node][rail]
                pid = self.rng.randrange(2000, 4_000_000)
                bus = _BUS_IDS[rail % 8] + 0x100000 * (rail // 8)
                info = nccl_log.RankInfo(nic.host, pid, pid + 40 + rail, rail, bus, self.rank(node, rail),
                                         0x55 << 40 | self.rng.getrandbits(36) << 4)
                self.ranks[(node, rail)] = info
                self.buffers[(node, rail)] = (0x7F << 40 | self.rng.getrandbits(28) << 12,
                                              0x7F << 40 | self.rng.getrandbits(28) << 12,
                                              0x55 << 40 | self.rng.getrandbits(36) << 4)
                lines = nccl_log.init_lines(info, self.nranks, self.nodes, self.rails, self.comm_id, nic.netdev,
                                            nic.ip, devices_of[node])
                if info.rank == 0:
                    nch = self.rails * self.spec.channels
                    for ch in range(nch):
                        k = ch // self.spec.channels
                        order = [self.rank(i, (k + m) % self.rails) for i in range(self.nodes)
                                 for m in range(self.rails)]
                        lines.append(nccl_log.ring_dump(info, ch, nch, order))
                lines.append(nccl_log.init_complete(info, self.nranks, self.comm_id))
                self._log(now_ns, nic.host, lines)

    def _destroy_comm(self, now_ns: int) -> None:
        pairs = [p for ps in self.conns.values() for p in ps]
        self.env.close_pairs(pairs, now_ns)
        self.conns = {}
        self._op_pairs = {}
        for (node, rail), info in self.ranks.items():
            self._log(now_ns, self.nics[node][rail].host, [nccl_log.destroy_line(info, self.nranks)])

    # -- logs -------------------------------------------------------------------------------------

    def _log(self, now_ns: int, host: str, lines: Sequence[str]) -> None:
        """Append ``lines`` to ``host``'s NCCL log, each with NCCL's timestamp prefix of ``now_ns`` (ns since the
        epoch), as NCCL_DEBUG_TIMESTAMP_LEVELS=INFO writes them."""
        stamp = nccl_log.timestamp(now_ns)
        self.env.log(host, [stamp + line for line in lines])

    def _log_coll(self, collective: Collective, size: int, count: int, dtype: str, now_ns: int) -> None:
        if not self.env.coll_log:
            self.op_count += count
            return
        dt, width = nccl_log.DTYPES[dtype]
        by_host: dict[str, list[str]] = {}
        for _ in range(count):
            for (node, rail), info in self.ranks.items():
                send, recv, stream = self.buffers[(node, rail)]
                out = by_host.setdefault(info.host, [])
                if collective in NCCL_OP_NAMES:
                    elems = size // width
                    if collective is not Collective.ALLREDUCE:
                        elems //= self.nranks  # all-gather: sendcount; reduce-scatter: recvcount
                    out.append(nccl_log.coll_line(info, NCCL_OP_NAMES[collective], self.op_count, send, recv,
                                                  elems, dt, 0, self.nranks, stream))
                    continue
                peers = self._p2p_peers(collective, node, rail)
                elems = size // width // (self.nranks if collective is Collective.ALLTOALL else 1)
                for peer in peers:
                    out.append(nccl_log.coll_line(info, "Send", self.op_count, send, recv, elems, dt, peer,
                                                  self.nranks, stream))
                    out.append(nccl_log.coll_line(info, "Recv", self.op_count, send, recv, elems, dt, peer,
                                                  self.nranks, stream))
            self.op_count += 1
        for host, lines in by_host.items():
            self._log(now_ns, host, lines)

    def _p2p_peers(self, collective: Collective, node: int, rail: int) -> list[int]:
        me = self.rank(node, rail)
        if collective is Collective.ALLTOALL:
            return [r for r in range(self.nranks) if r != me]
        return [self.rank(n, rail) for n in (node - 1, node + 1) if 0 <= n < self.nodes]

    def _log_trees(self, now_ns: int) -> None:
        self._trees_logged = True
        parents = dtree_parents(self.nodes)
        for (node, rail), info in self.ranks.items():
            trees = []
            for _j in range(self.spec.channels):
                for parent in parents:
                    kids = [self.rank(c, rail) for c, p in enumerate(parent) if p == node][:3]
                    kids += [-1] * (3 - len(kids))
                    up = self.rank(parent[node], rail) if parent[node] >= 0 else -1
                    trees.append((kids[0], kids[1], kids[2], up))
            self._log(now_ns, info.host, [nccl_log.trees_line(info, trees)])
