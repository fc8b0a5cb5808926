"""The Kafka half of the wire contract against a real broker (Tansu): fully populated v1 messages
survive produce/consume byte for byte, keys come back unchanged, topics get the partition count
asked for, and a leaf's counters and flows land in the same partition (co-partitioning)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.partitioner import murmur2

from flowtracer.embedded.tansu import TansuBroker
from flowtracer.schemas import topics
from flowtracer.schemas.v1.common_pb2 import Counter, DeltaStatus
from flowtracer.schemas.v1.counters_pb2 import (
    CongestionBatch,
    CounterBatch,
    InterfaceCounters,
    NextHopCounters,
    OperStatus,
    PfcCounters,
    QueueCounters,
)
from flowtracer.schemas.v1.flows_pb2 import (
    ByteSource,
    CollectiveProfile,
    Flow,
    FlowBatch,
    NcclTag,
    NicCongestion,
    NicPfc,
    PortTotals,
    QpState,
    QpType,
)

PARTITIONS = topics.DEFAULT_PARTITIONS
LEAVES = ("leaf-01", "leaf-02", "leaf-03", "leaf-04")
SPINES = ("spine-01", "spine-02")
T0_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
INTERVAL_NS = 10_000_000_000  # 10 s sample interval
U64_MAX = 2**64 - 1
OK = DeltaStatus.DELTA_STATUS_OK


# -- fully populated messages ------------------------------------------------------------------


def _counter(value: int, delta: int, status: DeltaStatus.ValueType) -> Counter:
    return Counter(value=value, delta=delta, status=status)


def counter_batch(switch: str, sequence: int) -> CounterBatch:
    """A CounterBatch with every field set somewhere, all five DeltaStatus values, and edge values
    (uint64 max, 32-bit wrap) where the encoding could go wrong."""
    ts = T0_NS + sequence * INTERVAL_NS
    uplink = InterfaceCounters(
        name="Ethernet1/1",
        oper_status=OperStatus.OPER_STATUS_UP,
        speed_bps=400_000_000_000,
        interval_ns=INTERVAL_NS,
        last_clear_ns=T0_NS - 86_400_000_000_000,
        last_change_ns=T0_NS - 3_600_000_000_000,
        in_octets=_counter(U64_MAX, 0, DeltaStatus.DELTA_STATUS_BASELINE),
        out_octets=_counter(987_654_321_000, 12_500_000_000, DeltaStatus.DELTA_STATUS_OK),
        in_pkts=_counter(1_234_567, 0, DeltaStatus.DELTA_STATUS_RESET),
        out_pkts=_counter(100, 2**32 - 50 + 100, DeltaStatus.DELTA_STATUS_WRAPPED),
        in_unicast_pkts=_counter(2_000_000, 1_000_000, DeltaStatus.DELTA_STATUS_GAP),
        out_unicast_pkts=_counter(3_000_000, 1_500_000, DeltaStatus.DELTA_STATUS_OK),
        in_discards=_counter(17, 2, DeltaStatus.DELTA_STATUS_OK),
        out_discards=_counter(4_242, 42, DeltaStatus.DELTA_STATUS_GAP),
        in_errors=_counter(3, 0, DeltaStatus.DELTA_STATUS_BASELINE),
        out_errors=_counter(1, 1, DeltaStatus.DELTA_STATUS_OK),
    )
    # Statuses and deltas complement the uplink's, so every counter field is non-default somewhere.
    downlink = InterfaceCounters(
        name="Ethernet1/2",
        oper_status=OperStatus.OPER_STATUS_LOWER_LAYER_DOWN,
        speed_bps=200_000_000_000,
        interval_ns=2 * INTERVAL_NS,
        in_octets=_counter(5_000, 5_000, DeltaStatus.DELTA_STATUS_OK),
        out_octets=_counter(0, 0, DeltaStatus.DELTA_STATUS_RESET),
        in_pkts=_counter(40, 40, DeltaStatus.DELTA_STATUS_GAP),
        out_pkts=_counter(30, 0, DeltaStatus.DELTA_STATUS_BASELINE),
        in_unicast_pkts=_counter(20, 0, DeltaStatus.DELTA_STATUS_RESET),
        out_unicast_pkts=_counter(10, 0, DeltaStatus.DELTA_STATUS_RESET),
        in_discards=_counter(9, 9, DeltaStatus.DELTA_STATUS_GAP),
        out_discards=_counter(8, 0, DeltaStatus.DELTA_STATUS_BASELINE),
        in_errors=_counter(7, 7, DeltaStatus.DELTA_STATUS_OK),
        out_errors=_counter(6, 2**32 - 1 + 6, DeltaStatus.DELTA_STATUS_WRAPPED),
    )
    next_hops = [
        NextHopCounters(
            group=f"nhg-{i // 2}" if i < 3 else "nhg-1,nhg-7",  # the last one in two groups
            index=i,
            egress_interface=f"Ethernet2/{i + 1}",
            next_hop_ip=f"10.1.{i}.1" if i else "fe80::1",
            weight=1 + i,
            interval_ns=INTERVAL_NS,
            octets_forwarded=_counter(10**12 + i, 10**9 + i, DeltaStatus.DELTA_STATUS_GAP if i else OK),
            packets_forwarded=_counter(10**9 + i, i, OK if i else DeltaStatus.DELTA_STATUS_BASELINE),
            group_weights=[1 + i, 9] if i == 3 else [],
        )
        for i in range(4)
    ]
    return CounterBatch(
        schema_version=topics.SCHEMA_VERSION,
        switch=switch,
        timestamp_ns=ts,
        collector_id="collector-a:4242",
        sequence=sequence,
        received_ns=ts + 1_500_000,
        session=3,
        interfaces=[uplink, downlink],
        next_hops=next_hops,
    )


def _c(value: int, delta: int, status: int = DeltaStatus.DELTA_STATUS_GAP) -> Counter:
    return Counter(value=value, delta=delta, status=status)  # type: ignore[arg-type]


def congestion_batch(switch: str, sequence: int) -> CongestionBatch:
    """A CongestionBatch with every field set somewhere."""
    ts = T0_NS + sequence * INTERVAL_NS
    queues = [QueueCounters(interface="Ethernet1/1", queue="3", interval_ns=INTERVAL_NS, transmit_pkts=_c(10**9, 10**6),
                            transmit_octets=_c(4 * 10**12, 4 * 10**9), dropped_pkts=_c(7, 1), dropped_octets=_c(7000, 1000),
                            ecn_marked_pkts=_c(5_000, 500), ecn_marked_octets=_c(20_000_000, 2_000_000),
                            max_queue_len_bytes=1_048_576, has_max_queue_len=True)]
    pfc = [PfcCounters(interface="Ethernet1/1", priority=3, interval_ns=INTERVAL_NS, pause_frames_rx=_c(12, 2),
                       pause_frames_tx=_c(30, 4, DeltaStatus.DELTA_STATUS_RESET))]
    return CongestionBatch(schema_version=topics.SCHEMA_VERSION, switch=switch, timestamp_ns=ts,
                           collector_id="collector-a", sequence=sequence, received_ns=ts + 1, session=2,
                           queues=queues, pfc=pfc)


def flow_batch(host: str, leaf: str, sequence: int) -> FlowBatch:
    """A FlowBatch with every field set somewhere: flows with and without NcclTag, all QP and
    byte-source kinds in use, and port totals."""
    start = T0_NS + sequence * INTERVAL_NS
    nccl = NcclTag(
        comm_id="0x7f3a9c0e12345678", rank=3, nranks=16, peer_rank=4, channel=2,
        collective="AllReduce", op_count=U64_MAX,
    )
    flows = [
        Flow(
            rdma_device="mlx5_0", port=1, netdev="ens1f0np0", lqpn=0x000123, rqpn=0xFFFFFF,
            qp_type=QpType.QP_TYPE_RC, qp_state=QpState.QP_STATE_RTS, qp_generation=7,
            src_ip="10.0.1.11", dst_ip="10.0.2.12", udp_src_port=49_152 + sequence, udp_dst_port=4791,
            dscp=26, tx_bytes=12_000_000_000, rx_bytes=3_000_000, tx_packets=2_930_000,
            rx_packets=750, byte_source=ByteSource.BYTE_SOURCE_QP_COUNTER, byte_error_bound=0,
            pid=31337, comm="python3", job_id="slurm-98765", nccl=nccl,
        ),
        Flow(
            rdma_device="mlx5_1", port=1, netdev="ens2f0np0", lqpn=77, rqpn=78,
            qp_type=QpType.QP_TYPE_UD, qp_state=QpState.QP_STATE_ERR, qp_generation=0,
            src_ip="fd00::11", dst_ip="fd00::12", udp_src_port=65_535, udp_dst_port=4791, dscp=0,
            tx_bytes=4096, rx_bytes=0, tx_packets=1, rx_packets=0,
            byte_source=ByteSource.BYTE_SOURCE_PSN_ESTIMATE, byte_error_bound=4096,
        ),
    ]
    ports = [
        PortTotals(
            rdma_device="mlx5_0", port=1, netdev="ens1f0np0", tx_bytes=12_500_000_000,
            rx_bytes=3_100_000, tx_packets=3_000_000, rx_packets=800,
            congestion=NicCongestion(
                interval_ns=INTERVAL_NS, np_ecn_marked_roce_packets=_c(40_000, 1_200), np_cnp_sent=_c(9_000, 300),
                rp_cnp_handled=_c(7_000, 250), rp_cnp_ignored=_c(3, 1), out_of_sequence=_c(12, 2),
                packet_seq_err=_c(5, 1), local_ack_timeout_err=_c(2, 2),
                implied_nak_seq_err=_c(1, 1),
                pfc=[NicPfc(priority=3, rx_pause=_c(100, 10), tx_pause=_c(50, 5), rx_pause_duration_us=_c(900, 90),
                            tx_pause_duration_us=_c(400, 40))],
            ),
        ),
        PortTotals(rdma_device="mlx5_1", port=1, netdev="ens2f0np0"),
    ]
    return FlowBatch(
        schema_version=topics.SCHEMA_VERSION, host=host, leaf=leaf, window_start_ns=start,
        window_end_ns=start + INTERVAL_NS, agent_id=f"agent-{host}", sequence=sequence, flows=flows,
        ports=ports, malformed_records=2, received_ns=start + INTERVAL_NS + 4_000_000,
        collectives=[CollectiveProfile(
            schema_version=topics.SCHEMA_VERSION, window_start_ns=start, window_end_ns=start + INTERVAL_NS, host=host,
            job_id="slurm-42", comm_id="0x8a2d1c4e5f6a7b8c", operation="Send", datatype=9, datatype_bytes=2,
            count=1 << 20, call_bytes=2 << 20, calls=12, nranks=16, ranks=[0, 1], peers=[2, 9],
            first_call_ns=start + 1_000, last_call_ns=start + 900_000_000, timed_calls=22, timed_ns=880_000_000,
            algo_bw_bytes_per_s=52_428_800.0, bus_bw_bytes_per_s=52_428_800.0)],
    )


def _field_paths(descriptor: Descriptor, prefix: str = "") -> Iterator[str]:
    for field in descriptor.fields:
        path = prefix + field.name
        yield path
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            yield from _field_paths(field.message_type, path + ".")


def _set_field_paths(msg: Message, prefix: str = "") -> Iterator[str]:
    # ListFields() lists exactly the fields with a non-default value (or present sub-message).
    for field, value in msg.ListFields():
        path = prefix + field.name
        yield path
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            for sub in value if field.is_repeated else [value]:
                yield from _set_field_paths(sub, path + ".")


def assert_fully_populated(msgs: Iterable[Message]) -> None:
    """Every field path of the schema (e.g. ``interfaces.in_octets.status``) has a non-default
    value in at least one place in *msgs*, so a field added to the .proto without a test value
    fails here instead of going untested."""
    msgs = list(msgs)
    unset = set(_field_paths(msgs[0].DESCRIPTOR)) - {p for m in msgs for p in _set_field_paths(m)}
    assert not unset, f"test messages leave these fields at their default: {sorted(unset)}"


# -- Kafka helpers -----------------------------------------------------------------------------


def java_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner (Java client, kafka-python, aiokafka): murmur2, sign bit cleared."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def consume_all(
    bootstrap: str, topic_names: list[str], partitions: int, expected: int, timeout_s: float = 30.0,
) -> list[ConsumerRecord]:
    """Read every record of partitions 0..*partitions*-1 of *topic_names* from the beginning until
    *expected* records arrived, plus one more short poll to catch extra ones.

    Polls instead of comparing with end offsets because Tansu reports wrong latest offsets.
    Manual assignment, no group: Tansu groups can stick (see flowtracer.embedded.tansu).
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", client_id="roundtrip-consumer",
    )
    try:
        consumer.assign([TopicPartition(t, p) for t in topic_names for p in range(partitions)])
        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        for batch in consumer.poll(timeout_ms=300).values():
            records.extend(batch)
        return records
    finally:
        consumer.close()


# -- tests -------------------------------------------------------------------------------------


def test_messages_are_fully_populated() -> None:
    assert_fully_populated([counter_batch("leaf-01", 1)])
    assert_fully_populated([flow_batch("gpu-node-01", "leaf-01", 1)])
    assert_fully_populated([congestion_batch("leaf-01", 1)])
    assert CongestionBatch.FromString(congestion_batch("leaf-01", 1).SerializeToString()) == congestion_batch("leaf-01", 1)


@pytest.mark.timeout(120)
def test_counter_and_flow_batches_roundtrip_copartitioned(kafka: TansuBroker, unique_id: str) -> None:
    counters_topic = f"{topics.COUNTERS.name}.{unique_id}"
    flows_topic = f"{topics.FLOWS.name}.{unique_id}"
    kafka.create_topics({counters_topic: PARTITIONS, flows_topic: PARTITIONS})

    # What goes out: (topic, key, message) in production order.
    outgoing: list[tuple[str, bytes, Message]] = []
    for sequence in (1, 2):
        outgoing += [(counters_topic, topics.key(s), counter_batch(s, sequence)) for s in LEAVES + SPINES]
        outgoing += [
            (flows_topic, topics.key(leaf), flow_batch(f"gpu-node-{i:02d}", leaf, sequence))
            for i, leaf in enumerate(LEAVES)
        ]
    sent: dict[tuple[str, bytes], list[bytes]] = {}
    partition_of: dict[tuple[str, bytes], int] = {}
    producer = KafkaProducer(
        bootstrap_servers=kafka.bootstrap, acks="all",
        enable_idempotence=False,  # Tansu cannot do idempotent producers
        linger_ms=5, client_id="roundtrip-producer",
    )
    try:
        pending = [
            (topic, key, value, producer.send(topic, key=key, value=value))
            for topic, key, value in ((t, k, m.SerializeToString()) for t, k, m in outgoing)
        ]
        producer.flush(timeout=30)
        for topic, key, value, future in pending:
            metadata = future.get(timeout=30)  # raises if the broker refused the record
            sent.setdefault((topic, key), []).append(value)
            # Every record of one key goes to one partition.
            assert partition_of.setdefault((topic, key), metadata.partition) == metadata.partition
    finally:
        producer.close(timeout=10)

    records = consume_all(kafka.bootstrap, [counters_topic, flows_topic], PARTITIONS, expected=len(outgoing))

    # The topics have exactly the partition count we asked for (not Tansu's auto-create 4).
    probe = KafkaConsumer(bootstrap_servers=kafka.bootstrap)
    try:
        for topic in (counters_topic, flows_topic):
            assert probe.partitions_for_topic(topic) == set(range(PARTITIONS))
    finally:
        probe.close()

    assert len(records) == len(outgoing), "records lost or duplicated"
    received: dict[tuple[str, bytes], list[bytes]] = {}
    for record in records:
        assert record.key is not None
        assert record.partition == partition_of[(record.topic, record.key)]
        assert record.partition == java_partition(record.key, PARTITIONS)
        received.setdefault((record.topic, record.key), []).append(record.value)
    # Same keys, byte-identical values, same order per key (one partition per key keeps order).
    assert received == sent
    # And the decoded messages equal the originals.
    by_key: dict[tuple[str, bytes], list[Message]] = {}
    for topic, key, msg in outgoing:
        by_key.setdefault((topic, key), []).append(msg)
    for (topic, key), values in received.items():
        cls = CounterBatch if topic == counters_topic else FlowBatch
        assert [cls.FromString(v) for v in values] == by_key[(topic, key)]

    # Co-partitioning contract: a leaf's counters and the flows entering at that leaf share a
    # partition, because both topics have the same count and both are keyed by the leaf name.
    for leaf in LEAVES:
        key = topics.key(leaf)
        assert partition_of[(counters_topic, key)] == partition_of[(flows_topic, key)], leaf
    # Not trivially true: the keys do spread over more than one partition.
    assert len({partition_of[(counters_topic, topics.key(s))] for s in LEAVES + SPINES}) > 1
