"""The NCCL INFO messages the host agent reads, in every format NCCL has printed them, as small records.

``parse_message(msg)`` answers a record for a message it uses, ``IGNORED`` for a message of its families that it
knows and does not need, ``OTHER`` for any other NCCL message, and ``Unknown(family)`` for a message of its families
in a format it does not know (counted by shape by the reader). A number beyond its bounds raises ValueError: one
bad line, never a value that later overflows a protobuf field. The families (what a message must match once it
looks like one of them):

* devices: ``NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>`` (transport/net_ib.cc,
  every version), ``/SHARP`` after a device from the Mellanox SHARP plugin (nccl-rdma-sharp-plugins
  ``src/ib_plugin.c``), merged devices ``[0]={[0] mlx5_0:1/RoCE, [1] mlx5_1:1/RoCE}`` from 2.20 (v2.20.3-1
  net_ib.cc:313-321: the inner index is the IB device a QP line's ``IbDev`` names);
* QPs, any message naming ``qpn``/``qp_num`` and any NET/IB message on QPs. The sending side's line, once per QP
  ``ncclIbConnect`` creates: 2.7-2.19 ``NET/IB: Dev 0 Port 1 qpn 1234 mtu 5 GID 3 (...)`` / ``... LID 7`` (v2.7.3-1
  net_ib.cc:455,461 to v2.19.3-1 net_ib.cc:686,689, which puts ``query_ece={...}`` before ``GID``; Dev is the IB
  device); 2.20-2.29.3 ``NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1234 mtu 5 ...`` (``NCCL MergedDev`` for merged
  devices; v2.20.3-1 net_ib.cc:847,855 to v2.29.3-1 net_ib/connect.cc:644,649); from 2.29.7 ``NET/IB: ncclIbConnect:
  NCCL Dev 0 IbDev 0 Port 1 qp_num 1234 mtu 5 ...`` (v2.29.7-1 connect.cc:652,657; ``ncclIbConnectImpl:`` in v2.30.7-1
  connect.cc:957). Known and not needed: the ECE lines (``... qpn N set_ece=`` / ``query_ece=``, v2.19.3-1
  net_ib.cc:728, v2.20.3-1:940, v2.27.7-1:1414,1499, v2.29.7-1 connect.cc:506,665: the set_ece one names the *remote*
  QP in 2.20-2.28), ``QP created:`` of both sides and ``Pre-posting`` (2.29.7+), and the 2.30 resiliency lines
  (p2p_resiliency*.cc);
* connections: ``Channel 02/0 : 3[3] -> 11[3] [send] via NET/IB/1/GDRDMA`` (2.12+), ``Channel 02 : 3[3d000] ->
  ...`` (2.7-2.11: bus ids), ``Ring 00 : 0[1b000] -> 1[3d000] [send] via NET/IB/0`` (2.4-2.6); PXN sends name the
  proxy rank whose process connects: ``via NET/IB/0(1)/GDRDMA`` (v2.19.3-1 transport/net.cc:197); RCCL appends
  `` comm 0x95cdeb0 nRanks 08``;
* communicators: ``ncclCommInitRank comm 0x.. rank R nranks N cudaDev D ... commId 0x.. - Init START`` and
  ``Init COMPLETE`` (older without the function name or commId), ``comm 0x.. rank R nRanks N nNodes ...``
  (2.19+), ``... - Destroy COMPLETE`` / ``Abort COMPLETE``;
* collectives: ``AllReduce: opCount 1f sendbuff .. recvbuff .. count N datatype T op O root R comm 0x..
  [nranks=N] stream ..`` (NCCL_DEBUG_SUBSYS=COLL);
* settings: ``NCCL_IB_TC set by environment to 106.``, ``NCCL_IB_QPS_PER_CONNECTION set by environment to 2.``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from flowtracer.collectors.agent.collective_profile import call_bytes
from flowtracer.collectors.agent.sources.rdma_json import QPN_MASK
from flowtracer.schemas.bounds import INT64_MAX, MAX_CALL_BYTES, MAX_NRANKS

MAX_CHANNEL = 1 << 16
"""Channels and ports a line may name (NCCL has at most 64 channels)."""
MAX_NET_DEVS = 1024
"""NCCL net and IB device indices a line may name (NCCL drives at most a few dozen NICs per process)."""
MAX_CUDA_DEVS = 4096
"""CUDA device numbers a line may name."""
MAX_QPS_PER_CONNECTION = 128
"""NCCL_IB_QPS_PER_CONNECTION NCCL accepts (src/transport/net_ib: at most NCCL_IB_MAX_QPS)."""


def _rx(pattern: str) -> re.Pattern[str]:
    """A pattern whose ``\\d`` is ASCII only: every number it captures goes to ``number``."""
    return re.compile(pattern, re.ASCII)


_USING = _rx(r"^NET/IB ?: Using\b")
_USING_DEV = _rx(r"\[(\d+)\] ?([^\s:\[\]{},=]+):(\d+)/(?:IB|RoCE)\b")
_QP_OLD = _rx(r"^NET/IB: Dev (\d+) Port (\d+) qpn (\d+) mtu \d+ ")
_QP_NEW = _rx(r"^NET/IB: (?:\w+: )?NCCL (?:Merged)?Dev (\d+) IbDev (\d+) Port (\d+) (?:qpn|qp_num) (\d+) "
              r"mtu \d+ ")
_QP_KNOWN = _rx(r"^NET/IB: (?:\w+: )?(?:Set ECE: )?(?:Ib)?Dev \d+ Port \d+ (?:qpn|qp_num) \d+ (?:set|query)_ece="
                r"|^NET/IB: \w+: (?:Flush )?QP created: "
                r"|^NET/IB: \w+: (?:Pre-posting|Posting|Destroying|Restoring|Restored|Transitioning|Failed|"
                r"Sender failed) ")
_QP_WORD = _rx(r"\bqp(?:n|_num)\b|^NET/IB.*\b(?:qp|QP)")  # a QP number, or any NET/IB line on QPs
_CONN = _rx(r"^(?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)\[[0-9a-fA-F]+\] -> (\d+)\[[0-9a-fA-F]+\] "
            r"(?:\[(send|receive)\] )?via (\S+)(?:.*? comm (0x[0-9a-fA-F]+))?")
_NET = _rx(r"^NET/([^/\s]+)/(\d+)(?:\((\d+)\))?")
_INIT = _rx(r"^(?:\w+ )?comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) "
            r".*?- (Init START|Init COMPLETE|Destroy COMPLETE|Abort COMPLETE)$")
_COMM_START = _rx(r"^comm (0x[0-9a-fA-F]+) rank (\d+) nRanks (\d+)\b")
_COMM_ID = _rx(r"\bcommId (0x[0-9a-fA-F]+)\b")
_CUDA_DEV = _rx(r"\bcudaDev (\d+)\b")
_INIT_END = ("Init START", "Init COMPLETE", "Destroy COMPLETE", "Abort COMPLETE")
_COLL = _rx(r"^(\w+): opCount ([0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) "
            r"op (\d+) root (-?\d+) comm (0x[0-9a-fA-F]+) \[nranks=(\d+)\]")
_SETTING = _rx(r"^(NCCL_IB_TC|NCCL_IB_QPS_PER_CONNECTION) set by environment to (\d+)")


@dataclass(frozen=True, slots=True)
class Devices:
    """``NET/IB : Using``: (IB device index, RDMA device name, port) of each device."""

    devs: tuple[tuple[int, str, int], ...]


@dataclass(frozen=True, slots=True)
class Qp:
    """A QP the sending side created for one connection on NCCL net device ``net_dev`` (IB device ``ib_dev``)."""

    net_dev: int
    ib_dev: int
    port: int
    qpn: int


@dataclass(frozen=True, slots=True)
class Conn:
    """A connection over a NET transport: ``rank`` -> ``peer`` on ``channel`` through net device ``net_dev``."""

    channel: int
    rank: int
    peer: int
    send: bool
    net: str  # "IB", "IBext_v8", "Socket", ...
    net_dev: int
    proxy_rank: int  # the rank whose process connects (PXN); ``rank`` itself when none is named
    comm: str  # RCCL's comm pointer, "" when the line names none


@dataclass(frozen=True, slots=True)
class CommEvent:
    """A communicator's init start/complete, its ``comm ... nRanks`` line ("start"), or its end ("end")."""

    pointer: str
    rank: int
    nranks: int
    event: str  # "start", "complete", "end"
    comm_id: str  # "" when the line names none
    cuda_dev: int  # -1 when the line names none


@dataclass(frozen=True, slots=True)
class Coll:
    """One collective call (COLL subsystem)."""

    op: str
    op_count: int
    count: int
    datatype: int
    root: int
    pointer: str
    nranks: int


@dataclass(frozen=True, slots=True)
class Setting:
    """An NCCL environment setting the reader uses (``NCCL_IB_TC``, ``NCCL_IB_QPS_PER_CONNECTION``)."""

    name: str
    value: int


@dataclass(frozen=True, slots=True)
class Unknown:
    """A message of ``family`` in a format this module does not know."""

    family: str


IGNORED = "ignored"
OTHER = "other"
Message = Devices | Qp | Conn | CommEvent | Coll | Setting | Unknown | str


def number(text: str, high: int, low: int = 0) -> int:
    """The decimal number ``text`` (ASCII digits, an optional ``-``: what this module's patterns match) within
    [``low``, ``high``]; ValueError (the line is malformed) otherwise. Every bound here is below 2^63 (19 digits):
    a longer number is out of range without being built (a line of a thousand digits costs nothing)."""
    if len(text) <= 20:
        n = int(text)
        if low <= n <= high:
            return n
    raise ValueError(f"{text[:32]!r} is outside [{low}, {high}]")


def hex_number(text: str, high: int) -> int:
    """The hex number ``text`` within [0, ``high``]; ValueError otherwise."""
    if len(text) > len(f"{high:x}") or int(text, 16) > high:
        raise ValueError(f"0x{text[:32]} is above {high:#x}")
    return int(text, 16)


def parse_message(msg: str) -> Message:
    """What one NCCL INFO message (the text after ``NCCL INFO ``) says; see the module docstring."""
    if "opCount" in msg:  # by far the most frequent, once a job runs
        return _coll(msg)
    if msg.startswith(("Channel ", "Ring ")):
        return _conn(msg) if " via " in msg else OTHER  # "Channel 00/02 :  0 1", "Ring 00 : 2 -> 0 -> 1"
    if ("qp" in msg or "QP" in msg) and _QP_WORD.search(msg):
        return _qp(msg)
    if msg.startswith("NET/IB") and _USING.match(msg):
        devs = tuple((number(d.group(1), MAX_NET_DEVS), d.group(2), number(d.group(3), MAX_CHANNEL))
                     for d in _USING_DEV.finditer(msg.split("; OOB", 1)[0]))
        return Devices(devs) if devs else Unknown("devices")
    if msg.startswith("comm 0x") or msg.endswith(_INIT_END):
        return _comm(msg)
    if msg.startswith(("NCCL_IB_TC", "NCCL_IB_QPS_PER_CONNECTION")):
        m = _SETTING.match(msg)
        if m is None:
            return Unknown("setting")
        high = 255 if m.group(1) == "NCCL_IB_TC" else MAX_QPS_PER_CONNECTION
        return Setting(m.group(1), number(m.group(2), high))
    return OTHER


def _qp(msg: str) -> Message:
    m = _QP_NEW.match(msg)
    if m is not None:
        return Qp(number(m.group(1), MAX_NET_DEVS), number(m.group(2), MAX_NET_DEVS), number(m.group(3), MAX_CHANNEL),
                  number(m.group(4), QPN_MASK))
    m = _QP_OLD.match(msg)
    if m is not None:
        dev = number(m.group(1), MAX_NET_DEVS)
        return Qp(dev, dev, number(m.group(2), MAX_CHANNEL), number(m.group(3), QPN_MASK))
    return IGNORED if _QP_KNOWN.match(msg) else Unknown("qp")


def _conn(msg: str) -> Message:
    m = _CONN.match(msg)
    if m is None:
        return Unknown("channel")
    via = _NET.match(m.group(5))
    if via is None:
        return IGNORED  # P2P, SHM, NVLS, CollNet: no QP of ours
    rank = number(m.group(2), MAX_NRANKS)
    return Conn(number(m.group(1), MAX_CHANNEL), rank, number(m.group(3), MAX_NRANKS), m.group(4) != "receive",
                via.group(1), number(via.group(2), MAX_NET_DEVS),
                rank if via.group(3) is None else number(via.group(3), MAX_NRANKS), (m.group(6) or "").lower())


def _comm(msg: str) -> Message:
    m = _INIT.match(msg)
    if m is not None:
        cid, dev = _COMM_ID.search(msg), _CUDA_DEV.search(msg)
        event = {"Init START": "start", "Init COMPLETE": "complete"}.get(m.group(4), "end")
        return CommEvent(m.group(1).lower(), number(m.group(2), MAX_NRANKS), number(m.group(3), MAX_NRANKS), event,
                         cid.group(1).lower() if cid else "", number(dev.group(1), MAX_CUDA_DEVS) if dev else -1)
    m = _COMM_START.match(msg)
    if m is not None:
        return CommEvent(m.group(1).lower(), number(m.group(2), MAX_NRANKS), number(m.group(3), MAX_NRANKS), "start",
                         "", -1)
    return Unknown("comm")


def _coll(msg: str) -> Message:
    m = _COLL.match(msg)
    if m is None:
        return Unknown("coll")
    op, nranks = m.group(1), number(m.group(8), MAX_NRANKS)
    count, datatype = number(m.group(3), MAX_CALL_BYTES), number(m.group(4), 255)
    if call_bytes(op, count, datatype, nranks) > MAX_CALL_BYTES:
        raise ValueError(f"{op} of {count} x datatype {datatype} is more than any GPU holds")
    return Coll(op, hex_number(m.group(2), INT64_MAX), count, datatype, number(m.group(6), MAX_NRANKS, -1),
                m.group(7).lower(), nranks)
