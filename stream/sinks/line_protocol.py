"""The processor's outputs as InfluxDB line protocol: the measurement schema as data, and pure
functions from the analytics messages (``LinkLoad``, ``PathLoad``, ``FimSample``, ``Collision``,
``LinkCongestion``, ``NicCongestionSample``, ``EcmpDrift``, ``CongestionCause``, ``CollectiveProfile``, ``Incident``)
to lines.

:data:`MEASUREMENTS` is the one definition of what the processor writes. The encoders are driven
by it (a field is formatted by its declared type, a tag or field it does not name cannot be
written), the docs table below is generated from it (:func:`markdown_table`, checked by a test),
and Grafana dashboards are checked against it.

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

Series per measurement: ``link_load`` 2 x cables x resolvers; ``path_load`` NIC pairs that
exchanged traffic x their paths (all-to-all on N NICs approaches N^2 x paths: the largest one);
``fim`` groups x 2 bases + 2; ``collision`` only where collisions happen, per (group, link);
``link_congestion`` 2 x cables; ``nic_congestion`` NIC ports with congestion counters; ``ecmp_drift`` only while a
switch's AFT differs from the topology, per (group, kind, port); ``congestion_cause`` only where congestion happens,
per (link, cause); ``collective_profile`` per host x job x communicator x operation x datatype x count that ran;
``incident`` (kind, top suspect) pairs that ever had an incident (the id is a field: incidents come and go,
components are the topology's).

| measurement | key | kind | holds | absent when |
| --- | --- | --- | --- | --- |
| `link_load` | `link` | tag | link id |  |
|  | `src_node` | tag | switch or host |  |
|  | `dst_node` | tag | switch or host |  |
|  | `resolver` | tag | hash or infer |  |
|  | `measured_bytes` | int field | bytes | measured_valid=0 |
|  | `attributed_bytes` | int field | bytes |  |
|  | `unexplained_bytes` | int field | bytes (signed) | measured_valid=0 |
|  | `utilization` | float field | 0..1 | measured_valid=0 |
|  | `flow_count` | int field | flows |  |
|  | `measured_valid` | int field | 0 or 1 |  |
| `path_load` | `src_nic` | tag | NIC name |  |
|  | `dst_nic` | tag | NIC name |  |
|  | `path` | tag | switch link ids or same-leaf |  |
|  | `resolver` | tag | hash or infer |  |
|  | `bytes` | int field | bytes |  |
|  | `flow_count` | int field | flows |  |
|  | `confidence` | float field | 0..1 |  |
| `fim` | `group` | tag | ECMP group id or fabric |  |
|  | `switch` | tag | switch | group=fabric |
|  | `basis` | tag | measured or attributed |  |
|  | `resolver` | tag | hash or infer (attributed basis) | basis=measured |
|  | `group_source` | tag | aft or topology | group=fabric |
|  | `load_source` | tag | next_hop_counters, interface_counters or mixed | basis=attributed or group=fabric |
|  | `fim` | float field | 0..1 |  |
|  | `fim_flows` | float field | 0..1 | basis=measured |
|  | `max_mean_ratio` | float field | ratio (1..k, of the fair share) |  |
|  | `cv` | float field | ratio |  |
|  | `total_bytes` | int field | bytes |  |
|  | `members` | int field | count |  |
| `collision` | `group` | tag | ECMP group id |  |
|  | `switch` | tag | switch |  |
|  | `link` | tag | link id |  |
|  | `resolver` | tag | hash or infer |  |
|  | `link_utilization` | float field | 0..1 |  |
|  | `idle_utilization` | float field | 0..1 |  |
|  | `idle_link` | string field | link id |  |
|  | `flow_count` | int field | flows |  |
|  | `flow_bytes` | int field | bytes |  |
|  | `top_bytes` | int field | bytes |  |
|  | `flows` | string field | text |  |
|  | `harmful` | int field | 0 or 1 |  |
|  | `harm_basis` | string field | switch, nic or empty (unknown) | harm unknown |
|  | `link_ecn_marked_pkts` | int field | packets (queue 3) |  |
|  | `link_dropped_pkts` | int field | packets (queue 3) |  |
|  | `link_pfc_pauses` | int field | frames (priority 3) |  |
|  | `idle_ecn_marked_pkts` | int field | packets (queue 3) |  |
|  | `idle_dropped_pkts` | int field | packets (queue 3) |  |
|  | `idle_pfc_pauses` | int field | frames (priority 3) |  |
|  | `receiver_cnps` | int field | packets |  |
| `link_congestion` | `link` | tag | link id |  |
|  | `src_node` | tag | switch or host |  |
|  | `dst_node` | tag | switch or host |  |
|  | `pfc_pauses_received` | int field | frames | pfc_valid=0 |
|  | `pfc_pauses_received_roce` | int field | frames (priority 3) | pfc_valid=0 |
|  | `pfc_pauses_sent` | int field | frames | pfc_valid=0 |
|  | `pfc_pauses_sent_roce` | int field | frames (priority 3) | pfc_valid=0 |
|  | `ecn_marked_pkts` | int field | packets | ecn_valid=0 |
|  | `ecn_marked_pkts_roce` | int field | packets (queue 3) | ecn_valid=0 |
|  | `dropped_pkts` | int field | packets | drops_valid=0 |
|  | `dropped_pkts_roce` | int field | packets (queue 3) | drops_valid=0 |
|  | `dropped_octets` | int field | bytes | drops_valid=0 |
|  | `dropped_octets_roce` | int field | bytes (queue 3) | drops_valid=0 |
|  | `queue_watermark_bytes` | int field | bytes | watermark_valid=0 |
|  | `queue_watermark_bytes_roce` | int field | bytes (queue 3) | watermark_valid=0 |
|  | `pfc_valid` | int field | 0 or 1 |  |
|  | `ecn_valid` | int field | 0 or 1 |  |
|  | `drops_valid` | int field | 0 or 1 |  |
|  | `watermark_valid` | int field | 0 or 1 |  |
| `nic_congestion` | `nic` | tag | NIC name |  |
|  | `leaf` | tag | switch |  |
|  | `ecn_marked_received` | int field | packets | cnp_valid=0 |
|  | `cnp_sent` | int field | packets | cnp_valid=0 |
|  | `cnp_handled` | int field | packets | cnp_valid=0 |
|  | `cnp_ignored` | int field | packets | cnp_valid=0 |
|  | `out_of_sequence` | int field | events | retransmit_valid=0 |
|  | `packet_seq_err` | int field | events | retransmit_valid=0 |
|  | `local_ack_timeout_err` | int field | events | retransmit_valid=0 |
|  | `implied_nak_seq_err` | int field | events | retransmit_valid=0 |
|  | `pfc_pauses_received` | int field | frames | pfc_valid=0 |
|  | `pfc_pauses_received_roce` | int field | frames (priority 3) | pfc_valid=0 |
|  | `pfc_pauses_sent` | int field | frames | pfc_valid=0 |
|  | `pfc_pauses_sent_roce` | int field | frames (priority 3) | pfc_valid=0 |
|  | `cnp_valid` | int field | 0 or 1 |  |
|  | `retransmit_valid` | int field | 0 or 1 |  |
|  | `pfc_valid` | int field | 0 or 1 |  |
| `ecmp_drift` | `switch` | tag | switch |  |
|  | `group` | tag | ECMP group id (the topology's) |  |
|  | `kind` | tag | member_withdrawn, member_added, weight_changed, group_missing or group_added |  |
|  | `port` | tag | egress port | kind=group_* |
|  | `topology_weight` | int field | weight (0: not in the topology) |  |
|  | `network_weight` | int field | weight (0: not in the AFT) |  |
|  | `link` | string field | link id | kind=group_*, or a port with no link in the topology |
| `congestion_cause` | `link` | tag | link id |  |
|  | `src_node` | tag | switch or host |  |
|  | `dst_node` | tag | switch or host |  |
|  | `cause` | tag | collision, incast, degraded_link, pause_spread or unknown |  |
|  | `origin` | string field | NIC name or switch:port | cause not pause_spread or incast |
|  | `spread_links` | string field | link ids joined by a bar | cause not pause_spread |
|  | `sibling` | string field | link id | cause not collision |
|  | `sibling_utilization` | float field | 0..1 | cause not collision |
|  | `utilization` | float field | 0..1 | not measured |
|  | `previous_utilization` | float field | 0..1 | not measured |
|  | `pfc_pauses_received` | int field | frames (priority 3) |  |
|  | `ecn_marked_pkts` | int field | packets (queue 3) |  |
|  | `dropped_pkts` | int field | packets (queue 3) |  |
|  | `flow_count` | int field | flows |  |
|  | `sources` | int field | hosts |  |
|  | `evidence` | string field | text |  |
| `collective_profile` | `host` | tag | host name |  |
|  | `job` | tag | scheduler job id | no job known |
|  | `comm` | tag | NCCL communicator id |  |
|  | `operation` | tag | AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, Send or Recv |  |
|  | `datatype` | tag | ncclDataType_t number |  |
|  | `count` | tag | elements per call (as logged) |  |
|  | `calls` | int field | calls |  |
|  | `call_bytes` | int field | bytes per call |  |
|  | `bytes` | int field | bytes (calls x call_bytes) |  |
|  | `datatype_bytes` | int field | bytes |  |
|  | `nranks` | int field | ranks |  |
|  | `ranks` | string field | local ranks, comma-separated | no rank known |
|  | `peers` | string field | Send/Recv peer ranks, comma-separated | not Send/Recv |
|  | `first_call_ns` | int field | ns since the epoch (enqueue) | untimed log |
|  | `last_call_ns` | int field | ns since the epoch (enqueue) | untimed log |
|  | `timed_calls` | int field | calls (estimate, over local ranks) |  |
|  | `timed_ns` | int field | ns (estimate, over local ranks) |  |
|  | `algo_bw_bytes_per_s` | float field | bytes/s (estimate, lower bound) | timed_ns=0 |
|  | `bus_bw_bytes_per_s` | float field | bytes/s (estimate, lower bound) | timed_ns=0 |
| `incident` | `kind` | tag | incident kind |  |
|  | `top_suspect` | tag | component id |  |
|  | `id` | string field | incident id (a field: one per incident) |  |
|  | `open` | int field | 1 open, 0 closed |  |
|  | `score` | float field | set-cover score (summed over windows) |  |
|  | `suspects` | string field | component ids, best first |  |
|  | `flow_count` | int field | flows |  |
|  | `hosts` | string field | host names |  |
|  | `jobs` | string field | scheduler job ids of the affected flows |  |
|  | `collectives` | string field | job/comm/operation of the collectives it slowed |  |
|  | `start_ns` | int field | ns since the epoch |  |
|  | `detected_ns` | int field | ns since the epoch |  |
|  | `end_ns` | int field | ns since the epoch | open=1 |
|  | `evidence` | string field | text |  |

Tag values: ``link`` and ``idle_link`` are directed link ids ``<node>:<port>><node>:<port>``;
``src_nic``/``dst_nic`` are topology NIC names ``<host>:<rdma_device>``; ``path`` is the
switch-to-switch part of the path (its link ids joined by ``|``; the host links are implied by the
NICs), or ``same-leaf`` when both NICs hang off one leaf; ``basis`` is ``measured`` or
``attributed``; ``resolver`` is ``hash`` or ``infer``. ``collision.flows`` is compact text,
heaviest first, at most :data:`MAX_FLOWS_TEXT` flows:
``10.0.0.1>10.0.3.1:sport=52208 job=j42 coll=AllReduce 1.2GB; ...``.

Why one module over 400 lines: a fifth of it is this docstring (the measurement table, checked
against :func:`markdown_table`); the rest is one schema and the encoders it drives, kept together
so that nothing can be written that the schema does not declare.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Literal

from flowtracer.schemas.v1 import analytics_pb2, common_pb2, flows_pb2

FieldType = Literal["int", "float", "string"]

SCHEMA_VERSION = 1
"""The analytics message version these encoders understand."""

MAX_FLOWS_TEXT = 8
"""Flows spelled out in ``collision.flows``; the rest are summarised as ``+N more``."""

SAME_LEAF = "same-leaf"
"""``path_load.path`` when source and destination NIC are on the same leaf (no switch links)."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NAME = re.compile(r"[a-z][a-z0-9_]*")  # measurement, tag and field keys are written unescaped


class PointError(ValueError):
    """A message cannot be written as a point; ``str()`` names the message, the entity and the
    field. The processor should dead-letter the message: writing it would fail the whole batch."""


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
_LINK_CONGESTION_GROUPS = {
    "pfc_valid": ("pfc_pauses_received", "pfc_pauses_received_roce", "pfc_pauses_sent", "pfc_pauses_sent_roce"),
    "ecn_valid": ("ecn_marked_pkts", "ecn_marked_pkts_roce"),
    "drops_valid": ("dropped_pkts", "dropped_pkts_roce", "dropped_octets", "dropped_octets_roce"),
    "watermark_valid": ("queue_watermark_bytes", "queue_watermark_bytes_roce"),
}
_NIC_CONGESTION_GROUPS = {
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
    _LINK_CONGESTION_GROUPS)
NIC_CONGESTION = _congestion_measurement(
    "nic_congestion", "NicCongestionSample", {"nic": "NIC name", "leaf": "switch"}, _NIC_CONGESTION_GROUPS)

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

MEASUREMENTS: dict[str, Measurement] = {m.name: m for m in (LINK_LOAD, PATH_LOAD, FIM, COLLISION, LINK_CONGESTION,
                                                          NIC_CONGESTION, ECMP_DRIFT, CONGESTION_CAUSE,
                                                          COLLECTIVE_PROFILE, INCIDENT)}
"""Every measurement the processor writes, by name."""


def markdown_table(measurements: Iterable[Measurement] = MEASUREMENTS.values()) -> str:
    """The schema as the Markdown table in this module's docstring (and the stream docs)."""
    rows = ["| measurement | key | kind | holds | absent when |", "| --- | --- | --- | --- | --- |"]
    for m in measurements:
        keys = [(k, "tag") for k in m.tags] + [(k, f"{t} field") for k, t in m.fields.items()]
        for i, (k, kind) in enumerate(keys):
            name = f"`{m.name}`" if i == 0 else ""
            rows.append(f"| {name} | `{k}` | {kind} | {m.units[k]} | {m.optional.get(k, '')} |")
    return "\n".join(rows)


# -- line protocol ---------------------------------------------------------------------------------

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
    return _congestion_line(LINK_CONGESTION, _LINK_CONGESTION_GROUPS, m,
                            f"LinkCongestion link={m.link!r} window_end_ns={m.window_end_ns}")


def nic_congestion_line(m: analytics_pb2.NicCongestionSample) -> str:
    """``nic_congestion`` line of one NicCongestionSample; a group's fields only while its ``*_valid`` is set."""
    return _congestion_line(NIC_CONGESTION, _NIC_CONGESTION_GROUPS, m,
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


ENCODERS: dict[type, Callable[[Any], str]] = {
    analytics_pb2.LinkLoad: link_load_line,
    analytics_pb2.PathLoad: path_load_line,
    analytics_pb2.FimSample: fim_line,
    analytics_pb2.Collision: collision_line,
    analytics_pb2.LinkCongestion: link_congestion_line,
    analytics_pb2.NicCongestionSample: nic_congestion_line,
    analytics_pb2.EcmpDrift: ecmp_drift_line,
    analytics_pb2.CongestionCause: congestion_cause_line,
    flows_pb2.CollectiveProfile: collective_profile_line,
}
"""Message class -> its line encoder."""


def to_lines(messages: Iterable[Any]) -> list[str]:
    """Lines of any mix of the analytics messages :data:`ENCODERS` knows, in order."""
    out = []
    for msg in messages:
        encode = ENCODERS.get(type(msg))
        if encode is None:
            raise PointError(f"no line encoder for {type(msg).__name__}")
        out.append(encode(msg))
    return out
