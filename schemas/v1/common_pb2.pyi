from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeltaStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELTA_STATUS_OK: _ClassVar[DeltaStatus]
    DELTA_STATUS_BASELINE: _ClassVar[DeltaStatus]
    DELTA_STATUS_RESET: _ClassVar[DeltaStatus]
    DELTA_STATUS_WRAPPED: _ClassVar[DeltaStatus]
    DELTA_STATUS_GAP: _ClassVar[DeltaStatus]
DELTA_STATUS_OK: DeltaStatus
DELTA_STATUS_BASELINE: DeltaStatus
DELTA_STATUS_RESET: DeltaStatus
DELTA_STATUS_WRAPPED: DeltaStatus
DELTA_STATUS_GAP: DeltaStatus

class Counter(_message.Message):
    __slots__ = ("value", "delta", "status")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    value: int
    delta: int
    status: DeltaStatus
    def __init__(self, value: _Optional[int] = ..., delta: _Optional[int] = ..., status: _Optional[_Union[DeltaStatus, str]] = ...) -> None: ...

class FlowKey(_message.Message):
    __slots__ = ("src_ip", "dst_ip", "ip_proto", "udp_src_port", "udp_dst_port", "dst_qpn")
    SRC_IP_FIELD_NUMBER: _ClassVar[int]
    DST_IP_FIELD_NUMBER: _ClassVar[int]
    IP_PROTO_FIELD_NUMBER: _ClassVar[int]
    UDP_SRC_PORT_FIELD_NUMBER: _ClassVar[int]
    UDP_DST_PORT_FIELD_NUMBER: _ClassVar[int]
    DST_QPN_FIELD_NUMBER: _ClassVar[int]
    src_ip: str
    dst_ip: str
    ip_proto: int
    udp_src_port: int
    udp_dst_port: int
    dst_qpn: int
    def __init__(self, src_ip: _Optional[str] = ..., dst_ip: _Optional[str] = ..., ip_proto: _Optional[int] = ..., udp_src_port: _Optional[int] = ..., udp_dst_port: _Optional[int] = ..., dst_qpn: _Optional[int] = ...) -> None: ...

class FlowRef(_message.Message):
    __slots__ = ("key", "src_host", "dst_host", "lqpn", "job_id", "collective", "comm_id", "bytes", "confidence", "link_share", "method", "cnp_share")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SRC_HOST_FIELD_NUMBER: _ClassVar[int]
    DST_HOST_FIELD_NUMBER: _ClassVar[int]
    LQPN_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTIVE_FIELD_NUMBER: _ClassVar[int]
    COMM_ID_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    LINK_SHARE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    CNP_SHARE_FIELD_NUMBER: _ClassVar[int]
    key: FlowKey
    src_host: str
    dst_host: str
    lqpn: int
    job_id: str
    collective: str
    comm_id: str
    bytes: int
    confidence: float
    link_share: float
    method: str
    cnp_share: float
    def __init__(self, key: _Optional[_Union[FlowKey, _Mapping]] = ..., src_host: _Optional[str] = ..., dst_host: _Optional[str] = ..., lqpn: _Optional[int] = ..., job_id: _Optional[str] = ..., collective: _Optional[str] = ..., comm_id: _Optional[str] = ..., bytes: _Optional[int] = ..., confidence: _Optional[float] = ..., link_share: _Optional[float] = ..., method: _Optional[str] = ..., cnp_share: _Optional[float] = ...) -> None: ...
