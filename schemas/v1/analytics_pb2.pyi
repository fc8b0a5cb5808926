from flowtracer.schemas.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LoadBasis(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOAD_BASIS_UNSPECIFIED: _ClassVar[LoadBasis]
    LOAD_BASIS_MEASURED: _ClassVar[LoadBasis]
    LOAD_BASIS_ATTRIBUTED: _ClassVar[LoadBasis]

class DriftKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DRIFT_KIND_UNSPECIFIED: _ClassVar[DriftKind]
    DRIFT_KIND_MEMBER_WITHDRAWN: _ClassVar[DriftKind]
    DRIFT_KIND_MEMBER_ADDED: _ClassVar[DriftKind]
    DRIFT_KIND_WEIGHT_CHANGED: _ClassVar[DriftKind]
    DRIFT_KIND_GROUP_MISSING: _ClassVar[DriftKind]
    DRIFT_KIND_GROUP_ADDED: _ClassVar[DriftKind]

class FlowPathChange(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FLOW_PATH_CHANGE_UNSPECIFIED: _ClassVar[FlowPathChange]
    FLOW_PATH_CHANGE_FIRST: _ClassVar[FlowPathChange]
    FLOW_PATH_CHANGE_PATH: _ClassVar[FlowPathChange]
    FLOW_PATH_CHANGE_METHOD: _ClassVar[FlowPathChange]
    FLOW_PATH_CHANGE_HEARTBEAT: _ClassVar[FlowPathChange]
    FLOW_PATH_CHANGE_ENDED: _ClassVar[FlowPathChange]
LOAD_BASIS_UNSPECIFIED: LoadBasis
LOAD_BASIS_MEASURED: LoadBasis
LOAD_BASIS_ATTRIBUTED: LoadBasis
DRIFT_KIND_UNSPECIFIED: DriftKind
DRIFT_KIND_MEMBER_WITHDRAWN: DriftKind
DRIFT_KIND_MEMBER_ADDED: DriftKind
DRIFT_KIND_WEIGHT_CHANGED: DriftKind
DRIFT_KIND_GROUP_MISSING: DriftKind
DRIFT_KIND_GROUP_ADDED: DriftKind
FLOW_PATH_CHANGE_UNSPECIFIED: FlowPathChange
FLOW_PATH_CHANGE_FIRST: FlowPathChange
FLOW_PATH_CHANGE_PATH: FlowPathChange
FLOW_PATH_CHANGE_METHOD: FlowPathChange
FLOW_PATH_CHANGE_HEARTBEAT: FlowPathChange
FLOW_PATH_CHANGE_ENDED: FlowPathChange

class LinkLoad(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "link", "src_node", "src_port", "dst_node", "dst_port", "speed_bps", "measured_bytes", "measured_valid", "attributed_bytes", "unexplained_bytes", "utilization", "flow_count", "resolver", "groups", "oper_up", "oper_valid")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    SRC_NODE_FIELD_NUMBER: _ClassVar[int]
    SRC_PORT_FIELD_NUMBER: _ClassVar[int]
    DST_NODE_FIELD_NUMBER: _ClassVar[int]
    DST_PORT_FIELD_NUMBER: _ClassVar[int]
    SPEED_BPS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEASURED_VALID_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    UNEXPLAINED_BYTES_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    FLOW_COUNT_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    OPER_UP_FIELD_NUMBER: _ClassVar[int]
    OPER_VALID_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    link: str
    src_node: str
    src_port: str
    dst_node: str
    dst_port: str
    speed_bps: int
    measured_bytes: int
    measured_valid: bool
    attributed_bytes: int
    unexplained_bytes: int
    utilization: float
    flow_count: int
    resolver: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    oper_up: bool
    oper_valid: bool
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., link: _Optional[str] = ..., src_node: _Optional[str] = ..., src_port: _Optional[str] = ..., dst_node: _Optional[str] = ..., dst_port: _Optional[str] = ..., speed_bps: _Optional[int] = ..., measured_bytes: _Optional[int] = ..., measured_valid: _Optional[bool] = ..., attributed_bytes: _Optional[int] = ..., unexplained_bytes: _Optional[int] = ..., utilization: _Optional[float] = ..., flow_count: _Optional[int] = ..., resolver: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., oper_up: _Optional[bool] = ..., oper_valid: _Optional[bool] = ...) -> None: ...

class PathLoad(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "path_id", "links", "src_host", "src_nic", "dst_host", "dst_nic", "bytes", "flow_count", "resolver", "confidence", "traced_bytes", "jobs", "untrusted_bytes", "sprayed_bytes")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    PATH_ID_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    SRC_HOST_FIELD_NUMBER: _ClassVar[int]
    SRC_NIC_FIELD_NUMBER: _ClassVar[int]
    DST_HOST_FIELD_NUMBER: _ClassVar[int]
    DST_NIC_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    FLOW_COUNT_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    TRACED_BYTES_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    UNTRUSTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    SPRAYED_BYTES_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    path_id: str
    links: _containers.RepeatedScalarFieldContainer[str]
    src_host: str
    src_nic: str
    dst_host: str
    dst_nic: str
    bytes: int
    flow_count: int
    resolver: str
    confidence: float
    traced_bytes: int
    jobs: _containers.RepeatedScalarFieldContainer[str]
    untrusted_bytes: int
    sprayed_bytes: int
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., path_id: _Optional[str] = ..., links: _Optional[_Iterable[str]] = ..., src_host: _Optional[str] = ..., src_nic: _Optional[str] = ..., dst_host: _Optional[str] = ..., dst_nic: _Optional[str] = ..., bytes: _Optional[int] = ..., flow_count: _Optional[int] = ..., resolver: _Optional[str] = ..., confidence: _Optional[float] = ..., traced_bytes: _Optional[int] = ..., jobs: _Optional[_Iterable[str]] = ..., untrusted_bytes: _Optional[int] = ..., sprayed_bytes: _Optional[int] = ...) -> None: ...

class FimSample(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "group", "switch", "basis", "members", "fim", "fim_flows", "max_mean_ratio", "cv", "total_bytes", "member_links", "member_bytes", "resolver", "member_weights", "group_source", "load_source")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    BASIS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    FIM_FIELD_NUMBER: _ClassVar[int]
    FIM_FLOWS_FIELD_NUMBER: _ClassVar[int]
    MAX_MEAN_RATIO_FIELD_NUMBER: _ClassVar[int]
    CV_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMBER_LINKS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_BYTES_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_FIELD_NUMBER: _ClassVar[int]
    MEMBER_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    GROUP_SOURCE_FIELD_NUMBER: _ClassVar[int]
    LOAD_SOURCE_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    group: str
    switch: str
    basis: LoadBasis
    members: int
    fim: float
    fim_flows: float
    max_mean_ratio: float
    cv: float
    total_bytes: int
    member_links: _containers.RepeatedScalarFieldContainer[str]
    member_bytes: _containers.RepeatedScalarFieldContainer[int]
    resolver: str
    member_weights: _containers.RepeatedScalarFieldContainer[int]
    group_source: str
    load_source: str
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., group: _Optional[str] = ..., switch: _Optional[str] = ..., basis: _Optional[_Union[LoadBasis, str]] = ..., members: _Optional[int] = ..., fim: _Optional[float] = ..., fim_flows: _Optional[float] = ..., max_mean_ratio: _Optional[float] = ..., cv: _Optional[float] = ..., total_bytes: _Optional[int] = ..., member_links: _Optional[_Iterable[str]] = ..., member_bytes: _Optional[_Iterable[int]] = ..., resolver: _Optional[str] = ..., member_weights: _Optional[_Iterable[int]] = ..., group_source: _Optional[str] = ..., load_source: _Optional[str] = ...) -> None: ...

class Collision(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "switch", "group", "link", "link_utilization", "idle_link", "idle_utilization", "flows", "resolver", "confidence", "harmful", "harm_basis", "link_ecn_marked_pkts", "link_dropped_pkts", "link_pfc_pauses", "idle_ecn_marked_pkts", "idle_dropped_pkts", "idle_pfc_pauses", "receiver_cnps")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    LINK_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    IDLE_LINK_FIELD_NUMBER: _ClassVar[int]
    IDLE_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    HARMFUL_FIELD_NUMBER: _ClassVar[int]
    HARM_BASIS_FIELD_NUMBER: _ClassVar[int]
    LINK_ECN_MARKED_PKTS_FIELD_NUMBER: _ClassVar[int]
    LINK_DROPPED_PKTS_FIELD_NUMBER: _ClassVar[int]
    LINK_PFC_PAUSES_FIELD_NUMBER: _ClassVar[int]
    IDLE_ECN_MARKED_PKTS_FIELD_NUMBER: _ClassVar[int]
    IDLE_DROPPED_PKTS_FIELD_NUMBER: _ClassVar[int]
    IDLE_PFC_PAUSES_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_CNPS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    switch: str
    group: str
    link: str
    link_utilization: float
    idle_link: str
    idle_utilization: float
    flows: _containers.RepeatedCompositeFieldContainer[_common_pb2.FlowRef]
    resolver: str
    confidence: float
    harmful: bool
    harm_basis: str
    link_ecn_marked_pkts: int
    link_dropped_pkts: int
    link_pfc_pauses: int
    idle_ecn_marked_pkts: int
    idle_dropped_pkts: int
    idle_pfc_pauses: int
    receiver_cnps: int
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., switch: _Optional[str] = ..., group: _Optional[str] = ..., link: _Optional[str] = ..., link_utilization: _Optional[float] = ..., idle_link: _Optional[str] = ..., idle_utilization: _Optional[float] = ..., flows: _Optional[_Iterable[_Union[_common_pb2.FlowRef, _Mapping]]] = ..., resolver: _Optional[str] = ..., confidence: _Optional[float] = ..., harmful: _Optional[bool] = ..., harm_basis: _Optional[str] = ..., link_ecn_marked_pkts: _Optional[int] = ..., link_dropped_pkts: _Optional[int] = ..., link_pfc_pauses: _Optional[int] = ..., idle_ecn_marked_pkts: _Optional[int] = ..., idle_dropped_pkts: _Optional[int] = ..., idle_pfc_pauses: _Optional[int] = ..., receiver_cnps: _Optional[int] = ...) -> None: ...

class Incident(_message.Message):
    __slots__ = ("schema_version", "window_end_ns", "id", "kind", "state", "start_ns", "detected_ns", "end_ns", "suspects", "flows", "hosts", "windows", "jobs", "collectives", "paused_links", "stopped_hosts")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    START_NS_FIELD_NUMBER: _ClassVar[int]
    DETECTED_NS_FIELD_NUMBER: _ClassVar[int]
    END_NS_FIELD_NUMBER: _ClassVar[int]
    SUSPECTS_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    COLLECTIVES_FIELD_NUMBER: _ClassVar[int]
    PAUSED_LINKS_FIELD_NUMBER: _ClassVar[int]
    STOPPED_HOSTS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_end_ns: int
    id: str
    kind: str
    state: str
    start_ns: int
    detected_ns: int
    end_ns: int
    suspects: _containers.RepeatedCompositeFieldContainer[Suspect]
    flows: _containers.RepeatedScalarFieldContainer[str]
    hosts: _containers.RepeatedScalarFieldContainer[str]
    windows: int
    jobs: _containers.RepeatedScalarFieldContainer[str]
    collectives: _containers.RepeatedScalarFieldContainer[str]
    paused_links: _containers.RepeatedScalarFieldContainer[str]
    stopped_hosts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, schema_version: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., id: _Optional[str] = ..., kind: _Optional[str] = ..., state: _Optional[str] = ..., start_ns: _Optional[int] = ..., detected_ns: _Optional[int] = ..., end_ns: _Optional[int] = ..., suspects: _Optional[_Iterable[_Union[Suspect, _Mapping]]] = ..., flows: _Optional[_Iterable[str]] = ..., hosts: _Optional[_Iterable[str]] = ..., windows: _Optional[int] = ..., jobs: _Optional[_Iterable[str]] = ..., collectives: _Optional[_Iterable[str]] = ..., paused_links: _Optional[_Iterable[str]] = ..., stopped_hosts: _Optional[_Iterable[str]] = ...) -> None: ...

class Suspect(_message.Message):
    __slots__ = ("component", "score", "evidence")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    component: str
    score: float
    evidence: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, component: _Optional[str] = ..., score: _Optional[float] = ..., evidence: _Optional[_Iterable[str]] = ...) -> None: ...

class LinkCongestion(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "link", "src_node", "src_port", "dst_node", "dst_port", "pfc_pauses_received", "pfc_pauses_received_roce", "pfc_pauses_sent", "pfc_pauses_sent_roce", "pfc_valid", "ecn_marked_pkts", "ecn_marked_pkts_roce", "ecn_valid", "dropped_pkts", "dropped_pkts_roce", "dropped_octets", "dropped_octets_roce", "drops_valid", "queue_watermark_bytes", "queue_watermark_bytes_roce", "watermark_valid")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    SRC_NODE_FIELD_NUMBER: _ClassVar[int]
    SRC_PORT_FIELD_NUMBER: _ClassVar[int]
    DST_NODE_FIELD_NUMBER: _ClassVar[int]
    DST_PORT_FIELD_NUMBER: _ClassVar[int]
    PFC_PAUSES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    PFC_PAUSES_RECEIVED_ROCE_FIELD_NUMBER: _ClassVar[int]
    PFC_PAUSES_SENT_FIELD_NUMBER: _ClassVar[int]
    PFC_PAUSES_SENT_ROCE_FIELD_NUMBER: _ClassVar[int]
    PFC_VALID_FIELD_NUMBER: _ClassVar[int]
    ECN_MARKED_PKTS_FIELD_NUMBER: _ClassVar[int]
    ECN_MARKED_PKTS_ROCE_FIELD_NUMBER: _ClassVar[int]
    ECN_VALID_FIELD_NUMBER: _ClassVar[int]
    DROPPED_PKTS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_PKTS_ROCE_FIELD_NUMBER: _ClassVar[int]
    DROPPED_OCTETS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_OCTETS_ROCE_FIELD_NUMBER: _ClassVar[int]
    DROPS_VALID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WATERMARK_BYTES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WATERMARK_BYTES_ROCE_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_VALID_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    link: str
    src_node: str
    src_port: str
    dst_node: str
    dst_port: str
    pfc_pauses_received: int
    pfc_pauses_received_roce: int
    pfc_pauses_sent: int
    pfc_pauses_sent_roce: int
    pfc_valid: bool
    ecn_marked_pkts: int
    ecn_marked_pkts_roce: int
    ecn_valid: bool
    dropped_pkts: int
    dropped_pkts_roce: int
    dropped_octets: int
    dropped_octets_roce: int
    drops_valid: bool
    queue_watermark_bytes: int
    queue_watermark_bytes_roce: int
    watermark_valid: bool
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., link: _Optional[str] = ..., src_node: _Optional[str] = ..., src_port: _Optional[str] = ..., dst_node: _Optional[str] = ..., dst_port: _Optional[str] = ..., pfc_pauses_received: _Optional[int] = ..., pfc_pauses_received_roce: _Optional[int] = ..., pfc_pauses_sent: _Optional[int] = ..., pfc_pauses_sent_roce: _Optional[int] = ..., pfc_valid: _Optional[bool] = ..., ecn_marked_pkts: _Optional[int] = ..., ecn_marked_pkts_roce: _Optional[int] = ..., ecn_valid: _Optional[bool] = ..., dropped_pkts: _Optional[int] = ..., dropped_pkts_roce: _Optional[int] = ..., dropped_octets: _Optional[int] = ..., dropped_octets_roce: _Optional[int] = ..., drops_valid: _Optional[bool] = ..., queue_watermark_bytes: _Optional[int] = ..., queue_watermark_bytes_roce: _Optional[int] = ..., watermark_valid: _Optional[bool] = ...) -> None: ...

class NicCongestionSample(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "nic", "host", "leaf", "port", "netdev", "ecn_marked_received", "cnp_sent", "cnp_handled", "cnp_ignored", "cnp_valid", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "implied_nak_seq_err", "retransmit_valid", "pfc_pauses_received", "pfc_pauses_received_roce", "pfc_pauses_sent", "pfc_pauses_sent_roce", "pfc_valid")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    NIC_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    LEAF_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    NETDEV_FIELD_NUMBER: _ClassVar[int]
    ECN_MARKED_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    CNP_SENT_FIELD_NUMBER: _ClassVar[int]
    CNP_HANDLED_FIELD_NUMBER: _ClassVar[int]
    CNP_IGNORED_FIELD_NUMBER: _ClassVar[int]
    CNP_VALID_FIELD_NUMBER: _ClassVar[int]
    OUT_OF_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PACKET_SEQ_ERR_FIELD_NUMBER: _ClassVar[int]
    LOCAL_ACK_TIMEOUT_ERR_FIELD_NUMBER: _ClassVar[int]
    IMPLIED_NAK_SEQ_ERR_FIELD_NUMBER: _ClassVar[int]
    RETRANSMIT_VALID_FIELD_NUMBER: _ClassVar[int]
    PFC_PAUSES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    PFC_PAUSES_RECEIVED_ROCE_FIELD_NUMBER: _ClassVar[int]
    PFC_PAUSES_SENT_FIELD_NUMBER: _ClassVar[int]
    PFC_PAUSES_SENT_ROCE_FIELD_NUMBER: _ClassVar[int]
    PFC_VALID_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    nic: str
    host: str
    leaf: str
    port: int
    netdev: str
    ecn_marked_received: int
    cnp_sent: int
    cnp_handled: int
    cnp_ignored: int
    cnp_valid: bool
    out_of_sequence: int
    packet_seq_err: int
    local_ack_timeout_err: int
    implied_nak_seq_err: int
    retransmit_valid: bool
    pfc_pauses_received: int
    pfc_pauses_received_roce: int
    pfc_pauses_sent: int
    pfc_pauses_sent_roce: int
    pfc_valid: bool
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., nic: _Optional[str] = ..., host: _Optional[str] = ..., leaf: _Optional[str] = ..., port: _Optional[int] = ..., netdev: _Optional[str] = ..., ecn_marked_received: _Optional[int] = ..., cnp_sent: _Optional[int] = ..., cnp_handled: _Optional[int] = ..., cnp_ignored: _Optional[int] = ..., cnp_valid: _Optional[bool] = ..., out_of_sequence: _Optional[int] = ..., packet_seq_err: _Optional[int] = ..., local_ack_timeout_err: _Optional[int] = ..., implied_nak_seq_err: _Optional[int] = ..., retransmit_valid: _Optional[bool] = ..., pfc_pauses_received: _Optional[int] = ..., pfc_pauses_received_roce: _Optional[int] = ..., pfc_pauses_sent: _Optional[int] = ..., pfc_pauses_sent_roce: _Optional[int] = ..., pfc_valid: _Optional[bool] = ...) -> None: ...

class CongestionCause(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "link", "src_node", "src_port", "dst_node", "dst_port", "cause", "origin", "spread_links", "sibling", "sibling_utilization", "pfc_pauses_received", "ecn_marked_pkts", "dropped_pkts", "utilization", "previous_utilization", "flow_count", "sources", "evidence")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    SRC_NODE_FIELD_NUMBER: _ClassVar[int]
    SRC_PORT_FIELD_NUMBER: _ClassVar[int]
    DST_NODE_FIELD_NUMBER: _ClassVar[int]
    DST_PORT_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    SPREAD_LINKS_FIELD_NUMBER: _ClassVar[int]
    SIBLING_FIELD_NUMBER: _ClassVar[int]
    SIBLING_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    PFC_PAUSES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    ECN_MARKED_PKTS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_PKTS_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    FLOW_COUNT_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    link: str
    src_node: str
    src_port: str
    dst_node: str
    dst_port: str
    cause: str
    origin: str
    spread_links: _containers.RepeatedScalarFieldContainer[str]
    sibling: str
    sibling_utilization: float
    pfc_pauses_received: int
    ecn_marked_pkts: int
    dropped_pkts: int
    utilization: float
    previous_utilization: float
    flow_count: int
    sources: int
    evidence: str
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., link: _Optional[str] = ..., src_node: _Optional[str] = ..., src_port: _Optional[str] = ..., dst_node: _Optional[str] = ..., dst_port: _Optional[str] = ..., cause: _Optional[str] = ..., origin: _Optional[str] = ..., spread_links: _Optional[_Iterable[str]] = ..., sibling: _Optional[str] = ..., sibling_utilization: _Optional[float] = ..., pfc_pauses_received: _Optional[int] = ..., ecn_marked_pkts: _Optional[int] = ..., dropped_pkts: _Optional[int] = ..., utilization: _Optional[float] = ..., previous_utilization: _Optional[float] = ..., flow_count: _Optional[int] = ..., sources: _Optional[int] = ..., evidence: _Optional[str] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ("schema_version", "topic", "partition", "offset", "key", "value", "reason", "received_ns", "worker", "sink", "http_status", "window_end_ns")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_NS_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    SINK_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    reason: str
    received_ns: int
    worker: str
    sink: str
    http_status: int
    window_end_ns: int
    def __init__(self, schema_version: _Optional[int] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., reason: _Optional[str] = ..., received_ns: _Optional[int] = ..., worker: _Optional[str] = ..., sink: _Optional[str] = ..., http_status: _Optional[int] = ..., window_end_ns: _Optional[int] = ...) -> None: ...

class EcmpDrift(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "switch", "group", "kind", "link", "port", "topology_weight", "network_weight")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    NETWORK_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    switch: str
    group: str
    kind: DriftKind
    link: str
    port: str
    topology_weight: int
    network_weight: int
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., switch: _Optional[str] = ..., group: _Optional[str] = ..., kind: _Optional[_Union[DriftKind, str]] = ..., link: _Optional[str] = ..., port: _Optional[str] = ..., topology_weight: _Optional[int] = ..., network_weight: _Optional[int] = ...) -> None: ...

class EcmpGroups(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "switch", "group_source", "groups")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    GROUP_SOURCE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    switch: str
    group_source: str
    groups: _containers.RepeatedCompositeFieldContainer[EcmpGroup]
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., switch: _Optional[str] = ..., group_source: _Optional[str] = ..., groups: _Optional[_Iterable[_Union[EcmpGroup, _Mapping]]] = ...) -> None: ...

class EcmpGroup(_message.Message):
    __slots__ = ("group", "links", "weights")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    group: str
    links: _containers.RepeatedScalarFieldContainer[str]
    weights: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, group: _Optional[str] = ..., links: _Optional[_Iterable[str]] = ..., weights: _Optional[_Iterable[int]] = ...) -> None: ...

class FlowHop(_message.Message):
    __slots__ = ("node", "in_port", "out_port", "out_link")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IN_PORT_FIELD_NUMBER: _ClassVar[int]
    OUT_PORT_FIELD_NUMBER: _ClassVar[int]
    OUT_LINK_FIELD_NUMBER: _ClassVar[int]
    node: str
    in_port: str
    out_port: str
    out_link: str
    def __init__(self, node: _Optional[str] = ..., in_port: _Optional[str] = ..., out_port: _Optional[str] = ..., out_link: _Optional[str] = ...) -> None: ...

class FlowPath(_message.Message):
    __slots__ = ("schema_version", "window_start_ns", "window_end_ns", "flow_id", "key", "src_host", "src_nic", "dst_host", "dst_nic", "job_id", "collective", "comm_id", "links", "hops", "method", "confidence", "path_share", "bytes", "first_seen_ns", "last_seen_ns", "change", "resolver")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_NS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_NS_FIELD_NUMBER: _ClassVar[int]
    FLOW_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SRC_HOST_FIELD_NUMBER: _ClassVar[int]
    SRC_NIC_FIELD_NUMBER: _ClassVar[int]
    DST_HOST_FIELD_NUMBER: _ClassVar[int]
    DST_NIC_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTIVE_FIELD_NUMBER: _ClassVar[int]
    COMM_ID_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    HOPS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    PATH_SHARE_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_NS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_NS_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    RESOLVER_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    window_start_ns: int
    window_end_ns: int
    flow_id: str
    key: _common_pb2.FlowKey
    src_host: str
    src_nic: str
    dst_host: str
    dst_nic: str
    job_id: str
    collective: str
    comm_id: str
    links: _containers.RepeatedScalarFieldContainer[str]
    hops: _containers.RepeatedCompositeFieldContainer[FlowHop]
    method: str
    confidence: float
    path_share: float
    bytes: int
    first_seen_ns: int
    last_seen_ns: int
    change: FlowPathChange
    resolver: str
    def __init__(self, schema_version: _Optional[int] = ..., window_start_ns: _Optional[int] = ..., window_end_ns: _Optional[int] = ..., flow_id: _Optional[str] = ..., key: _Optional[_Union[_common_pb2.FlowKey, _Mapping]] = ..., src_host: _Optional[str] = ..., src_nic: _Optional[str] = ..., dst_host: _Optional[str] = ..., dst_nic: _Optional[str] = ..., job_id: _Optional[str] = ..., collective: _Optional[str] = ..., comm_id: _Optional[str] = ..., links: _Optional[_Iterable[str]] = ..., hops: _Optional[_Iterable[_Union[FlowHop, _Mapping]]] = ..., method: _Optional[str] = ..., confidence: _Optional[float] = ..., path_share: _Optional[float] = ..., bytes: _Optional[int] = ..., first_seen_ns: _Optional[int] = ..., last_seen_ns: _Optional[int] = ..., change: _Optional[_Union[FlowPathChange, str]] = ..., resolver: _Optional[str] = ...) -> None: ...
