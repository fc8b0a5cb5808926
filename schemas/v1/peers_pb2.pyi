from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PortQpEnds(_message.Message):
    __slots__ = ("rdma_device", "port", "ip", "lqpn", "rqpn")
    RDMA_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    IP_FIELD_NUMBER: _ClassVar[int]
    LQPN_FIELD_NUMBER: _ClassVar[int]
    RQPN_FIELD_NUMBER: _ClassVar[int]
    rdma_device: str
    port: int
    ip: str
    lqpn: _containers.RepeatedScalarFieldContainer[int]
    rqpn: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, rdma_device: _Optional[str] = ..., port: _Optional[int] = ..., ip: _Optional[str] = ..., lqpn: _Optional[_Iterable[int]] = ..., rqpn: _Optional[_Iterable[int]] = ...) -> None: ...

class QpEnds(_message.Message):
    __slots__ = ("schema_version", "host", "time_ns", "agent_id", "ports")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    host: str
    time_ns: int
    agent_id: str
    ports: _containers.RepeatedCompositeFieldContainer[PortQpEnds]
    def __init__(self, schema_version: _Optional[int] = ..., host: _Optional[str] = ..., time_ns: _Optional[int] = ..., agent_id: _Optional[str] = ..., ports: _Optional[_Iterable[_Union[PortQpEnds, _Mapping]]] = ...) -> None: ...
