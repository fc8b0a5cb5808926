"""Kafka topic names, message keys and the partitioning rule: the wire contract besides the .proto.

Co-partitioning: counters are keyed by switch name and flows by the name of the leaf the sending
NICs attach to, and both topics have the same partition count. Kafka's default partitioner
(murmur2 of the key, the same in the Java client, kafka-python and aiokafka) therefore puts a
leaf's counters and the flows that enter the fabric at that leaf in the same partition, so one
worker owns everything needed for the leaf's uplink ECMP groups. docs/schemas.md gives the reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1
"""The ``schema_version`` every v1 message carries."""


@dataclass(frozen=True)
class Topic:
    """One Kafka topic of the contract: name, protobuf message and what its key is."""

    name: str
    message: str
    key: str
    description: str
    compacted: bool = False
    """Only each key's latest record matters (``cleanup.policy=compact``)."""


COUNTERS = Topic(
    "flowtracer.counters.v1", "CounterBatch", "switch name",
    "one batch per switch per sample instant, from the gNMI collectors",
)
SWITCH_CONGESTION = Topic(
    "flowtracer.switch-congestion.v1", "CongestionBatch", "switch name",
    "per switch per sample instant: queue counters (ECN marks, drops, watermark) and PFC pauses, from the gNMI "
    "collectors (opt-in); co-partitioned with the counters",
)
FLOWS = Topic(
    "flowtracer.flows.v1", "FlowBatch", "leaf the batch's NICs attach to",
    "one batch per host and leaf per window, from the host agents",
)
LINK_LOADS = Topic(
    "flowtracer.link-loads.v1", "LinkLoad", "directed link id",
    "per link and window: measured, attributed and unexplained bytes",
)
PATH_LOADS = Topic(
    "flowtracer.path-loads.v1", "PathLoad", "path id",
    "per equal-cost path and window: bytes and flows the resolver placed on it",
)
FIM = Topic(
    "flowtracer.fim.v1", "FimSample", "ECMP group id, or 'fabric'",
    "rolling Flow Imbalance Metric per ECMP group and fabric-wide",
)
COLLISIONS = Topic(
    "flowtracer.collisions.v1", "Collision", "ECMP group id",
    "heavy flows sharing a member while a sibling member idles",
)
LINK_CONGESTION = Topic(
    "flowtracer.link-congestion.v1", "LinkCongestion", "directed link id",
    "per link and window: PFC pauses each way, ECN marks, drops and queue watermark, from the switch congestion "
    "counters",
)
NIC_CONGESTION = Topic(
    "flowtracer.nic-congestion.v1", "NicCongestionSample", "NIC name <host>:<rdma_device>",
    "per NIC port and window: CNPs, ECN-marked packets received, retransmission signals and PFC pauses",
)
ECMP_DRIFT = Topic(
    "flowtracer.ecmp-drift.v1", "EcmpDrift", "switch name",
    "per switch and window while it lasts: each difference between the topology's ECMP groups and the switch's AFT "
    "(a next hop withdrawn or added, a weight changed, a group missing or added)",
)
ECMP_GROUPS = Topic(
    "flowtracer.ecmp-groups.v1", "EcmpGroups", "switch name",
    "compacted: each switch's live ECMP groups (members, weights) as the processor follows them, sent when they "
    "change; host agents read it to re-trace the flows whose path crosses a switch whose groups changed",
    compacted=True,
)
TRACE_REQUESTS = Topic(
    "flowtracer.trace-requests.v1", "TraceRequest", "flow id",
    "flows whose path trace the processor stopped trusting (the counters contradict it): the host agent that traces "
    "the flow re-traces it now",
)
CONGESTION_CAUSE = Topic(
    "flowtracer.congestion-cause.v1", "CongestionCause", "directed link id",
    "per congested link and window: its cause (collision, incast, degraded link, pause spread from an origin, "
    "unknown) with the evidence",
)
COLLECTIVE_PROFILE = Topic(
    "flowtracer.collective-profile.v1", "CollectiveProfile", "job id",
    "per host, job, communicator, operation and size and window: NCCL calls (count, bytes, ranks, peers, estimated "
    "bandwidth) from the host agents' NCCL logs, passed on by the processor",
)
FLOW_PATHS = Topic(
    "flowtracer.flow-paths.v1", "FlowPath", "flow id",
    "compacted: each flow's path hop by hop as the processor placed it, sent when it is first placed, when its path "
    "or placement method changes, at a slow heartbeat and once when it ends (not every window)",
    compacted=True,
)
INCIDENTS = Topic(
    "flowtracer.incidents.v1", "Incident", "incident id",
    "faults the diagnosis localized: kind, ranked suspect components with evidence, affected flows, start and end; "
    "one record per window while open and one when closed; compacted: a restarted diagnosis reads each incident's "
    "newest snapshot to take the open ones over",
    compacted=True,
)
DEAD_LETTER = Topic(
    "flowtracer.dead-letter.v1", "DeadLetter", "the original key",
    "records the processor could not use, with the reason",
)

ATTRIBUTIONS = Topic(
    "flowtracer.attributions.v1", "AttributionBatch", "none: sent to the partition of the links' switches",
    "internal: flow bytes per link from each flows partition to the counters partition owning the link",
)
GROUP_FIM = Topic(
    "flowtracer.group-fim.v1", "GroupFimBatch", "none: one partition",
    "internal: each counters partition's group FIMs, gathered for the fabric-wide FIM",
)

QP_ENDS = Topic(
    "flowtracer.qp-ends.v1", "QpEnds", "host name",
    "compacted: each host's connected QPs, exchanged between host agents to find each QP's remote address",
    compacted=True,
)
PATH_TRACES = Topic(
    "flowtracer.path-traces.v1", "PathTrace",
    "flow id; partition = that of the flow's source leaf on the flows topic (set by the producer)",
    "compacted: each live flow's latest hop-by-hop trace of its own 5-tuple, from the host agents",
    compacted=True,
)

STATE_TABLE = "stage-state"
"""The processor's per-partition state table (Faust): last published window, rolling FIM history, resolver state."""
FABRIC_TABLE = "fabric-state"
"""The processor's fabric-stage state table (Faust), one partition like the group-FIM topic it reads."""
STATE_CHANGELOG = Topic(
    f"{STATE_TABLE}-changelog", "JSON (Faust table)", "stage and partition: 'flows:<p>' or 'links:<p>'",
    "internal: changelog of the stage-state table, one partition per input partition",
    compacted=True,
)
FABRIC_CHANGELOG = Topic(
    f"{FABRIC_TABLE}-changelog", "JSON (Faust table)", "'fabric'",
    "internal: changelog of the fabric-state table, one partition",
    compacted=True,
)

INPUT_TOPICS: tuple[Topic, ...] = (COUNTERS, FLOWS, PATH_TRACES, SWITCH_CONGESTION)
OUTPUT_TOPICS: tuple[Topic, ...] = (LINK_LOADS, PATH_LOADS, FIM, COLLISIONS, LINK_CONGESTION, NIC_CONGESTION,
                                     ECMP_DRIFT, ECMP_GROUPS, TRACE_REQUESTS, CONGESTION_CAUSE, COLLECTIVE_PROFILE,
                                     FLOW_PATHS, INCIDENTS, DEAD_LETTER)
INTERNAL_TOPICS: tuple[Topic, ...] = (ATTRIBUTIONS, GROUP_FIM)
EXCHANGE_TOPICS: tuple[Topic, ...] = (QP_ENDS,)
"""Topics a stage both writes and reads for itself (the agents' QP ends); one partition, compacted."""
ALL_TOPICS: tuple[Topic, ...] = INPUT_TOPICS + OUTPUT_TOPICS + INTERNAL_TOPICS + EXCHANGE_TOPICS
CHANGELOG_TOPICS: tuple[Topic, ...] = (STATE_CHANGELOG, FABRIC_CHANGELOG)
"""The processor's state changelogs (named per deployment by :func:`changelog_name`): a contract between
the processor, which names its tables, and the deployment, which creates their topics."""

DEFAULT_PARTITIONS = 8
"""Partitions of the input topics; counters, flows, path traces and switch congestion must have the same count
(co-partitioning)."""


def internal_name(app_id: str, topic: Topic) -> str:
    """The name of an internal topic for one processor deployment (its app id / consumer group).

    Internal topics belong to one deployment: two processors with different app ids (say, one per
    resolver) on one cluster must not read each other's attributions.
    """
    return f"{app_id}.{topic.name}"


def changelog_name(app_id: str, changelog: Topic) -> str:
    """The name Faust gives a state table's changelog in one processor deployment: ``<app-id>-<table>-changelog``.

    The processor never declares topics (``topic_allow_declare`` is off), so this rule must match Faust's
    for the topics created from the plan (``topic_admin.plan``) to be the ones its tables use.
    """
    return f"{app_id}-{changelog.name}"


def key(name: str) -> bytes:
    """Encode a message key (switch, leaf, link, path or group name) as Kafka key bytes."""
    return name.encode("utf-8")


def partition_for(name: str, partitions: int) -> int:
    """The partition Kafka's default partitioner gives key ``name`` on a topic of ``partitions``
    (:func:`partition_for_key` of its key bytes), so the processor can tell which partition owns a switch or a leaf.
    """
    return partition_for_key(key(name), partitions)


def partition_for_key(key_bytes: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a record keyed ``key_bytes`` on a topic of ``partitions``.

    murmur2 of the key bytes, positive, modulo the count: what the Java client, kafka-python and
    aiokafka all do (aiokafka's ``DefaultPartitioner``).
    """
    return (murmur2(key_bytes) & 0x7FFFFFFF) % partitions


def murmur2(data: bytes) -> int:
    """MurmurHash2 (32 bit, seed 0x9747b28c) as Kafka's ``Utils.murmur2`` computes it; the partitioning rule is
    part of the contract, so it is written here rather than borrowed from a client library (a test checks it
    against kafka-python's)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    n = len(data)
    h = 0x9747B28C ^ n
    for i in range(0, n - n % 4, 4):
        k = (int.from_bytes(data[i:i + 4], "little") * m) & mask
        k = ((k ^ (k >> 24)) * m) & mask
        h = ((h * m) & mask) ^ k
    tail = n % 4
    if tail:
        h ^= int.from_bytes(data[n - tail:], "little")
        h = (h * m) & mask
    h = ((h ^ (h >> 13)) * m) & mask
    return h ^ (h >> 15)


def trace_partition(src_leaf: str, partitions: int) -> int:
    """Partition of a flow's ``PathTrace``: that of its source leaf's flow batches (co-partitioned), while
    the record key is the flow id so that compaction keeps one trace per flow."""
    return partition_for(src_leaf, partitions)
