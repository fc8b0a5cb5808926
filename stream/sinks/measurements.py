"""The InfluxDB measurements the processor and the diagnosis write, as data: per measurement its tags, its fields
with their types, what each key holds (a unit or a kind of id) and which keys a line may leave out.

These definitions drive the encoders (``line_protocol.py``: a field is formatted by its declared type, a tag or field
a definition does not name cannot be written). The outputs' registry (``stream/stages/outputs.py``) gathers them as
``MEASUREMENTS``; the table in docs/stream.md is generated from it by :func:`markdown_table` (checked by a test), and
the Grafana dashboards and alerts are checked against it.

Series per measurement: ``link_load`` 2 x cables x resolvers; ``path_load`` NIC pairs that
exchanged traffic x their paths (all-to-all on N NICs approaches N^2 x paths: the largest one);
``fim`` groups x 2 bases + 2; ``collision`` only where collisions happen, per (group, link);
``link_congestion`` 2 x cables; ``nic_congestion`` NIC ports with congestion counters; ``ecmp_drift`` only while a
switch's AFT differs from the topology, per (group, kind, port); ``congestion_cause`` only where congestion happens,
per (link, cause); ``collective_profile`` per host x job x communicator x operation x datatype x count that ran;
``flow_path`` as ``path_load`` x jobs (NIC pairs x paths; the flow is a field, not a tag), points only on a flow's
path change and heartbeat (docs/operations.md gives the rate); ``incident`` (kind, top suspect) pairs that ever had
an incident (the id is a field: incidents come and go, components are the topology's).

Tag values: ``link`` and ``idle_link`` are directed link ids ``<node>:<port>><node>:<port>``;
``src_nic``/``dst_nic`` are topology NIC names ``<host>:<rdma_device>``; ``path`` is the
switch-to-switch part of the path (its link ids joined by ``|``; the host links are implied by the
NICs), or ``same-leaf`` when both NICs hang off one leaf; ``basis`` is ``measured`` or
``attributed``; ``resolver`` is ``hash`` or ``infer``. ``collision.flows`` is compact text,
heaviest first, at most ``line_protocol.MAX_FLOWS_TEXT`` flows:
``10.0.0.1>10.0.3.1:sport=52208 job=j42 coll=AllReduce 1.2GB; ...``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

FieldType = Literal["int", "float", "string"]

_NAME = re.compile(r"[a-z][a-z0-9_]*")  # measurement, tag and field keys are written unescaped


@dataclass(frozen=True)
class Measurement:
    """One measurement: its tags, its fields with their types, what each key holds, and which
    keys a line may leave out."""

    name: str
    message: str
    """The protobuf message each point is made from."""
    tags: tuple[str, ...]
    fields: Mapping[str, FieldType]
    units: Mapping[str, str]
    """Per tag and field, what it holds: a unit (``bytes``, ``0..1``) or a kind of id."""
    optional: Mapping[str, str] = field(default_factory=dict)
    """Keys a line may leave out, with when (absent = unknown or not applicable, never 0)."""

    def __post_init__(self) -> None:
        bad = [n for n in (self.name, *self.tags, *self.fields) if not _NAME.fullmatch(n)]
        if bad:  # keys are written unescaped, so they must not need escaping
            raise ValueError(f"measurement {self.name}: names must be [a-z0-9_]: {bad}")
        keys = {*self.tags, *self.fields}
        if len(keys) != len(self.tags) + len(self.fields):
            raise ValueError(f"measurement {self.name}: a key is used twice")
        if set(self.units) != keys or not set(self.fields.values()) <= {"int", "float", "string"}:
            raise ValueError(f"measurement {self.name}: every key needs a unit, every field int|float|string")
        if not set(self.optional) <= keys:
            raise ValueError(f"measurement {self.name}: optional names unknown keys")

    @cached_property
    def tag_order(self) -> tuple[str, ...]:
        """Tags in the order lines carry them: sorted by key, as InfluxDB prefers."""
        return tuple(sorted(self.tags))


_LINK = "link id"
LINK_LOAD = Measurement(
    "link_load", "LinkLoad",
    tags=("link", "src_node", "dst_node", "resolver"),
    fields={"measured_bytes": "int", "attributed_bytes": "int", "unexplained_bytes": "int",
            "utilization": "float", "flow_count": "int", "measured_valid": "int"},
    units={"link": _LINK, "src_node": "switch or host", "dst_node": "switch or host", "resolver": "hash or infer",
           "measured_bytes": "bytes", "attributed_bytes": "bytes", "unexplained_bytes": "bytes (signed)",
           "utilization": "0..1", "flow_count": "flows", "measured_valid": "0 or 1"},
    optional={"measured_bytes": "measured_valid=0", "unexplained_bytes": "measured_valid=0",
              "utilization": "measured_valid=0"},
)
PATH_LOAD = Measurement(
    "path_load", "PathLoad",
    tags=("src_nic", "dst_nic", "path", "resolver"),
    fields={"bytes": "int", "flow_count": "int", "confidence": "float"},
    units={"src_nic": "NIC name", "dst_nic": "NIC name", "path": "switch link ids or same-leaf",
           "resolver": "hash or infer", "bytes": "bytes", "flow_count": "flows", "confidence": "0..1"},
)
FIM = Measurement(
    "fim", "FimSample",
    tags=("group", "switch", "basis", "resolver", "group_source", "load_source"),
    fields={"fim": "float", "fim_flows": "float", "max_mean_ratio": "float", "cv": "float",
            "total_bytes": "int", "members": "int"},
    units={"group": "ECMP group id or fabric", "switch": "switch", "basis": "measured or attributed",
           "resolver": "hash or infer (attributed basis)", "group_source": "aft or topology",
           "load_source": "next_hop_counters, interface_counters or mixed",
           "fim": "0..1", "fim_flows": "0..1", "max_mean_ratio": "ratio (1..k, of the fair share)", "cv": "ratio",
           "total_bytes": "bytes", "members": "count"},
    optional={"switch": "group=fabric", "fim_flows": "basis=measured", "resolver": "basis=measured",
              "group_source": "group=fabric", "load_source": "basis=attributed or group=fabric"},
)
ECMP_DRIFT = Measurement(
    "ecmp_drift", "EcmpDrift",
    tags=("switch", "group", "kind", "port"),
    fields={"topology_weight": "int", "network_weight": "int", "link": "string"},
    units={"switch": "switch", "group": "ECMP group id (the topology's)",
           "kind": "member_withdrawn, member_added, weight_changed, group_missing or group_added",
           "port": "egress port", "topology_weight": "weight (0: not in the topology)",
           "network_weight": "weight (0: not in the AFT)", "link": _LINK},
    optional={"port": "kind=group_*", "link": "kind=group_*, or a port with no link in the topology"},
)
COLLISION = Measurement(
    "collision", "Collision",
    tags=("group", "switch", "link", "resolver"),
    fields={"link_utilization": "float", "idle_utilization": "float", "idle_link": "string",
            "flow_count": "int", "flow_bytes": "int", "top_bytes": "int", "flows": "string",
            "harmful": "int", "harm_basis": "string", "link_ecn_marked_pkts": "int", "link_dropped_pkts": "int",
            "link_pfc_pauses": "int", "idle_ecn_marked_pkts": "int", "idle_dropped_pkts": "int",
            "idle_pfc_pauses": "int", "receiver_cnps": "int"},
    units={"group": "ECMP group id", "switch": "switch", "link": _LINK, "resolver": "hash or infer",
           "link_utilization": "0..1", "idle_utilization": "0..1", "idle_link": _LINK,
           "flow_count": "flows", "flow_bytes": "bytes", "top_bytes": "bytes", "flows": "text",
           "harmful": "0 or 1", "harm_basis": "switch, nic or empty (unknown)",
           "link_ecn_marked_pkts": "packets (queue 3)", "link_dropped_pkts": "packets (queue 3)",
           "link_pfc_pauses": "frames (priority 3)", "idle_ecn_marked_pkts": "packets (queue 3)",
           "idle_dropped_pkts": "packets (queue 3)", "idle_pfc_pauses": "frames (priority 3)",
           "receiver_cnps": "packets"},
    optional={"harm_basis": "harm unknown"},
)

#: Validity flag of each congestion field group (``<flag>``: the group's fields, left out while it is 0).
LINK_CONGESTION_GROUPS = {
    "pfc_valid": ("pfc_pauses_received", "pfc_pauses_received_roce", "pfc_pauses_sent", "pfc_pauses_sent_roce"),
    "ecn_valid": ("ecn_marked_pkts", "ecn_marked_pkts_roce"),
    "drops_valid": ("dropped_pkts", "dropped_pkts_roce", "dropped_octets", "dropped_octets_roce"),
    "watermark_valid": ("queue_watermark_bytes", "queue_watermark_bytes_roce"),
}
NIC_CONGESTION_GROUPS = {
    "cnp_valid": ("ecn_marked_received", "cnp_sent", "cnp_handled", "cnp_ignored"),
    "retransmit_valid": ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "implied_nak_seq_err"),
    "pfc_valid": ("pfc_pauses_received", "pfc_pauses_received_roce", "pfc_pauses_sent", "pfc_pauses_sent_roce"),
}
_CONGESTION_UNITS = {
    "pfc_pauses_received": "frames", "pfc_pauses_received_roce": "frames (priority 3)",
    "pfc_pauses_sent": "frames", "pfc_pauses_sent_roce": "frames (priority 3)",
    "ecn_marked_pkts": "packets", "ecn_marked_pkts_roce": "packets (queue 3)",
    "dropped_pkts": "packets", "dropped_pkts_roce": "packets (queue 3)",
    "dropped_octets": "bytes", "dropped_octets_roce": "bytes (queue 3)",
    "queue_watermark_bytes": "bytes", "queue_watermark_bytes_roce": "bytes (queue 3)",
    "ecn_marked_received": "packets", "cnp_sent": "packets", "cnp_handled": "packets", "cnp_ignored": "packets",
    "out_of_sequence": "events", "packet_seq_err": "events", "local_ack_timeout_err": "events",
    "implied_nak_seq_err": "events",
}


def _congestion_measurement(name: str, message: str, tags: dict[str, str],
                            groups: Mapping[str, tuple[str, ...]]) -> Measurement:
    """A congestion measurement: each group's fields, optional while its ``*_valid`` flag (an int field) is 0."""
    fields: dict[str, FieldType] = {f: "int" for names in groups.values() for f in names}
    fields |= {flag: "int" for flag in groups}
    units = {**tags, **{f: _CONGESTION_UNITS[f] for names in groups.values() for f in names},
             **{flag: "0 or 1" for flag in groups}}
    optional = {f: f"{flag}=0" for flag, names in groups.items() for f in names}
    return Measurement(name, message, tags=tuple(tags), fields=fields, units=units, optional=optional)


LINK_CONGESTION = _congestion_measurement(
    "link_congestion", "LinkCongestion", {"link": _LINK, "src_node": "switch or host", "dst_node": "switch or host"},
    LINK_CONGESTION_GROUPS)
NIC_CONGESTION = _congestion_measurement(
    "nic_congestion", "NicCongestionSample", {"nic": "NIC name", "leaf": "switch"}, NIC_CONGESTION_GROUPS)

CONGESTION_CAUSE = Measurement(
    "congestion_cause", "CongestionCause",
    tags=("link", "src_node", "dst_node", "cause"),
    fields={"origin": "string", "spread_links": "string", "sibling": "string", "sibling_utilization": "float",
            "utilization": "float", "previous_utilization": "float", "pfc_pauses_received": "int",
            "ecn_marked_pkts": "int", "dropped_pkts": "int", "flow_count": "int", "sources": "int",
            "evidence": "string"},
    units={"link": _LINK, "src_node": "switch or host", "dst_node": "switch or host",
           "cause": "collision, incast, degraded_link, pause_spread or unknown",
           "origin": "NIC name or switch:port", "spread_links": "link ids joined by a bar", "sibling": _LINK,
           "sibling_utilization": "0..1", "utilization": "0..1", "previous_utilization": "0..1",
           "pfc_pauses_received": "frames (priority 3)", "ecn_marked_pkts": "packets (queue 3)",
           "dropped_pkts": "packets (queue 3)", "flow_count": "flows", "sources": "hosts", "evidence": "text"},
    optional={"origin": "cause not pause_spread or incast", "spread_links": "cause not pause_spread",
              "sibling": "cause not collision", "sibling_utilization": "cause not collision",
              "utilization": "not measured", "previous_utilization": "not measured"},
)

COLLECTIVE_PROFILE = Measurement(
    "collective_profile", "CollectiveProfile",
    tags=("host", "job", "comm", "operation", "datatype", "count"),
    fields={"calls": "int", "call_bytes": "int", "bytes": "int", "datatype_bytes": "int", "nranks": "int",
            "ranks": "string", "peers": "string", "first_call_ns": "int", "last_call_ns": "int", "timed_calls": "int",
            "timed_ns": "int", "algo_bw_bytes_per_s": "float", "bus_bw_bytes_per_s": "float"},
    units={"host": "host name", "job": "scheduler job id", "comm": "NCCL communicator id",
           "operation": "AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, Send or Recv",
           "datatype": "ncclDataType_t number", "count": "elements per call (as logged)", "calls": "calls",
           "call_bytes": "bytes per call", "bytes": "bytes (calls x call_bytes)", "datatype_bytes": "bytes",
           "nranks": "ranks", "ranks": "local ranks, comma-separated", "peers": "Send/Recv peer ranks, comma-separated",
           "first_call_ns": "ns since the epoch (enqueue)", "last_call_ns": "ns since the epoch (enqueue)",
           "timed_calls": "calls (estimate, over local ranks)", "timed_ns": "ns (estimate, over local ranks)",
           "algo_bw_bytes_per_s": "bytes/s (estimate, lower bound)",
           "bus_bw_bytes_per_s": "bytes/s (estimate, lower bound)"},
    optional={"job": "no job known", "ranks": "no rank known", "peers": "not Send/Recv",
              "first_call_ns": "untimed log", "last_call_ns": "untimed log", "algo_bw_bytes_per_s": "timed_ns=0",
              "bus_bw_bytes_per_s": "timed_ns=0"},
)
FLOW_PATH = Measurement(
    "flow_path", "FlowPath",
    tags=("src_nic", "dst_nic", "path", "job", "resolver"),
    fields={"flow_id": "string", "udp_src_port": "int", "change": "string", "method": "string", "bytes": "int",
            "confidence": "float", "path_share": "float"},
    units={"src_nic": "NIC name", "dst_nic": "NIC name", "path": "switch link ids or same-leaf",
           "job": "scheduler job id", "resolver": "hash, infer or trace", "flow_id": "flow id",
           "udp_src_port": "UDP port", "change": "first, path, method, heartbeat or ended",
           "method": "hash, infer or trace", "bytes": "bytes (in the record's window)", "confidence": "0..1",
           "path_share": "0..1"},
    optional={"job": "no job known"},
)

INCIDENT = Measurement(
    "incident", "Incident",
    tags=("kind", "top_suspect"),
    fields={"id": "string", "open": "int", "score": "float", "suspects": "string", "flow_count": "int",
            "hosts": "string", "jobs": "string", "collectives": "string", "start_ns": "int", "detected_ns": "int",
            "end_ns": "int", "evidence": "string"},
    units={"kind": "incident kind", "top_suspect": "component id", "id": "incident id (a field: one per incident)",
           "open": "1 open, 0 closed", "score": "set-cover score (summed over windows)",
           "suspects": "component ids, best first", "flow_count": "flows", "hosts": "host names",
           "jobs": "scheduler job ids of the affected flows",
           "collectives": "job/comm/operation of the collectives it slowed",
           "start_ns": "ns since the epoch", "detected_ns": "ns since the epoch", "end_ns": "ns since the epoch",
           "evidence": "text"},
    optional={"end_ns": "open=1"},
)


def markdown_table(measurements: Iterable[Measurement]) -> str:
    """The schema as the Markdown table of docs/stream.md (Measurements)."""
    rows = ["| measurement | key | kind | holds | absent when |", "| --- | --- | --- | --- | --- |"]
    for m in measurements:
        keys = [(k, "tag") for k in m.tags] + [(k, f"{t} field") for k, t in m.fields.items()]
        for i, (k, kind) in enumerate(keys):
            name = f"`{m.name}`" if i == 0 else ""
            rows.append(f"| {name} | `{k}` | {kind} | {m.units[k]} | {m.optional.get(k, '')} |")
    return "\n".join(rows)
