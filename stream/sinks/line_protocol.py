"""The processor's outputs as InfluxDB line protocol: one pure function per output message, from it to its line.

Each encoder writes one measurement of ``measurements.py`` and is driven by it: a field is formatted by its declared
type, and a tag or field the measurement does not name cannot be written. Which encoder writes which output is said
once, in the outputs' registry (``stream/stages/outputs.py``, which also has ``to_lines``).

Rules every line follows:

* Timestamp = the window's end, ``window_end_ns``, in ns precision. A replay of a window after a
  crash writes the same series at the same timestamp, so it overwrites instead of duplicating.
* Field types never vary: ``int`` fields always carry the ``i`` suffix (never ``u``, so no series
  mixes int and uint), ``float`` fields are always written with a decimal point or exponent
  (``0.0``, not ``0``), ``string`` fields are quoted. Non-finite floats are refused.
* Tags are bounded by the topology: links, switches, ECMP groups, NICs, resolvers. Per-window
  or per-flow values (flow 5-tuples, jobs, the idle sibling of a collision) are fields, never tags.
  One exception: ``collective_profile`` is per job by nature, so its job, communicator and call size are
  tags (each record of a window is its own series); its series end with their job.
* Absent means unknown, zero means zero: when a LinkLoad has no trusted counter delta
  (``measured_valid`` false) the measured fields are left out instead of written as 0; likewise
  ``fim_flows`` for the measured basis, and ``switch`` for the fabric-wide FIM.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from flowtracer.schemas.v1 import analytics_pb2, common_pb2, flows_pb2
from flowtracer.stream.sinks.measurements import (
    COLLECTIVE_PROFILE,
    COLLISION,
    CONGESTION_CAUSE,
    ECMP_DRIFT,
    FIM,
    FLOW_PATH,
    INCIDENT,
    LINK_CONGESTION,
    LINK_CONGESTION_GROUPS,
    LINK_LOAD,
    NIC_CONGESTION,
    NIC_CONGESTION_GROUPS,
    PATH_LOAD,
    Measurement,
)
from flowtracer.stream.stages.flow_paths import CHANGE_NAMES

SCHEMA_VERSION = 1
"""The analytics message version these encoders understand."""

MAX_FLOWS_TEXT = 8
"""Flows spelled out in ``collision.flows``; the rest are summarised as ``+N more``."""

SAME_LEAF = "same-leaf"
"""``path_load.path`` when source and destination NIC are on the same leaf (no switch links)."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class PointError(ValueError):
    """A message cannot be written as a point; ``str()`` names the message, the entity and the
    field. The processor should dead-letter the message: writing it would fail the whole batch."""


# Tag values: escape what ends a tag (comma, equals, space) and the backslash itself ("\\" reads
# back as one backslash in InfluxDB 2 and VictoriaMetrics, so a trailing backslash cannot eat the
# separator). Line breaks cannot be represented in line protocol: they become the text "\n".
_TAG_ESCAPE = str.maketrans({"\\": "\\\\", ",": "\\,", "=": "\\=", " ": "\\ ",
                             "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_STRING_ESCAPE = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"})


@lru_cache(maxsize=1 << 16)  # tag values repeat every window (bounded cardinality); translate costs ~1 us
def _escape_tag(v: str) -> str:
    return v.translate(_TAG_ESCAPE)


def _fmt_int(v: Any) -> str:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"{v!r} is not an int")
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise ValueError(f"{v} does not fit a signed 64-bit InfluxDB integer")
    return f"{v}i"


def _fmt_float(v: Any) -> str:
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"{f} is not finite (InfluxDB refuses NaN and infinities)")
    return repr(f)  # shortest round-trip form, always with "." or "e": 0.0, 1e-05, 0.4375


def _fmt_string(v: Any) -> str:
    return '"' + str(v).translate(_STRING_ESCAPE) + '"'


_FORMAT: dict[str, Callable[[Any], str]] = {"int": _fmt_int, "float": _fmt_float, "string": _fmt_string}


def _line(m: Measurement, tags: Mapping[str, str], fields: Mapping[str, Any], ts_ns: int, where: str) -> str:
    """One line of *m*; *where* names the message for errors. ``None`` or ``""`` tags and ``None``
    fields are absent, which only names in ``m.optional`` may be."""
    prefix = _tag_prefix(m, tags)
    if prefix is None:
        empty = next(k for k in m.tag_order if not tags[k] and k not in m.optional)
        raise PointError(f"{where}: tag {empty!r} is empty")
    parts = [prefix]
    sep = " "
    for k, kind in m.fields.items():
        v = fields[k]
        if v is None:
            if k in m.optional:
                continue
            raise PointError(f"{where}: field {k!r} is missing")
        try:
            parts.append(f"{sep}{k}={_FORMAT[kind](v)}")
        except (ValueError, TypeError) as e:
            raise PointError(f"{where}: field {k!r}: {e}") from None
        sep = ","
    if not 0 < ts_ns <= _INT64_MAX:
        raise PointError(f"{where}: window_end_ns={ts_ns} is not a timestamp")
    parts.append(f" {ts_ns}")
    return "".join(parts)


def _check_version(msg: Any, where: str) -> None:
    if msg.schema_version != SCHEMA_VERSION:
        raise PointError(f"{where}: schema_version {msg.schema_version} (these encoders know {SCHEMA_VERSION})")


def _tag_prefix(m: Measurement, tags: Mapping[str, str]) -> str | None:
    """``<measurement>,<tags>`` as :func:`_line` writes it, or None when a required tag is empty
    (the slow path then raises the precise error)."""
    parts = [m.name]
    for k in m.tag_order:
        v = tags[k]
        if v:
            parts.append(f",{k}={_escape_tag(v)}")
        elif k not in m.optional:
            return None
    return "".join(parts)


#: Tag prefixes of recent series: tags are bounded by the topology and repeat every window, so a
#: line costs a dict lookup plus its fields. Cleared when full (path_load series can be many).
_PREFIXES: dict[tuple[str, ...], str] = {}
_PREFIXES_MAX = 1 << 17


def _cached_prefix(key: tuple[str, ...], m: Measurement, tags: Callable[[], Mapping[str, str]]) -> str | None:
    prefix = _PREFIXES.get(key)
    if prefix is None:
        prefix = _tag_prefix(m, tags())
        if prefix is None:
            return None
        if len(_PREFIXES) >= _PREFIXES_MAX:
            _PREFIXES.clear()
        _PREFIXES[key] = prefix
    return prefix


def _int_ok(v: int) -> bool:
    return _INT64_MIN <= v <= _INT64_MAX


def link_load_line(m: analytics_pb2.LinkLoad) -> str:
    """``link_load`` line of one LinkLoad; the measured fields only when ``measured_valid``.

    Fast path: cached tag prefix and inline field formatting, byte-identical to :func:`_line`;
    anything unusual (a bad version, an empty tag, an out-of-range value) takes the checked path.
    """
    ts = m.window_end_ns
    if m.schema_version == SCHEMA_VERSION and 0 < ts <= _INT64_MAX:
        link, src, dst, res = m.link, m.src_node, m.dst_node, m.resolver
        prefix = _cached_prefix(("L", link, src, dst, res), LINK_LOAD,
                                lambda: {"link": link, "src_node": src, "dst_node": dst, "resolver": res})
        attributed, flows = m.attributed_bytes, m.flow_count
        if prefix is not None and _int_ok(attributed):
            if m.measured_valid:
                meas, unexpl, util = m.measured_bytes, m.unexplained_bytes, m.utilization
                if _int_ok(meas) and _int_ok(unexpl) and math.isfinite(util):
                    return (f"{prefix} measured_bytes={meas}i,attributed_bytes={attributed}i,"
                            f"unexplained_bytes={unexpl}i,utilization={util!r},flow_count={flows}i,"
                            f"measured_valid=1i {ts}")
            else:
                return f"{prefix} attributed_bytes={attributed}i,flow_count={flows}i,measured_valid=0i {ts}"
    return _link_load_line_checked(m)


def _link_load_line_checked(m: analytics_pb2.LinkLoad) -> str:
    where = f"LinkLoad link={m.link!r} window_end_ns={m.window_end_ns}"
    _check_version(m, where)
    valid = m.measured_valid
    return _line(LINK_LOAD, {
        "link": m.link, "src_node": m.src_node, "dst_node": m.dst_node, "resolver": m.resolver,
    }, {
        "measured_bytes": m.measured_bytes if valid else None,
        "attributed_bytes": m.attributed_bytes,
        "unexplained_bytes": m.unexplained_bytes if valid else None,
        "utilization": m.utilization if valid else None,
        "flow_count": m.flow_count,
        "measured_valid": int(valid),
    }, m.window_end_ns, where)


def nic_name(host: str, nic: str) -> str:
    """Topology NIC name ``<host>:<rdma_device>``, also when *nic* holds only the device."""
    return f"{host}:{nic}" if nic and host and ":" not in nic else nic


def switch_path(links: Sequence[str], src_nic: str, dst_nic: str) -> str:
    """The switch-to-switch part of a NIC-to-NIC path: *links* without the host links at either
    end (those are implied by the NICs), joined by ``|``; :data:`SAME_LEAF` when nothing is left."""
    start, end = 0, len(links)
    if end and links[0].startswith(f"{src_nic}>"):
        start = 1
    if end > start and links[-1].endswith(f">{dst_nic}"):
        end -= 1
    return "|".join(links[start:end]) or SAME_LEAF


def path_load_line(m: analytics_pb2.PathLoad) -> str:
    """``path_load`` line of one PathLoad.

    Fast path: cached tag prefix (per NICs, path id, links, resolver) and inline field formatting,
    byte-identical to :func:`_line`; anything unusual takes the checked path.
    """
    ts = m.window_end_ns
    if m.schema_version == SCHEMA_VERSION and 0 < ts <= _INT64_MAX:
        sh, sn, dh, dn, pid, res = m.src_host, m.src_nic, m.dst_host, m.dst_nic, m.path_id, m.resolver
        links = tuple(m.links)
        prefix = _cached_prefix(("P", sh, sn, dh, dn, pid, res, *links), PATH_LOAD,
                                lambda: _path_load_tags(sh, sn, dh, dn, pid, res, links))
        nbytes, conf = m.bytes, m.confidence
        if prefix is not None and _int_ok(nbytes) and math.isfinite(conf):
            return f"{prefix} bytes={nbytes}i,flow_count={m.flow_count}i,confidence={conf!r} {ts}"
    return _path_load_line_checked(m)


def _path_load_tags(src_host: str, src_nic: str, dst_host: str, dst_nic: str, path_id: str, resolver: str,
                    links: Sequence[str]) -> dict[str, str]:
    src, dst = nic_name(src_host, src_nic), nic_name(dst_host, dst_nic)
    ids = list(links) or (path_id.split("|") if path_id else [])
    return {"src_nic": src, "dst_nic": dst, "path": switch_path(ids, src, dst), "resolver": resolver}


def _path_load_line_checked(m: analytics_pb2.PathLoad) -> str:
    where = f"PathLoad path_id={m.path_id!r} window_end_ns={m.window_end_ns}"
    _check_version(m, where)
    src, dst = nic_name(m.src_host, m.src_nic), nic_name(m.dst_host, m.dst_nic)
    links = list(m.links) or (m.path_id.split("|") if m.path_id else [])
    return _line(PATH_LOAD, {
        "src_nic": src, "dst_nic": dst, "path": switch_path(links, src, dst), "resolver": m.resolver,
    }, {
        "bytes": m.bytes, "flow_count": m.flow_count, "confidence": m.confidence,
    }, m.window_end_ns, where)


_BASIS = {analytics_pb2.LOAD_BASIS_MEASURED: "measured", analytics_pb2.LOAD_BASIS_ATTRIBUTED: "attributed"}


def fim_line(m: analytics_pb2.FimSample) -> str:
    """``fim`` line of one FimSample; ``fim_flows`` only for the attributed basis."""
    where = f"FimSample group={m.group!r} window_end_ns={m.window_end_ns}"
    _check_version(m, where)
    basis = _BASIS.get(m.basis)
    if basis is None:
        raise PointError(f"{where}: basis {analytics_pb2.LoadBasis.Name(m.basis)} is neither measured nor attributed")
    attributed = m.basis == analytics_pb2.LOAD_BASIS_ATTRIBUTED
    return _line(FIM, {"group": m.group, "switch": m.switch, "basis": basis,
                       "resolver": m.resolver if attributed else "", "group_source": m.group_source,
                       "load_source": "" if attributed else m.load_source}, {
        "fim": m.fim, "fim_flows": m.fim_flows if attributed else None, "max_mean_ratio": m.max_mean_ratio,
        "cv": m.cv, "total_bytes": m.total_bytes, "members": m.members,
    }, m.window_end_ns, where)


def human_bytes(n: int) -> str:
    """``1.2GB``-style size with decimal units (1 kB = 1000 bytes); whole bytes below 1 kB."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n}B"


def flows_text(flows: Sequence[common_pb2.FlowRef], limit: int = MAX_FLOWS_TEXT) -> str:
    """Compact text of colliding flows for humans (Grafana tables), in the given order."""
    parts = []
    for f in flows[:limit]:
        k = f.key
        text = f"{k.src_ip}>{k.dst_ip}:sport={k.udp_src_port}"
        if f.job_id:
            text += f" job={f.job_id}"
        if f.collective:
            text += f" coll={f.collective}"
        text += f" {human_bytes(f.bytes)}"
        if f.cnp_share:  # an estimate (FlowRef.cnp_share), hence the ~
            text += f" cnps~{round(f.cnp_share)}"
        parts.append(text)
    if len(flows) > limit:
        parts.append(f"+{len(flows) - limit} more")
    return "; ".join(parts)


def collision_line(m: analytics_pb2.Collision) -> str:
    """``collision`` line of one Collision."""
    where = f"Collision group={m.group!r} link={m.link!r} window_end_ns={m.window_end_ns}"
    _check_version(m, where)
    sizes = [f.bytes for f in m.flows]
    return _line(COLLISION, {"group": m.group, "switch": m.switch, "link": m.link, "resolver": m.resolver}, {
        "link_utilization": m.link_utilization, "idle_utilization": m.idle_utilization,
        "idle_link": m.idle_link, "flow_count": len(sizes), "flow_bytes": sum(sizes),
        "top_bytes": max(sizes, default=0), "flows": flows_text(m.flows),
        "harmful": int(m.harmful), "harm_basis": m.harm_basis or None, "link_ecn_marked_pkts": m.link_ecn_marked_pkts,
        "link_dropped_pkts": m.link_dropped_pkts, "link_pfc_pauses": m.link_pfc_pauses,
        "idle_ecn_marked_pkts": m.idle_ecn_marked_pkts, "idle_dropped_pkts": m.idle_dropped_pkts,
        "idle_pfc_pauses": m.idle_pfc_pauses, "receiver_cnps": m.receiver_cnps,
    }, m.window_end_ns, where)


def incident_line(m: analytics_pb2.Incident) -> str:
    """``incident`` line of one Incident snapshot (stamped with its window end, so a replay overwrites)."""
    where = f"Incident id={m.id!r} window_end_ns={m.window_end_ns}"
    _check_version(m, where)
    top = m.suspects[0] if m.suspects else None
    fields: dict[str, Any] = {
        "id": m.id, "open": int(m.state == "open"), "score": top.score if top else 0.0,
        "suspects": ", ".join(s.component for s in m.suspects), "flow_count": len(m.flows),
        "hosts": ",".join(m.hosts), "jobs": ",".join(m.jobs), "collectives": ",".join(m.collectives),
        "start_ns": m.start_ns, "detected_ns": m.detected_ns,
        "evidence": "; ".join(top.evidence) if top else "", "end_ns": m.end_ns if m.state != "open" else None}
    return _line(INCIDENT, {"kind": m.kind, "top_suspect": top.component if top else ""}, fields,
                 m.window_end_ns, where)


def _congestion_line(measurement: Measurement, groups: Mapping[str, tuple[str, ...]], m: Any, where: str) -> str:
    _check_version(m, where)
    fields: dict[str, Any] = {}
    for flag, names in groups.items():
        valid = getattr(m, flag)
        fields[flag] = int(valid)
        fields |= {f: getattr(m, f) if valid else None for f in names}
    return _line(measurement, {t: getattr(m, t) for t in measurement.tags}, fields, m.window_end_ns, where)


def link_congestion_line(m: analytics_pb2.LinkCongestion) -> str:
    """``link_congestion`` line of one LinkCongestion; a group's fields only while its ``*_valid`` is set."""
    return _congestion_line(LINK_CONGESTION, LINK_CONGESTION_GROUPS, m,
                            f"LinkCongestion link={m.link!r} window_end_ns={m.window_end_ns}")


def nic_congestion_line(m: analytics_pb2.NicCongestionSample) -> str:
    """``nic_congestion`` line of one NicCongestionSample; a group's fields only while its ``*_valid`` is set."""
    return _congestion_line(NIC_CONGESTION, NIC_CONGESTION_GROUPS, m,
                            f"NicCongestionSample nic={m.nic!r} window_end_ns={m.window_end_ns}")


def ecmp_drift_line(m: analytics_pb2.EcmpDrift) -> str:
    """``ecmp_drift`` line of one EcmpDrift."""
    where = f"EcmpDrift switch={m.switch!r} group={m.group!r} window_end_ns={m.window_end_ns}"
    _check_version(m, where)
    if m.kind == analytics_pb2.DRIFT_KIND_UNSPECIFIED or m.kind not in analytics_pb2.DriftKind.values():
        raise PointError(f"{where}: drift kind {m.kind} is not one this schema knows")
    kind = analytics_pb2.DriftKind.Name(m.kind).removeprefix("DRIFT_KIND_").lower()
    return _line(ECMP_DRIFT, {"switch": m.switch, "group": m.group, "kind": kind, "port": m.port}, {
        "topology_weight": m.topology_weight, "network_weight": m.network_weight, "link": m.link or None,
    }, m.window_end_ns, where)


def congestion_cause_line(m: analytics_pb2.CongestionCause) -> str:
    """``congestion_cause`` line of one CongestionCause; what does not apply to its cause, or was not measured
    (utilization -1), is left out."""
    where = f"CongestionCause link={m.link!r} window_end_ns={m.window_end_ns}"
    _check_version(m, where)
    collision = m.cause == "collision"
    return _line(CONGESTION_CAUSE, {"link": m.link, "src_node": m.src_node, "dst_node": m.dst_node,
                                    "cause": m.cause}, {
        "origin": m.origin or None, "spread_links": "|".join(m.spread_links) or None,
        "sibling": m.sibling if collision else None,
        "sibling_utilization": m.sibling_utilization if collision else None,
        "utilization": m.utilization if m.utilization >= 0 else None,
        "previous_utilization": m.previous_utilization if m.previous_utilization >= 0 else None,
        "pfc_pauses_received": m.pfc_pauses_received, "ecn_marked_pkts": m.ecn_marked_pkts,
        "dropped_pkts": m.dropped_pkts, "flow_count": m.flow_count, "sources": m.sources, "evidence": m.evidence,
    }, m.window_end_ns, where)


def flow_path_line(m: analytics_pb2.FlowPath) -> str:
    """``flow_path`` line of one FlowPath (one point per change or heartbeat, never per window)."""
    where = f"FlowPath flow_id={m.flow_id!r} window_end_ns={m.window_end_ns}"
    _check_version(m, where)
    change = CHANGE_NAMES.get(m.change)
    if change is None:
        raise PointError(f"{where}: change {m.change} is not a known FlowPathChange")
    src, dst = nic_name(m.src_host, m.src_nic), nic_name(m.dst_host, m.dst_nic)
    return _line(FLOW_PATH, {"src_nic": src, "dst_nic": dst, "path": switch_path(list(m.links), src, dst),
                             "job": m.job_id, "resolver": m.resolver}, {
        "flow_id": m.flow_id, "udp_src_port": m.key.udp_src_port, "change": change, "method": m.method,
        "bytes": m.bytes, "confidence": m.confidence, "path_share": m.path_share,
    }, m.window_end_ns, where)


def collective_profile_line(m: flows_pb2.CollectiveProfile) -> str:
    """``collective_profile`` line of one CollectiveProfile; timing left out when the log had none."""
    where = f"CollectiveProfile host={m.host!r} comm={m.comm_id!r} window_end_ns={m.window_end_ns}"
    _check_version(m, where)
    timed = m.timed_ns > 0
    return _line(COLLECTIVE_PROFILE, {"host": m.host, "job": m.job_id, "comm": m.comm_id, "operation": m.operation,
                                      "datatype": str(m.datatype), "count": str(m.count)}, {
        "calls": m.calls, "call_bytes": m.call_bytes, "bytes": m.calls * m.call_bytes,
        "datatype_bytes": m.datatype_bytes, "nranks": m.nranks, "ranks": ",".join(map(str, m.ranks)) or None,
        "peers": ",".join(map(str, m.peers)) or None, "first_call_ns": m.first_call_ns or None,
        "last_call_ns": m.last_call_ns or None, "timed_calls": m.timed_calls, "timed_ns": m.timed_ns,
        "algo_bw_bytes_per_s": m.algo_bw_bytes_per_s if timed else None,
        "bus_bw_bytes_per_s": m.bus_bw_bytes_per_s if timed else None,
    }, m.window_end_ns, where)
