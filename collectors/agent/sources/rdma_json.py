"""Parsers for the JSON that iproute2's ``rdma`` tool prints: QPs and per-QP counters.

``rdma -j resource show qp`` (iproute2 ``rdma/res-qp.c``) prints one JSON array with one object per
QP, keys in this order: ``ifindex``, ``ifname`` (RDMA device), ``port``, ``lqpn``, ``rqpn`` (RC/UC
only), ``type`` (``RC``, ``UD``, ``GSI``, ...), ``state`` (``RTS``, ...), ``rq-psn`` (RC/UC only),
``sq-psn``, ``path-mig-state``, ``pdn`` (user QPs), ``pid`` (user QPs), ``comm`` (the process name,
or the kernel module that created a kernel QP). ``-d`` adds driver keys; unknown keys are ignored.

``rdma -j statistic qp show`` (``rdma/stat.c``) prints one object per *counter*, not per QP:
``ifindex``, ``ifname``, ``port``, ``cntn``, ``qp-type``, ``pid``, ``comm``, then every hardware
counter of that counter set as ``name: value``, and ``lqpn``: the list of QPs bound to it. Since
Linux 6.15 (mlx5, "optional counters binding for QPs") the set can include ``rdma_tx_bytes``,
``rdma_tx_packets``, ``rdma_rx_bytes``, ``rdma_rx_packets``. A counter is per-QP only when exactly one
QP is bound to it (``rdma statistic qp bind link DEV/PORT lqpn N``, or ``auto`` mode with a
criterion that separates QPs); otherwise it sums several QPs.

Both parsers are pure: text in, records and a count of malformed entries out. They never raise on
bad input; a malformed entry is skipped and counted. A document that is not valid JSON is not lost
whole: its complete entries are salvaged (``rdma_salvage.py``: iproute2 before 6.8 printed invalid
JSON with ``-dd``; ``rdma``'s text output is read too), ``Parsed.salvaged`` counts them and the
entries that could not be read count as malformed.

``parse_res_qp`` is the agent's hot path (10k QPs per window on a big host). It returns the QPs as
columns (``QpColumns``, which is also a sequence of ``QpRecord``). When msgspec is installed, a
well-formed document is decoded and validated in one typed pass (about 4x faster than
``json.loads`` alone); any document it rejects goes through the stdlib decoder and the per-entry
checks, which decide exactly which entries are malformed. Both give the same records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Annotated, Any, NamedTuple

from flowtracer.collectors.agent.sources.rdma_salvage import salvage

try:
    import msgspec
except ImportError:  # optional: the stdlib path gives the same records, slower
    msgspec = None

QPN_MASK = 0xFFFFFF
PID_MAX = 1 << 22
"""Linux's largest pid (``PID_MAX_LIMIT``): an entry naming a larger one is malformed (Flow.pid is 32 bits)."""
PORT_MAX = 255
"""RDMA port numbers are 8 bits."""
"""QP numbers and PSNs are 24-bit."""



class QpRecord(NamedTuple):
    """One QP as ``rdma -j resource show qp`` shows it. PSNs and QP numbers are 24-bit integers."""

    device: str
    port: int  # 0 when the QP is not bound to a port yet
    lqpn: int
    rqpn: int | None  # None for QP types without a remote QP (UD, GSI, ...)
    qp_type: str
    state: str
    rq_psn: int | None
    sq_psn: int
    pid: int  # 0 for kernel QPs
    comm: str


_QP_FIELDS = ("device", "port", "lqpn", "rqpn", "qp_type", "state", "rq_psn", "sq_psn", "pid", "comm")


def _read_only(self: QpColumns, *args: Any, **kwargs: Any) -> Any:
    raise TypeError("QpColumns is read-only (its columns must stay equal to its records)")


class QpColumns(list[QpRecord]):
    """A list of ``QpRecord`` that also holds its QPs column by column (one sequence per field, same
    order): the form the per-window arithmetic reads without touching a Python object per QP.
    Read-only, so the two views cannot disagree."""

    __slots__ = (*_QP_FIELDS, "arrays")

    def __init__(self, device: Sequence[str], port: Sequence[int], lqpn: Sequence[int], rqpn: Sequence[int | None],
                 qp_type: Sequence[str], state: Sequence[str], rq_psn: Sequence[int | None], sq_psn: Sequence[int],
                 pid: Sequence[int], comm: Sequence[str], records: list[QpRecord] | None = None) -> None:
        cols = (device, port, lqpn, rqpn, qp_type, state, rq_psn, sq_psn, pid, comm)
        super().__init__(map(tuple.__new__, repeat(QpRecord), zip(*cols, strict=True)) if records is None
                         else records)
        self.device, self.port, self.lqpn, self.rqpn, self.qp_type = device, port, lqpn, rqpn, qp_type
        self.state, self.rq_psn, self.sq_psn, self.pid, self.comm = state, rq_psn, sq_psn, pid, comm
        #: derived numpy columns, memoized by their users (qp_windows)
        self.arrays: dict[str, Any] = {}

    @classmethod
    def from_records(cls, records: Iterable[QpRecord]) -> QpColumns:
        """Columns of any iterable of ``QpRecord`` (returned as is when it already is ``QpColumns``)."""
        if isinstance(records, QpColumns):
            return records
        records = list(records)
        cols = [list(c) for c in zip(*records, strict=True)] if records else [[] for _ in _QP_FIELDS]
        return cls(*cols, records=records)

    def __reduce__(self) -> tuple[Any, ...]:
        return QpColumns, tuple(getattr(self, f) for f in _QP_FIELDS)

    def __copy__(self) -> list[QpRecord]:
        return list(self)

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only


@dataclass(frozen=True, slots=True)
class QpCounter:
    """One counter object of ``rdma -j statistic qp show``: values are absolute since the counter
    was allocated (bytes / packets), ``lqpns`` the QPs bound to it. ``values`` is the decoded
    entry (attributes included); read the byte counters with ``counter_values``."""

    device: str
    port: int
    cntn: int
    qp_type: str
    pid: int
    comm: str
    values: dict[str, int]
    lqpns: tuple[int, ...]

    @property
    def per_qp(self) -> bool:
        """True when the counter belongs to exactly one QP (its values are that QP's alone)."""
        return len(self.lqpns) == 1


class Parsed(NamedTuple):
    """Records parsed from one document and the number of entries skipped as malformed; ``salvaged``: entries
    read from a document that was not valid JSON (0 for a valid one)."""

    records: list[Any]
    malformed: int
    salvaged: int = 0


MAX_NESTING = 8
"""Deepest wrapping of entries in arrays/objects flattened (old iproute2 used 2-3); deeper is malformed."""


def _entries(doc: Any) -> tuple[list[Any], int]:
    """The per-object entries of an ``rdma -j`` document, and the count of malformed parts skipped.

    Current iproute2 prints one top-level array. Old releases (before the move to the common
    json_print API in 5.x) wrapped entries in objects or nested arrays; flatten those too, without
    recursion and at most ``MAX_NESTING`` deep.
    """
    out: list[Any] = []
    bad = 0
    stack: list[tuple[Any, int, bool]] = [(doc, 0, False)]  # (item, depth, an element of a list)
    while stack:
        item, depth, in_list = stack.pop()
        if isinstance(item, dict) and (in_list or "lqpn" in item):
            out.append(item)
        elif depth >= MAX_NESTING or not isinstance(item, list | dict):
            bad += 1
        elif isinstance(item, list):
            stack.extend((x, depth + 1, True) for x in reversed(item))
        else:
            stack.extend((v, depth + 1, False) for v in reversed(list(item.values())))
    return out, bad


def _decode(text: str | bytes) -> Any:
    """``json.loads``, through msgspec's faster untyped decoder when it accepts the text (it gives
    the same values; whatever it rejects, ``json.loads`` decides)."""
    if msgspec is not None:
        try:
            return msgspec.json.decode(text)
        except (msgspec.MsgspecError, ValueError):
            pass
    return json.loads(text)


def _load(text: str | bytes) -> tuple[list[Any], int, int]:
    """(entries, malformed, salvaged) of one document."""
    if not text or not text.strip():
        return [], 0, 0  # no devices / no QPs: rdma prints nothing or "[]"
    try:
        doc = _decode(text)
    except (ValueError, UnicodeDecodeError, RecursionError):  # json.loads recurses on nesting
        found = salvage(text)
        return found.entries, found.lost, len(found.entries)
    return (*_entries(doc), 0)


if msgspec is not None:
    _Qpn = Annotated[int, msgspec.Meta(ge=0, le=QPN_MASK)]
    _Port = Annotated[int, msgspec.Meta(ge=0, le=PORT_MAX)]
    _Pid = Annotated[int, msgspec.Meta(ge=0, le=PID_MAX)]

    class _QpEntry(msgspec.Struct, gc=False, kw_only=True):
        """One entry as ``parse_res_qp`` accepts it, fields in ``QpRecord`` order (strict: no
        bool or float for an int, no null)."""

        device: Annotated[str, msgspec.Meta(min_length=1)] = msgspec.field(name="ifname")
        port: _Port = 0
        lqpn: _Qpn
        rqpn: _Qpn | None = None
        qp_type: str = msgspec.field(name="type")
        state: str
        rq_psn: _Qpn | None = msgspec.field(default=None, name="rq-psn")
        sq_psn: _Qpn = msgspec.field(name="sq-psn")
        pid: _Pid = 0
        comm: Any = ""

    _QP_DECODER = msgspec.json.Decoder(list[_QpEntry])
    _astuple = msgspec.structs.astuple


def _fast_res_qp(text: str | bytes) -> QpColumns | None:
    """The records of a document whose every entry is well formed, from one typed decode; None
    when msgspec is not installed or rejects anything (then the per-entry path decides)."""
    if msgspec is None:
        return None
    if not isinstance(text, str) and not text.isascii():
        try:  # json.loads rejects invalid UTF-8 anywhere, even in keys msgspec skips
            text.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return None
    try:
        entries = _QP_DECODER.decode(text)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None
    records = list(map(tuple.__new__, repeat(QpRecord), map(_astuple, entries)))
    if not records:
        return QpColumns.from_records(records)
    cols = list(zip(*records, strict=True))
    try:
        "".join(cols[9])
    except TypeError:  # a comm that is not a string reads as ""
        records = [r if type(r.comm) is str else r._replace(comm="") for r in records]
        cols[9] = tuple(r.comm for r in records)
    return QpColumns(*cols, records=records)


def parse_res_qp(text: str | bytes) -> Parsed:
    """Parse ``rdma -j resource show qp`` output into ``QpRecord``s (``Parsed.records``, as
    ``QpColumns``).

    An entry is malformed when ``ifname``, ``lqpn``, ``type``, ``state`` or ``sq-psn`` (the
    attributes iproute2 itself requires) is missing or of the wrong type, or a QP number / PSN is
    outside 24 bits.
    """
    if text and (fast := _fast_res_qp(text)) is not None:
        return Parsed(fast, 0)
    entries, bad, salvaged = _load(text)
    out: list[QpRecord] = []
    append = out.append
    new = tuple.__new__
    m = QPN_MASK
    for d in entries:  # hot loop (10k QPs per window): checks inlined on purpose
        try:
            dev, lqpn, sq_psn, qp_type, state = d["ifname"], d["lqpn"], d["sq-psn"], d["type"], d["state"]
        except KeyError:
            bad += 1
            continue
        get = d.get
        port, rqpn, rq_psn, pid, comm = get("port", 0), get("rqpn"), get("rq-psn"), get("pid", 0), get("comm", "")
        if (type(lqpn) is not int or type(sq_psn) is not int or type(port) is not int or type(pid) is not int
                or type(dev) is not str or type(qp_type) is not str or type(state) is not str or not dev
                or not (0 <= lqpn <= m and 0 <= sq_psn <= m and 0 <= port <= PORT_MAX and 0 <= pid <= PID_MAX)
                or (rqpn is not None and (type(rqpn) is not int or not 0 <= rqpn <= m))
                or (rq_psn is not None and (type(rq_psn) is not int or not 0 <= rq_psn <= m))):
            bad += 1
            continue
        # tuple.__new__ skips NamedTuple's Python-level __new__ (a third of this loop's time)
        append(new(QpRecord, (dev, port, lqpn, rqpn, qp_type, state, rq_psn, sq_psn, pid,
                              comm if type(comm) is str else "")))
    return Parsed(QpColumns.from_records(out), bad, salvaged)


_COUNTER_META = frozenset({"ifindex", "ifname", "port", "cntn", "qp-type", "pid", "comm", "lqpn"})


def parse_stat_qp(text: str | bytes) -> Parsed:
    """Parse ``rdma -j statistic qp show`` output into ``QpCounter``s (``Parsed.records``).

    Every key that is not one of the counter's attributes is a hardware counter; ``values`` keeps
    the entry's mapping as decoded (the byte counters are type-checked where they are used, by
    ``counter_values``). An entry is malformed when ``ifname``, ``cntn`` or the ``lqpn`` list is
    missing or of the wrong type.
    """
    entries, bad, salvaged = _load(text)
    out: list[QpCounter] = []
    m = QPN_MASK
    for d in entries:
        get = d.get
        dev, cntn, lqpns, port, pid = get("ifname"), get("cntn"), get("lqpn"), get("port", 0), get("pid", 0)
        if type(lqpns) is int:
            lqpns = [lqpns]
        if not (type(dev) is str and dev and type(cntn) is int and type(lqpns) is list and type(port) is int
                and type(pid) is int and 0 <= port <= PORT_MAX and 0 <= pid <= PID_MAX
                and all(type(q) is int and 0 <= q <= m for q in lqpns)):
            bad += 1
            continue
        qp_type, comm = get("qp-type", ""), get("comm", "")
        out.append(QpCounter(dev, port, cntn, qp_type if type(qp_type) is str else "", pid,
                             comm if type(comm) is str else "", d, tuple(lqpns)))
    return Parsed(out, bad, salvaged)


def counter_values(c: QpCounter) -> tuple[int, int, int, int] | None:
    """(rdma_tx_bytes, rdma_rx_bytes, rdma_tx_packets, rdma_rx_packets) of a counter, None when any
    is missing or not a non-negative integer."""
    v = c.values
    t = (v.get("rdma_tx_bytes"), v.get("rdma_rx_bytes"), v.get("rdma_tx_packets"), v.get("rdma_rx_packets"))
    for x in t:
        if type(x) is not int or x < 0:
            return None
    return t  # type: ignore[return-value]


QpBytes = tuple[int, tuple[int, int, int, int]]
"""(counter id, (tx_bytes, rx_bytes, tx_packets, rx_packets)) of one QP's own counter."""


class QpCounterColumns(NamedTuple):
    """``per_qp_counters`` as columns: one row per QP with its own counter (a later counter of the
    same QP replaces an earlier one, as in the dict). ``values`` rows are (tx_bytes, rx_bytes,
    tx_packets, rx_packets)."""

    device: Sequence[str]
    port: Sequence[int]
    lqpn: Sequence[int]
    cntn: Sequence[int]
    values: Sequence[tuple[int, int, int, int]]


_BYTE_COUNTERS = ("rdma_tx_bytes", "rdma_rx_bytes", "rdma_tx_packets", "rdma_rx_packets")


def per_qp_counter_columns(counters: list[QpCounter]) -> QpCounterColumns:
    """``per_qp_counters`` without a dict entry per QP (the agent's per-window path)."""
    own = [c for c in counters if len(c.lqpns) == 1]
    vals = [[c.values.get(k) for c in own] for k in _BYTE_COUNTERS]
    if own and not all(set(map(type, col)) == {int} and min(col) >= 0 for col in vals):
        own = [c for c in own if counter_values(c) is not None]
        vals = [[c.values[k] for c in own] for k in _BYTE_COUNTERS]
    return QpCounterColumns([c.device for c in own], [c.port for c in own], [c.lqpns[0] for c in own],
                            [c.cntn for c in own], list(zip(*vals, strict=True)))


def per_qp_counters(counters: list[QpCounter]) -> dict[tuple[str, int, int], QpBytes]:
    """Byte counters of the counters that belong to exactly one QP, by (device, port, lqpn).

    Counters shared by several QPs are left out: their bytes cannot be split exactly, so those
    QPs fall back to the PSN estimate. So are counters without the optional byte counters.
    """
    out: dict[tuple[str, int, int], QpBytes] = {}
    for c in counters:
        if len(c.lqpns) == 1 and (v := counter_values(c)) is not None:
            out[(c.device, c.port, c.lqpns[0])] = (c.cntn, v)
    return out
