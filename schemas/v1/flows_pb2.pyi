from flowtracer.schemas.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QpType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QP_TYPE_UNSPECIFIED: _ClassVar[QpType]
    QP_TYPE_RC: _ClassVar[QpType]
    QP_TYPE_UC: _ClassVar[QpType]
    QP_TYPE_UD: _ClassVar[QpType]
    QP_TYPE_XRC: _ClassVar[QpType]
    QP_TYPE_RAW: _ClassVar[QpType]

class QpState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QP_STATE_UNSPECIFIED: _ClassVar[QpState]
    QP_STATE_RESET: _ClassVar[QpState]
    QP_STATE_INIT: _ClassVar[QpState]
    QP_STATE_RTR: _ClassVar[QpState]
    QP_STATE_RTS: _ClassVar[QpState]
    QP_STATE_SQD: _ClassVar[QpState]
    QP_STATE_SQE: _ClassVar[QpState]
    QP_STATE_ERR: _ClassVar[QpState]

class ByteSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BYTE_SOURCE_UNSPECIFIED: _ClassVar[ByteSource]
    BYTE_SOURCE_QP_COUNTER: _ClassVar[ByteSource]
    BYTE_SOURCE_PSN_ESTIMATE: _ClassVar[ByteSource]
    BYTE_SOURCE_NCCL_PROFILER: _ClassVar[ByteSource]
    BYTE_SOURCE_SIMULATOR: _ClassVar[ByteSource]
QP_TYPE_UNSPECIFIED: QpType
QP_TYPE_RC: QpType
QP_TYPE_UC: QpType
QP_TYPE_UD: QpType
QP_TYPE_XRC: QpType
QP_TYPE_RAW: QpType
QP_STATE_UNSPECIFIED: QpState
QP_STATE_RESET: QpState
QP_STATE_INIT: QpState
QP_STATE_RTR: QpState
QP_STATE_RTS: QpState
QP_STATE_SQD: QpState
QP_STATE_SQE: QpState
QP_STATE_ERR: QpState
BYTE_SOURCE_UNSPECIFIED: ByteSource
BYTE_SOURCE_QP_COUNTER: ByteSource
BYTE_SOURCE_PSN_ESTIMATE: ByteSource
BYTE_SOURCE_NCCL_PROFILER: ByteSource
BYTE_SOURCE_SIMULATOR: ByteSource

class FlowBatch(_message.Message):
    __slots__ = ("schema_version", "host", "leaf", "window_start_ns", "window_end_ns", "agent_id", "sequence", "flows", "ports", "malformed_records", "received_ns", "collectives")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    LEAF_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    MALFORMED_RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_NS_FIELD_NUMBER: _ClassVar[int]
    COLLECTIVES_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    host: str
    leaf: str
    window_start_ns: int
    window_end_ns: int
    agent_id: str
    sequence: int
    flows: _containers.RepeatedCompositeFieldContainer[Flow]
    ports: _containers.RepeatedCompositeFieldContainer[PortTotals]
    malformed_records: int
    received_ns: int
    collectives: _containers.RepeatedCompositeFieldContainer[CollectiveProfile]
    def __init__(self, schema_version: _Optional[int] = ..., host: _Optional[str] = ..., leaf: _Optional[str] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., agent_id: _Optional[str] = ..., sequence: _Optional[int] = ..., flows: _Optional[_Iterable[_Union[Flow, _Mapping]]] = ..., ports: _Optional[_Iterable[_Union[PortTotals, _Mapping]]] = ..., malformed_records: _Optional[int] = ..., received_ns: _Optional[int] = ..., collectives: _Optional[_Iterable[_Union[CollectiveProfile, _Mapping]]] = ...) -> None: ...

class CollectiveProfile(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "host", "job_id", "comm_id", "operation", "datatype", "datatype_bytes", "count", "call_bytes", "calls", "nranks", "ranks", "peers", "first_call_ns", "last_call_ns", "timed_calls", "timed_ns", "algo_bw_bytes_per_s", "bus_bw_bytes_per_s")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    COMM_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    DATATYPE_FIELD_NUMBER: _ClassVar[int]
    DATATYPE_BYTES_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    CALL_BYTES_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    NRANKS_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    FIRST_CALL_NS_FIELD_NUMBER: _ClassVar[int]
    LAST_CALL_NS_FIELD_NUMBER: _ClassVar[int]
    TIMED_CALLS_FIELD_NUMBER: _ClassVar[int]
    TIMED_NS_FIELD_NUMBER: _ClassVar[int]
    ALGO_BW_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    BUS_BW_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    host: str
    job_id: str
    comm_id: str
    operation: str
    datatype: int
    datatype_bytes: int
    count: int
    call_bytes: int
    calls: int
    nranks: int
    ranks: _containers.RepeatedScalarFieldContainer[int]
    peers: _containers.RepeatedScalarFieldContainer[int]
    first_call_ns: int
    last_call_ns: int
    timed_calls: int
    timed_ns: int
    algo_bw_bytes_per_s: float
    bus_bw_bytes_per_s: float
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., host: _Optional[str] = ..., job_id: _Optional[str] = ..., comm_id: _Optional[str] = ..., operation: _Optional[str] = ..., datatype: _Optional[int] = ..., datatype_bytes: _Optional[int] = ..., count: _Optional[int] = ..., call_bytes: _Optional[int] = ..., calls: _Optional[int] = ..., nranks: _Optional[int] = ..., ranks: _Optional[_Iterable[int]] = ..., peers: _Optional[_Iterable[int]] = ..., first_call_ns: _Optional[int] = ..., last_call_ns: _Optional[int] = ..., timed_calls: _Optional[int] = ..., timed_ns: _Optional[int] = ..., algo_bw_bytes_per_s: _Optional[float] = ..., bus_bw_bytes_per_s: _Optional[float] = ...) -> None: ...

class Flow(_message.Message):
    __slots__ = ("rdma_device", "port", "netdev", "lqpn", "rqpn", "qp_type", "qp_state", "qp_generation", "src_ip", "dst_ip", "udp_src_port", "udp_dst_port", "dscp", "tx_bytes", "rx_bytes", "tx_packets", "rx_packets", "byte_source", "byte_error_bound", "pid", "comm", "job_id", "nccl")
    RDMA_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    NETDEV_FIELD_NUMBER: _ClassVar[int]
    LQPN_FIELD_NUMBER: _ClassVar[int]
    RQPN_FIELD_NUMBER: _ClassVar[int]
    QP_TYPE_FIELD_NUMBER: _ClassVar[int]
    QP_STATE_FIELD_NUMBER: _ClassVar[int]
    QP_GENERATION_FIELD_NUMBER: _ClassVar[int]
    SRC_IP_FIELD_NUMBER: _ClassVar[int]
    DST_IP_FIELD_NUMBER: _ClassVar[int]
    UDP_SRC_PORT_FIELD_NUMBER: _ClassVar[int]
    UDP_DST_PORT_FIELD_NUMBER: _ClassVar[int]
    DSCP_FIELD_NUMBER: _ClassVar[int]
    TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TX_PACKETS_FIELD_NUMBER: _ClassVar[int]
    RX_PACKETS_FIELD_NUMBER: _ClassVar[int]
    BYTE_SOURCE_FIELD_NUMBER: _ClassVar[int]
    BYTE_ERROR_BOUND_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    COMM_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NCCL_FIELD_NUMBER: _ClassVar[int]
    rdma_device: str
    port: int
    netdev: str
    lqpn: int
    rqpn: int
    qp_type: QpType
    qp_state: QpState
    qp_generation: int
    src_ip: str
    dst_ip: str
    udp_src_port: int
    udp_dst_port: int
    dscp: int
    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int
    byte_source: ByteSource
    byte_error_bound: int
    pid: int
    comm: str
    job_id: str
    nccl: NcclTag
    def __init__(self, rdma_device: _Optional[str] = ..., port: _Optional[int] = ..., netdev: _Optional[str] = ..., lqpn: _Optional[int] = ..., rqpn: _Optional[int] = ..., qp_type: _Optional[_Union[QpType, str]] = ..., qp_state: _Optional[_Union[QpState, str]] = ..., qp_generation: _Optional[int] = ..., src_ip: _Optional[str] = ..., dst_ip: _Optional[str] = ..., udp_src_port: _Optional[int] = ..., udp_dst_port: _Optional[int] = ..., dscp: _Optional[int] = ..., tx_bytes: _Optional[int] = ..., rx_bytes: _Optional[int] = ..., tx_packets: _Optional[int] = ..., rx_packets: _Optional[int] = ..., byte_source: _Optional[_Union[ByteSource, str]] = ..., byte_error_bound: _Optional[int] = ..., pid: _Optional[int] = ..., comm: _Optional[str] = ..., job_id: _Optional[str] = ..., nccl: _Optional[_Union[NcclTag, _Mapping]] = ...) -> None: ...

class NcclTag(_message.Message):
    __slots__ = ("comm_id", "rank", "nranks", "peer_rank", "channel", "collective", "op_count")
    COMM_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    NRANKS_FIELD_NUMBER: _ClassVar[int]
    PEER_RANK_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    COLLECTIVE_FIELD_NUMBER: _ClassVar[int]
    OP_COUNT_FIELD_NUMBER: _ClassVar[int]
    comm_id: str
    rank: int
    nranks: int
    peer_rank: int
    channel: int
    collective: str
    op_count: int
    def __init__(self, comm_id: _Optional[str] = ..., rank: _Optional[int] = ..., nranks: _Optional[int] = ..., peer_rank: _Optional[int] = ..., channel: _Optional[int] = ..., collective: _Optional[str] = ..., op_count: _Optional[int] = ...) -> None: ...

class PortTotals(_message.Message):
    __slots__ = ("rdma_device", "port", "netdev", "tx_bytes", "rx_bytes", "tx_packets", "rx_packets", "congestion")
    RDMA_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    NETDEV_FIELD_NUMBER: _ClassVar[int]
    TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TX_PACKETS_FIELD_NUMBER: _ClassVar[int]
    RX_PACKETS_FIELD_NUMBER: _ClassVar[int]
    CONGESTION_FIELD_NUMBER: _ClassVar[int]
    rdma_device: str
    port: int
    netdev: str
    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int
    congestion: NicCongestion
    def __init__(self, rdma_device: _Optional[str] = ..., port: _Optional[int] = ..., netdev: _Optional[str] = ..., tx_bytes: _Optional[int] = ..., rx_bytes: _Optional[int] = ..., tx_packets: _Optional[int] = ..., rx_packets: _Optional[int] = ..., congestion: _Optional[_Union[NicCongestion, _Mapping]] = ...) -> None: ...

class NicCongestion(_message.Message):
    __slots__ = ("interval_ns", "np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "implied_nak_seq_err", "pfc")
    INTERVAL_NS_FIELD_NUMBER: _ClassVar[int]
    NP_ECN_MARKED_ROCE_PACKETS_FIELD_NUMBER: _ClassVar[int]
    NP_CNP_SENT_FIELD_NUMBER: _ClassVar[int]
    RP_CNP_HANDLED_FIELD_NUMBER: _ClassVar[int]
    RP_CNP_IGNORED_FIELD_NUMBER: _ClassVar[int]
    OUT_OF_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PACKET_SEQ_ERR_FIELD_NUMBER: _ClassVar[int]
    LOCAL_ACK_TIMEOUT_ERR_FIELD_NUMBER: _ClassVar[int]
    IMPLIED_NAK_SEQ_ERR_FIELD_NUMBER: _ClassVar[int]
    PFC_FIELD_NUMBER: _ClassVar[int]
    interval_ns: int
    np_ecn_marked_roce_packets: _common_pb2.Counter
    np_cnp_sent: _common_pb2.Counter
    rp_cnp_handled: _common_pb2.Counter
    rp_cnp_ignored: _common_pb2.Counter
    out_of_sequence: _common_pb2.Counter
    packet_seq_err: _common_pb2.Counter
    local_ack_timeout_err: _common_pb2.Counter
    implied_nak_seq_err: _common_pb2.Counter
    pfc: _containers.RepeatedCompositeFieldContainer[NicPfc]
    def __init__(self, interval_ns: _Optional[int] = ..., np_ecn_marked_roce_packets: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., np_cnp_sent: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., rp_cnp_handled: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., rp_cnp_ignored: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., out_of_sequence: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., packet_seq_err: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., local_ack_timeout_err: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., implied_nak_seq_err: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., pfc: _Optional[_Iterable[_Union[NicPfc, _Mapping]]] = ...) -> None: ...

class NicPfc(_message.Message):
    __slots__ = ("priority", "rx_pause", "tx_pause", "rx_pause_duration_us", "tx_pause_duration_us")
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RX_PAUSE_FIELD_NUMBER: _ClassVar[int]
    TX_PAUSE_FIELD_NUMBER: _ClassVar[int]
    RX_PAUSE_DURATION_US_FIELD_NUMBER: _ClassVar[int]
    TX_PAUSE_DURATION_US_FIELD_NUMBER: _ClassVar[int]
    priority: int
    rx_pause: _common_pb2.Counter
    tx_pause: _common_pb2.Counter
    rx_pause_duration_us: _common_pb2.Counter
    tx_pause_duration_us: _common_pb2.Counter
    def __init__(self, priority: _Optional[int] = ..., rx_pause: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., tx_pause: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., rx_pause_duration_us: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ..., tx_pause_duration_us: _Optional[_Union[_common_pb2.Counter, _Mapping]] = ...) -> None: ...
