"""NCCL_DEBUG=INFO lines as NCCL 2.21 prints them, for the simulated hosts' NCCL logs.

Every line has NCCL's prefix ``<hostname>:<pid>:<tid> [<cudaDev>] NCCL INFO <message>``, after the timestamp
NCCL (2.23 and later) writes with ``NCCL_DEBUG_TIMESTAMP_LEVELS=INFO`` and ``NCCL_DEBUG_TIMESTAMP_FORMAT="[%F
%T.%6f] "`` (``timestamp``: local time, as NCCL's ``localtime_r``, microseconds; the jobs add it with the
simulated time of the event). We emit,
per rank, the init block (``NCCL version`` on rank 0, ``NCCL_IB_TC set by environment to 106.``,
``Bootstrap``, ``NET/IB : Using [0]mlx5_0:1/RoCE ...``, ``ncclCommInitRank comm 0x... rank R nranks N
... commId 0x... - Init START``, ``comm 0x... rank R nRanks N nNodes M localRanks L localRank l MNNVL
0``, ``- Init COMPLETE``, the ``Channel 00/02 :   0   1 ...`` ring dump on rank 0 and ``Trees [0]
...``), then
for every network connection ``Channel CC/0 : R[d] -> P[d] [send|receive] via NET/IB/<dev>/GDRDMA``
on both ends and, on the connecting (sending) side only, one ``NET/IB: NCCL Dev D IbDev D Port 1 qpn
Q mtu 5 query_ece={...} GID 3 (0/<iid>) fifoRkey=0x.. fifoLkey=0x..`` line per QP (Q is the local
QP number) followed by ``NET/IB: IbDev D Port 1 qpn <remote qpn> set_ece={...}``; exactly what
net_ib.cc logs in ncclIbConnect (the accepting side logs no QP numbers). Collectives log NCCL's
COLL line ``AllReduce: opCount 1a sendbuff 0x... recvbuff 0x... count N datatype 9 op 0 root 0 comm
0x... [nranks=N] stream 0x...`` (all-to-all and send/recv log ``Send:``/``Recv:`` with the peer in
``root``), and ``comm 0x... rank R nranks N cudaDev d busId b - Destroy COMPLETE`` ends a
communicator.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime

NCCL_VERSION = "2.21.5+cuda12.4"
#: NCCL datatype enum values and element sizes.
DTYPES = {"float16": (6, 2), "float32": (7, 4), "bfloat16": (9, 2)}
#: ibv_mtu enum of a path MTU in bytes (what NCCL prints as ``mtu``).
IBV_MTU = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
#: NCCL_IB_TC of the simulated jobs: DSCP 26 with ECN bits 10, the usual RoCE lossless class.
TRAFFIC_CLASS = 106
_ECE = "{supported=1, vendor_id=0x15b3, options=0x30000002, comp_mask=0x0}"


@dataclass(frozen=True)
class RankInfo:
    """Who prints: host, process, proxy thread, CUDA device and its PCI bus id, NCCL comm pointer."""

    host: str
    pid: int
    proxy_tid: int
    cuda_dev: int
    bus_id: int
    rank: int
    comm_ptr: int

    def prefix(self, main_thread: bool = True) -> str:
        tid = self.pid if main_thread else self.proxy_tid
        return f"{self.host}:{self.pid}:{tid} [{self.cuda_dev}] NCCL INFO "


def timestamp(t_ns: int) -> str:
    """NCCL's log timestamp prefix of ``t_ns`` (ns since the epoch): ``[2026-11-25 23:30:01.123456] `` (local time of
    this process's zone, as NCCL writes it and the agent reads it by default; us)."""
    sec, ns = divmod(t_ns, 1_000_000_000)
    return f"[{datetime.fromtimestamp(sec):%Y-%m-%d %H:%M:%S}.{ns // 1000:06d}] "


def gid_interface_id(ip: str) -> int:
    """The GID interface id of a RoCEv2 IPv4 GID (::ffff:a.b.c.d) as NCCL prints it (%lX of the
    little-endian 64-bit load of the raw GID bytes 8..15)."""
    raw = b"\x00\x00\xff\xff" + ipaddress.IPv4Address(ip).packed
    return int.from_bytes(raw, "little")


def init_lines(r: RankInfo, nranks: int, nnodes: int, local_ranks: int, comm_id: int, netdev: str, ip: str,
               devices: list[str], traffic_class: int = TRAFFIC_CLASS) -> list[str]:
    """Communicator creation block of one rank (``devices``: the host's RDMA devices in NCCL order)."""
    p = r.prefix()
    using = " ".join(f"[{i}]{d}:1/RoCE" for i, d in enumerate(devices))
    lines = []
    if r.rank == 0:
        lines.append(f"{p}NCCL version {NCCL_VERSION}")
    lines += [
        f"{p}NCCL_IB_TC set by environment to {traffic_class}.",
        f"{p}Bootstrap : Using {netdev}:{ip}<0>",
        f"{p}NET/Plugin: No plugin found (libnccl-net.so)",
        f"{p}NET/IB : Using {using} [RO]; OOB {netdev}:{ip}<0>",
        f"{p}Using network IB",
        f"{p}ncclCommInitRank comm {r.comm_ptr:#x} rank {r.rank} nranks {nranks} cudaDev {r.cuda_dev} "
        f"nvmlDev {r.cuda_dev} busId {r.bus_id:x} commId {comm_id:#x} - Init START",
        f"{p}comm {r.comm_ptr:#x} rank {r.rank} nRanks {nranks} nNodes {nnodes} localRanks {local_ranks} "
        f"localRank {r.cuda_dev} MNNVL 0",
    ]
    return lines


def ring_dump(r: RankInfo, channel: int, nchannels: int, order: list[int]) -> str:
    """Rank 0's ``Channel CC/NN :   0   1 ...`` line of one ring."""
    return f"{r.prefix()}Channel {channel:02d}/{nchannels:02d} :" + "".join(f" {x:3d}" for x in order)


def trees_line(r: RankInfo, trees: list[tuple[int, int, int, int]]) -> str:
    """``Trees [c] d0/d1/d2->rank->up ...`` for each channel's (down0, down1, down2, up)."""
    parts = " ".join(f"[{c}] {d0}/{d1}/{d2}->{r.rank}->{up}" for c, (d0, d1, d2, up) in enumerate(trees))
    return f"{r.prefix()}Trees {parts}"


def init_complete(r: RankInfo, nranks: int, comm_id: int) -> str:
    return (f"{r.prefix()}ncclCommInitRank comm {r.comm_ptr:#x} rank {r.rank} nranks {nranks} cudaDev {r.cuda_dev} "
            f"nvmlDev {r.cuda_dev} busId {r.bus_id:x} commId {comm_id:#x} localSize 328 used 561135984 bytes "
            "- Init COMPLETE")


def channel_line(r: RankInfo, channel: int, src_rank: int, src_dev: int, dst_rank: int, dst_dev: int,
                 send: bool, net_dev: int) -> str:
    """One end of a network connection, as net.cc logs it in sendSetup / recvSetup."""
    side = "send" if send else "receive"
    return (f"{r.prefix()}Channel {channel:02d}/0 : {src_rank}[{src_dev}] -> {dst_rank}[{dst_dev}] [{side}] "
            f"via NET/IB/{net_dev}/GDRDMA")


def qp_lines(r: RankInfo, net_dev: int, qpn: int, remote_qpn: int, mtu: int, ip: str, rkey: int) -> list[str]:
    """ncclIbConnect's lines for one QP of a send connection: local qpn, then the remote one."""
    p = r.prefix(main_thread=False)
    return [
        f"{p}NET/IB: NCCL Dev {net_dev} IbDev {net_dev} Port 1 qpn {qpn} mtu {IBV_MTU[mtu]} query_ece={_ECE} "
        f"GID 3 (0/{gid_interface_id(ip):X}) fifoRkey={rkey:#x} fifoLkey={rkey:#x}",
        f"{p}NET/IB: IbDev {net_dev} Port 1 qpn {remote_qpn} set_ece={_ECE}",
    ]


def coll_line(r: RankInfo, op_name: str, op_count: int, sendbuff: int, recvbuff: int, count: int, datatype: int,
              root: int, nranks: int, stream: int) -> str:
    """NCCL's COLL line (enqueue.cc): op 0 = sum."""
    return (f"{r.prefix()}{op_name}: opCount {op_count:x} sendbuff {sendbuff:#x} recvbuff {recvbuff:#x} "
            f"count {count} datatype {datatype} op 0 root {root} comm {r.comm_ptr:#x} [nranks={nranks}] "
            f"stream {stream:#x}")


def destroy_line(r: RankInfo, nranks: int) -> str:
    return (f"{r.prefix()}comm {r.comm_ptr:#x} rank {r.rank} nranks {nranks} cudaDev {r.cuda_dev} "
            f"busId {r.bus_id:x} - Destroy COMPLETE")
