from flowtracer.schemas.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OperStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPER_STATUS_UNSPECIFIED: _ClassVar[OperStatus]
    OPER_STATUS_UP: _ClassVar[OperStatus]
    OPER_STATUS_DOWN: _ClassVar[OperStatus]
    OPER_STATUS_TESTING: _ClassVar[OperStatus]
    OPER_STATUS_UNKNOWN: _ClassVar[OperStatus]
    OPER_STATUS_DORMANT: _ClassVar[OperStatus]
    OPER_STATUS_NOT_PRESENT: _ClassVar[OperStatus]
    OPER_STATUS_LOWER_LAYER_DOWN: _ClassVar[OperStatus]
OPER_STATUS_UNSPECIFIED: OperStatus
OPER_STATUS_UP: OperStatus
OPER_STATUS_DOWN: OperStatus
OPER_STATUS_TESTING: OperStatus
OPER_STATUS_UNKNOWN: OperStatus
OPER_STATUS_DORMANT: OperStatus
OPER_STATUS_NOT_PRESENT: OperStatus
OPER_STATUS_LOWER_LAYER_DOWN: OperStatus

class CounterBatch(_message.Message):
    __slots__ = ("schema_version", "switch", "timestamp_ns", "collector_id", "sequence", "received_ns", "session", "interfaces", "next_hops")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    COLLECTOR_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_NS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    INTERFACES_FIELD_NUMBER: _ClassVar[int]
    NEXT_HOPS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    switch: str
    timestamp_ns: int
    collector_id: str
    sequence: int
    received_ns: int
    session: int
    interfaces: _containers.RepeatedCompositeFieldContainer[InterfaceCounters]
    next_hops: _containers.RepeatedCompositeFieldContainer[NextHopCounters]
    def __init__(self, schema_version: _Optional[int] = ..., switch: _Optional[str] = ..., timestamp_ns: _Optional[int] = ..., collector_id: _Optional[str] = ..., sequence: _Optional[int] = ..., received_ns: _Optional[int] = ..., session: _Optional[int] = ..., interfaces: _Optional[_Iterable[_Union[InterfaceCounters, _Mapping]]] = ..., next_hops: _Optional[_Iterable[_Union[NextHopCounters, _Mapping]]] = ...) -> None: ...

class InterfaceCounters(_message.Message):
    __slots__ = ("name", "oper_status", "speed_bps", "interval_ns", "last_clear_ns", "last_change_ns", "in_octets", "out_octets", "in_pkts", "out_pkts", "in_unicast_pkts", "out_unicast_pkts", "in_discards", "out_discards", "in_errors", "out_errors")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPER_STATUS_FIELD_NUMBER: _ClassVar[int]
    SPEED_BPS_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_NS_FIELD_NUMBER: _ClassVar[int]
    LAST_CLEAR_NS_FIELD_NUMBER: _ClassVar[int]
    LAST_CHANGE_NS_FIELD_NUMBER: _ClassVar[int]
    IN_OCTETS_FIELD_NUMBER: _ClassVar[int]
    OUT_OCTETS_FIELD_NUMBER: _ClassVar[int]
    IN_PKTS_FIELD_NUMBER: _ClassVar[int]
    OUT_PKTS_FIELD_NUMBER: _ClassVar[int]
    IN_UNICAST_PKTS_FIELD_NUMBER: _ClassVar[int]
    OUT_UNICAST_PKTS_FIELD_NUMBER: _ClassVar[int]
    IN_DISCARDS_FIELD_NUMBER: _ClassVar[int]
    OUT_DISCARDS_FIELD_NUMBER: _ClassVar[int]
    IN_ERRORS_FIELD_NUMBER: _ClassVar[int]
    OUT_ERRORS_FIELD_NUMBER: _ClassVar[int]
    name: str
    oper_status: OperStatus
    speed_bps: int
    interval_ns: int
    last_clear_ns: int
    last_change_ns: int
    in_octets: _common_pb2.Counter
    out_octets: _common_pb2.Counter
    in_pkts: _common_pb2.Counter
    out_pkts: _common_pb2.Counter
    in_unicast_pkts: _common_pb2.Counter
    out_unicast_pkts: _common_pb2.Counter
    in_discards: _common_pb2.Counter
    out_discards: _common_pb2.Counter
    in_errors: _common_pb2.Counter
    out_errors: _common_pb2.Counter
    def __init__(self, name: _Optional[str] = ..., oper_status: _Optional[_Union[OperStatus, str]] = ..., speed_bps: _Optional[int] = ..., interval_ns: _Optional[int] = ..., last_clear_ns: _Optional[int] = ..., last_change_ns: _Optional[int] = ..., in_octets: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., out_octets: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., in_pkts: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., out_pkts: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., in_unicast_pkts: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., out_unicast_pkts: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., in_discards: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., out_discards: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., in_errors: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., out_errors: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ...) -> None: ...

class NextHopCounters(_message.Message):
    __slots__ = ("group", "index", "egress_interface", "next_hop_ip", "weight", "interval_ns", "octets_forwarded", "packets_forwarded", "group_weights")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    EGRESS_INTERFACE_FIELD_NUMBER: _ClassVar[int]
    NEXT_HOP_IP_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_NS_FIELD_NUMBER: _ClassVar[int]
    OCTETS_FORWARDED_FIELD_NUMBER: _ClassVar[int]
    PACKETS_FORWARDED_FIELD_NUMBER: _ClassVar[int]
    GROUP_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    group: str
    index: int
    egress_interface: str
    next_hop_ip: str
    weight: int
    interval_ns: int
    octets_forwarded: _common_pb2.Counter
    packets_forwarded: _common_pb2.Counter
    group_weights: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, group: _Optional[str] = ..., index: _Optional[int] = ..., egress_interface: _Optional[str] = ..., next_hop_ip: _Optional[str] = ..., weight: _Optional[int] = ..., interval_ns: _Optional[int] = ..., octets_forwarded: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., packets_forwarded: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., group_weights: _Optional[_Iterable[int]] = ...) -> None: ...

class CongestionBatch(_message.Message):
    __slots__ = ("schema_version", "switch", "timestamp_ns", "collector_id", "sequence", "received_ns", "session", "queues", "pfc")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    COLLECTOR_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_NS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    PFC_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    switch: str
    timestamp_ns: int
    collector_id: str
    sequence: int
    received_ns: int
    session: int
    queues: _containers.RepeatedCompositeFieldContainer[QueueCounters]
    pfc: _containers.RepeatedCompositeFieldContainer[PfcCounters]
    def __init__(self, schema_version: _Optional[int] = ..., switch: _Optional[str] = ..., timestamp_ns: _Optional[int] = ..., collector_id: _Optional[str] = ..., sequence: _Optional[int] = ..., received_ns: _Optional[int] = ..., session: _Optional[int] = ..., queues: _Optional[_Iterable[_Union[QueueCounters, _Mapping]]] = ..., pfc: _Optional[_Iterable[_Union[PfcCounters, _Mapping]]] = ...) -> None: ...

class QueueCounters(_message.Message):
    __slots__ = ("interface", "queue", "interval_ns", "transmit_pkts", "transmit_octets", "dropped_pkts", "dropped_octets", "ecn_marked_pkts", "ecn_marked_octets", "max_queue_len_bytes", "has_max_queue_len")
    INTERFACE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_NS_FIELD_NUMBER: _ClassVar[int]
    TRANSMIT_PKTS_FIELD_NUMBER: _ClassVar[int]
    TRANSMIT_OCTETS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_PKTS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_OCTETS_FIELD_NUMBER: _ClassVar[int]
    ECN_MARKED_PKTS_FIELD_NUMBER: _ClassVar[int]
    ECN_MARKED_OCTETS_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_LEN_BYTES_FIELD_NUMBER: _ClassVar[int]
    HAS_MAX_QUEUE_LEN_FIELD_NUMBER: _ClassVar[int]
    interface: str
    queue: str
    interval_ns: int
    transmit_pkts: _common_pb2.Counter
    transmit_octets: _common_pb2.Counter
    dropped_pkts: _common_pb2.Counter
    dropped_octets: _common_pb2.Counter
    ecn_marked_pkts: _common_pb2.Counter
    ecn_marked_octets: _common_pb2.Counter
    max_queue_len_bytes: int
    has_max_queue_len: bool
    def __init__(self, interface: _Optional[str] = ..., queue: _Optional[str] = ..., interval_ns: _Optional[int] = ..., transmit_pkts: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., transmit_octets: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., dropped_pkts: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., dropped_octets: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., ecn_marked_pkts: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., ecn_marked_octets: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., max_queue_len_bytes: _Optional[int] = ..., has_max_queue_len: _Optional[bool] = ...) -> None: ...

class PfcCounters(_message.Message):
    __slots__ = ("interface", "priority", "interval_ns", "pause_frames_rx", "pause_frames_tx")
    INTERFACE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_NS_FIELD_NUMBER: _ClassVar[int]
    PAUSE_FRAMES_RX_FIELD_NUMBER: _ClassVar[int]
    PAUSE_FRAMES_TX_FIELD_NUMBER: _ClassVar[int]
    interface: str
    priority: int
    interval_ns: int
    pause_frames_rx: _common_pb2.Counter
    pause_frames_tx: _common_pb2.Counter
    def __init__(self, interface: _Optional[str] = ..., priority: _Optional[int] = ..., interval_ns: _Optional[int] = ..., pause_frames_rx: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., pause_frames_tx: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ...) -> None: ...
