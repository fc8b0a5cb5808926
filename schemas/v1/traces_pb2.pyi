from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TraceStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRACE_STATUS_UNSPECIFIED: _ClassVar[TraceStatus]
    TRACE_STATUS_COMPLETE: _ClassVar[TraceStatus]
    TRACE_STATUS_PARTIAL: _ClassVar[TraceStatus]
    TRACE_STATUS_FAILED: _ClassVar[TraceStatus]

class TraceReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRACE_REASON_UNSPECIFIED: _ClassVar[TraceReason]
    TRACE_REASON_NEW_FLOW: _ClassVar[TraceReason]
    TRACE_REASON_CONTRADICTION: _ClassVar[TraceReason]
    TRACE_REASON_LINK_CHANGE: _ClassVar[TraceReason]
    TRACE_REASON_REFRESH: _ClassVar[TraceReason]
    TRACE_REASON_RETRY: _ClassVar[TraceReason]
TRACE_STATUS_UNSPECIFIED: TraceStatus
TRACE_STATUS_COMPLETE: TraceStatus
TRACE_STATUS_PARTIAL: TraceStatus
TRACE_STATUS_FAILED: TraceStatus
TRACE_REASON_UNSPECIFIED: TraceReason
TRACE_REASON_NEW_FLOW: TraceReason
TRACE_REASON_CONTRADICTION: TraceReason
TRACE_REASON_LINK_CHANGE: TraceReason
TRACE_REASON_REFRESH: TraceReason
TRACE_REASON_RETRY: TraceReason

class TraceHop(_message.Message):
    __slots__ = ("ttl", "address", "rtt_ns", "switch", "port", "icmp_type", "icmp_code", "probes")
    TTL_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RTT_NS_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ICMP_TYPE_FIELD_NUMBER: _ClassVar[int]
    ICMP_CODE_FIELD_NUMBER: _ClassVar[int]
    PROBES_FIELD_NUMBER: _ClassVar[int]
    ttl: int
    address: str
    rtt_ns: int
    switch: str
    port: str
    icmp_type: int
    icmp_code: int
    probes: int
    def __init__(self, ttl: _Optional[int] = ..., address: _Optional[str] = ..., rtt_ns: _Optional[int] = ..., switch: _Optional[str] = ..., port: _Optional[str] = ..., icmp_type: _Optional[int] = ..., icmp_code: _Optional[int] = ..., probes: _Optional[int] = ...) -> None: ...

class PathTrace(_message.Message):
    __slots__ = ("schema_version", "flow_id", "host", "src_nic", "src_leaf", "src_ip", "dst_ip", "udp_src_port", "udp_dst_port", "started_ns", "finished_ns", "hops", "status", "reason", "probes_sent", "probes_lost", "agent_id", "sequence", "valid_until_ns")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    FLOW_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    SRC_NIC_FIELD_NUMBER: _ClassVar[int]
    SRC_LEAF_FIELD_NUMBER: _ClassVar[int]
    SRC_IP_FIELD_NUMBER: _ClassVar[int]
    DST_IP_FIELD_NUMBER: _ClassVar[int]
    UDP_SRC_PORT_FIELD_NUMBER: _ClassVar[int]
    UDP_DST_PORT_FIELD_NUMBER: _ClassVar[int]
    STARTED_NS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_NS_FIELD_NUMBER: _ClassVar[int]
    HOPS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PROBES_SENT_FIELD_NUMBER: _ClassVar[int]
    PROBES_LOST_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    VALID_UNTIL_NS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    flow_id: str
    host: str
    src_nic: str
    src_leaf: str
    src_ip: str
    dst_ip: str
    udp_src_port: int
    udp_dst_port: int
    started_ns: int
    finished_ns: int
    hops: _containers.RepeatedCompositeFieldContainer[TraceHop]
    status: TraceStatus
    reason: TraceReason
    probes_sent: int
    probes_lost: int
    agent_id: str
    sequence: int
    valid_until_ns: int
    def __init__(self, schema_version: _Optional[int] = ..., flow_id: _Optional[str] = ..., host: _Optional[str] = ..., src_nic: _Optional[str] = ..., src_leaf: _Optional[str] = ..., src_ip: _Optional[str] = ..., dst_ip: _Optional[str] = ..., udp_src_port: _Optional[int] = ..., udp_dst_port: _Optional[int] = ..., started_ns: _Optional[int] = ..., finished_ns: _Optional[int] = ..., hops: _Optional[_Iterable[_Union[TraceHop, _Mapping]]] = ..., status: _Optional[_Union[TraceStatus, str]] = ..., reason: _Optional[_Union[TraceReason, str]] = ..., probes_sent: _Optional[int] = ..., probes_lost: _Optional[int] = ..., agent_id: _Optional[str] = ..., sequence: _Optional[int] = ..., valid_until_ns: _Optional[int] = ...) -> None: ...

class TraceRequest(_message.Message):
    __slots__ = ("schema_version", "flow_id", "src_leaf", "reason", "window_end_ns", "detail")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    FLOW_ID_FIELD_NUMBER: _ClassVar[int]
    SRC_LEAF_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    flow_id: str
    src_leaf: str
    reason: TraceReason
    window_end_ns: int
    detail: str
    def __init__(self, schema_version: _Optional[int] = ..., flow_id: _Optional[str] = ..., src_leaf: _Optional[str] = ..., reason: _Optional[_Union[TraceReason, str]] = ..., window_end_ns: _Optional[int] = ..., detail: _Optional[str] = ...) -> None: ...
