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
bad input; a malformed entry is skipped and counted, and a document that is not JSON at all counts
as one malformed record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

QPN_MASK = 0xFFFFFF
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
    """Records parsed from one document and the number of entries skipped as malformed."""

    records: list[Any]
    malformed: int


def _entries(doc: Any) -> tuple[list[Any], int]:
    """The per-object entries of an ``rdma -j`` document.

    Current iproute2 prints one top-level array. Old releases (before the move to the common
    json_print API in 5.x) wrapped entries in objects or nested arrays; flatten those too.
    """
    if isinstance(doc, list):
        out: list[Any] = []
        bad = 0
        for item in doc:
            if isinstance(item, dict):
                out.append(item)
            elif isinstance(item, list):
                sub, b = _entries(item)
                out.extend(sub)
                bad += b
            else:
                bad += 1
        return out, bad
    if isinstance(doc, dict):
        if "lqpn" in doc:
            return [doc], 0
        out = []
        bad = 0
        for v in doc.values():
            sub, b = _entries(v)
            out.extend(sub)
            bad += b
        return out, bad
    return [], 1


def _load(text: str | bytes) -> tuple[list[Any], int]:
    if not text or not text.strip():
        return [], 0  # no devices / no QPs: rdma prints nothing or "[]"
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return [], 1
    return _entries(doc)


def parse_res_qp(text: str | bytes) -> Parsed:
    """Parse ``rdma -j resource show qp`` output into ``QpRecord``s (``Parsed.records``).

    An entry is malformed when ``ifname``, ``lqpn``, ``type``, ``state`` or ``sq-psn`` (the
    attributes iproute2 itself requires) is missing or of the wrong type, or a QP number / PSN is
    outside 24 bits.
    """
    entries, bad = _load(text)
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
                or not (0 <= lqpn <= m and 0 <= sq_psn <= m and port >= 0 and pid >= 0)
                or (rqpn is not None and (type(rqpn) is not int or not 0 <= rqpn <= m))
                or (rq_psn is not None and (type(rq_psn) is not int or not 0 <= rq_psn <= m))):
            bad += 1
            continue
        # tuple.__new__ skips NamedTuple's Python-level __new__ (a third of this loop's time)
        append(new(QpRecord, (dev, port, lqpn, rqpn, qp_type, state, rq_psn, sq_psn, pid,
                              comm if type(comm) is str else "")))
    return Parsed(out, bad)


_COUNTER_META = frozenset({"ifindex", "ifname", "port", "cntn", "qp-type", "pid", "comm", "lqpn"})


def parse_stat_qp(text: str | bytes) -> Parsed:
    """Parse ``rdma -j statistic qp show`` output into ``QpCounter``s (``Parsed.records``).

    Every key that is not one of the counter's attributes is a hardware counter; ``values`` keeps
    the entry's mapping as decoded (the byte counters are type-checked where they are used, by
    ``counter_values``). An entry is malformed when ``ifname``, ``cntn`` or the ``lqpn`` list is
    missing or of the wrong type.
    """
    entries, bad = _load(text)
    out: list[QpCounter] = []
    m = QPN_MASK
    for d in entries:
        get = d.get
        dev, cntn, lqpns, port, pid = get("ifname"), get("cntn"), get("lqpn"), get("port", 0), get("pid", 0)
        if type(lqpns) is int:
            lqpns = [lqpns]
        if not (type(dev) is str and dev and type(cntn) is int and type(lqpns) is list and type(port) is int
                and type(pid) is int and all(type(q) is int and 0 <= q <= m for q in lqpns)):
            bad += 1
            continue
        qp_type, comm = get("qp-type", ""), get("comm", "")
        out.append(QpCounter(dev, port, cntn, qp_type if type(qp_type) is str else "", pid,
                             comm if type(comm) is str else "", d, tuple(lqpns)))
    return Parsed(out, bad)


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
