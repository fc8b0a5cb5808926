from flowtracer.schemas.v1 import common_pb2 as _common_pb2
from flowtracer.schemas.v1 import analytics_pb2 as _analytics_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AttributionBatch(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "source_partition", "source_partitions", "resolver", "links", "nic_cnps")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PARTITION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    NIC_CNPS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    source_partition: int
    source_partitions: int
    resolver: str
    links: _containers.RepeatedCompositeFieldContainer[LinkShare]
    nic_cnps: _containers.RepeatedCompositeFieldContainer[NicCnps]
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., source_partition: _Optional[int] = ..., source_partitions: _Optional[int] = ..., resolver: _Optional[str] = ..., links: _Optional[_Iterable[_Union[LinkShare, _Mapping]]] = ..., nic_cnps: _Optional[_Iterable[_Union[NicCnps, _Mapping]]] = ...) -> None: ...

class NicCnps(_message.Message):
    __slots__ = ("nic", "cnp_sent")
    NIC_FIELD_NUMBER: _ClassVar[int]
    CNP_SENT_FIELD_NUMBER: _ClassVar[int]
    nic: str
    cnp_sent: int
    def __init__(self, nic: _Optional[str] = ..., cnp_sent: _Optional[int] = ...) -> None: ...

class LinkShare(_message.Message):
    __slots__ = ("link", "switch", "bytes", "flow_count", "flows", "confidence")
    LINK_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    FLOW_COUNT_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    link: str
    switch: str
    bytes: int
    flow_count: int
    flows: _containers.RepeatedCompositeFieldContainer[_common_pb2.FlowRef]
    confidence: float
    def __init__(self, link: _Optional[str] = ..., switch: _Optional[str] = ..., bytes: _Optional[int] = ..., flow_count: _Optional[int] = ..., flows: _Optional[_Iterable[_Union[_common_pb2.FlowRef, _Mapping]]] = ..., confidence: _Optional[float] = ...) -> None: ...

class GroupFimBatch(_message.Message):
    __slots__ = ("schema_version", "window_end_ns", "source_partition", "source_partitions", "groups")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PARTITION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_end_ns: int
    source_partition: int
    source_partitions: int
    groups: _containers.RepeatedCompositeFieldContainer[_analytics_pb2.FimSample]
    def __init__(self, schema_version: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., source_partition: _Optional[int] = ..., source_partitions: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[_analytics_pb2.FimSample, _Mapping]]] = ...) -> None: ...
