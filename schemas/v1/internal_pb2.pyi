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
    __slots__ = ("link", "switch", "bytes", "flow_count", "flows", "confidence", "src_nic_count", "dst_nic")
    LINK_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    FLOW_COUNT_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    SRC_NIC_COUNT_FIELD_NUMBER: _ClassVar[int]
    DST_NIC_FIELD_NUMBER: _ClassVar[int]
    link: str
    switch: str
    bytes: int
    flow_count: int
    flows: _containers.RepeatedCompositeFieldContainer[_common_pb2.FlowRef]
    confidence: float
    src_nic_count: int
    dst_nic: str
    def __init__(self, link: _Optional[str] = ..., switch: _Optional[str] = ..., bytes: _Optional[int] = ..., flow_count: _Optional[int] = ..., flows: _Optional[_Iterable[_Union[_common_pb2.FlowRef, _Mapping]]] = ..., confidence: _Optional[float] = ..., src_nic_count: _Optional[int] = ..., dst_nic: _Optional[str] = ...) -> None: ...

class GroupFimBatch(_message.Message):
    __slots__ = ("schema_version", "window_end_ns", "source_partition", "source_partitions", "groups", "congested")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PARTITION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    CONGESTED_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_end_ns: int
    source_partition: int
    source_partitions: int
    groups: _containers.RepeatedCompositeFieldContainer[_analytics_pb2.FimSample]
    congested: _containers.RepeatedCompositeFieldContainer[CongestedLink]
    def __init__(self, schema_version: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., source_partition: _Optional[int] = ..., source_partitions: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[_analytics_pb2.FimSample, _Mapping]]] = ..., congested: _Optional[_Iterable[_Union[CongestedLink, _Mapping]]] = ...) -> None: ...

class CongestedLink(_message.Message):
    __slots__ = ("congestion", "utilization", "previous_utilization", "flow_count", "sources", "destination", "sibling", "sibling_utilization", "sibling_congested", "to_host")
    CONGESTION_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    FLOW_COUNT_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    SIBLING_FIELD_NUMBER: _ClassVar[int]
    SIBLING_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    SIBLING_CONGESTED_FIELD_NUMBER: _ClassVar[int]
    TO_HOST_FIELD_NUMBER: _ClassVar[int]
    congestion: _analytics_pb2.LinkCongestion
    utilization: float
    previous_utilization: float
    flow_count: int
    sources: int
    destination: str
    sibling: str
    sibling_utilization: float
    sibling_congested: bool
    to_host: bool
    def __init__(self, congestion: _Optional[_Union[_analytics_pb2.LinkCongestion, _Mapping]] = ..., utilization: _Optional[float] = ..., previous_utilization: _Optional[float] = ..., flow_count: _Optional[int] = ..., sources: _Optional[int] = ..., destination: _Optional[str] = ..., sibling: _Optional[str] = ..., sibling_utilization: _Optional[float] = ..., sibling_congested: _Optional[bool] = ..., to_host: _Optional[bool] = ...) -> None: ...
