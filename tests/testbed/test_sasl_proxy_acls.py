"""The SASL proxy's write-ACL emulation (``SaslProxy(may_write=...)``) with the shipped per-stage plan
(plumbing/kafka_acls.py), live in front of Tansu with both client libraries: an agent's user may write the
flows topic, not the counters (TOPIC_AUTHORIZATION_FAILED, as Apache Kafka answers), and a refused request
is answered in its turn between the broker's answers."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError as AioTopicAuthorizationFailed
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.plumbing.kafka_acls import TOPIC, WRITE, may, plan
from flowtracer.schemas import topics
from flowtracer.testbed.sasl_proxy import SaslProxy

USERS = {"admin": "admin-pw", "flowtracer-agent": "agent-pw", "flowtracer-collector": "collector-pw"}
ACLS = plan()


def _sasl(user: str) -> dict[str, str]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


def _may_write(user: str, topic: str) -> bool:
    return user == "admin" or may(ACLS, user, WRITE, TOPIC, topic)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SaslProxy, TansuBroker]]:
    tansu_port = free_port()
    with SaslProxy(tansu_port, USERS, may_write=_may_write) as proxy, \
            TansuBroker(tansu_port, advertise=proxy.address, client_config=_sasl("admin"),
                        log_dir=tmp_path_factory.mktemp("tansu-acl")) as tansu:
        tansu.create_topics({topics.FLOWS.name: 1, topics.COUNTERS.name: 1})
        yield proxy, tansu


def test_kafka_python_agent_writes_flows_not_counters(broker: tuple[SaslProxy, TansuBroker]) -> None:
    proxy, tansu = broker
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap, enable_idempotence=False, client_id="kp-agent",
                             retries=0, **_sasl("flowtracer-agent"))
    assert producer.send(topics.FLOWS.name, b"own flows").get(timeout=10).offset >= 0
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send(topics.COUNTERS.name, b"a switch's counters").get(timeout=10)
    producer.close()
    collector = KafkaProducer(bootstrap_servers=tansu.bootstrap, enable_idempotence=False, retries=0,
                              client_id="kp-collector", **_sasl("flowtracer-collector"))
    assert collector.send(topics.COUNTERS.name, b"counters").get(timeout=10).offset >= 0
    with pytest.raises(TopicAuthorizationFailedError):
        collector.send(topics.FLOWS.name, b"a host's flows").get(timeout=10)
    collector.close()
    assert ("flowtracer-agent", topics.COUNTERS.name) in proxy.denied
    assert ("flowtracer-collector", topics.FLOWS.name) in proxy.denied
    assert ("flowtracer-agent", topics.FLOWS.name) not in proxy.denied


def _exchange(sock: socket.socket, *payloads: bytes) -> list[bytes]:
    """Send every framed request at once, then read as many responses (without their size prefix)."""
    sock.sendall(b"".join(payloads))
    out = []
    for _ in payloads:
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        out.append(sock.recv(size, socket.MSG_WAITALL))
    return out


def _framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_a_refused_produce_is_answered_in_its_turn(broker: tuple[SaslProxy, TansuBroker]) -> None:
    """Clients match responses to requests in order: a refusal the proxy answers itself must not overtake
    the broker's answer to an earlier request on the same connection."""
    proxy, _ = broker
    client = b"raw-agent"
    head = struct.pack(">h", len(client)) + client
    handshake = _framed(struct.pack(">hhi", 17, 1, 1) + head + struct.pack(">h", 5) + b"PLAIN")
    token = b"\0flowtracer-agent\0" + USERS["flowtracer-agent"].encode()
    login = _framed(struct.pack(">hhi", 36, 0, 2) + head + struct.pack(">i", len(token)) + token)
    metadata = _framed(struct.pack(">hhi", 3, 1, 10) + head + struct.pack(">i", -1))  # all topics
    data = ProduceRequest.TopicProduceData
    produce = ProduceRequest(version=3, transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        data(name=topics.COUNTERS.name, partition_data=[data.PartitionProduceData(index=0, records=None)])])
    produce.with_header(correlation_id=11, client_id="raw-agent")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        assert [struct.unpack_from(">ih", r)[1] for r in _exchange(sock, handshake)] == [0]
        assert [struct.unpack_from(">ih", r)[1] for r in _exchange(sock, login)] == [0]
        first, second = _exchange(sock, metadata, bytes(produce.encode(header=True, framed=True)))
    assert struct.unpack_from(">i", first)[0] == 10  # the broker's Metadata answer first
    answer = ProduceResponse.decode(second, version=3, header=True)
    assert answer.header.correlation_id == 11
    assert [p.error_code for t in answer.responses for p in t.partition_responses] == [29]


def test_aiokafka_agent_is_refused_the_counters(broker: tuple[SaslProxy, TansuBroker]) -> None:
    _, tansu = broker

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap, client_id="aio-agent",
                                    **_sasl("flowtracer-agent"))
        await producer.start()
        try:
            await producer.send_and_wait(topics.FLOWS.name, b"aiokafka flows")
            with pytest.raises(AioTopicAuthorizationFailed):
                await producer.send_and_wait(topics.COUNTERS.name, b"aiokafka counters")
        finally:
            await producer.stop()

    asyncio.run(produce())
