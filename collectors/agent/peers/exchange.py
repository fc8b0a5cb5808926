"""Exchange QP ends with the other host agents over Kafka (``flowtracer.qp-ends.v1``, compacted).

Publishing goes through the agent's own bounded sink (``Sink.send``), so a Kafka outage costs
nothing but freshness. Reading is one kafka-python consumer thread without a consumer group: it
assigns every partition of the topic, starts at the beginning (compaction keeps each host's latest
table) and hands each record to ``RemoteEnds``. When the broker is unreachable the thread retries
with backoff; the agent keeps working with the tables it already holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Mapping
from typing import Any, Protocol

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from flowtracer.collectors.agent.peers.ends import MAX_AHEAD_NS, Ends, Publisher, RemoteEnds, digest, encode
from flowtracer.collectors.agent.peers.matching import PeerDirectory
from flowtracer.schemas.topics import QP_ENDS, key

log = logging.getLogger(__name__)

_RETRY_S = (1.0, 30.0)  # consumer (re)connect backoff: first, cap
# A fetch returns after at most this long even when empty. Kafka answers as soon as a record
# arrives anyway; brokers that hold every fetch to its limit (Tansu) would otherwise delay a
# table past ``peer_wait``. Costs an idle agent 10 small requests/s.
_FETCH_WAIT_MS = 100


class Sink(Protocol):
    def send(self, topic: str, key: bytes, value: bytes) -> None: ...


class PeerExchange:
    """Publish this agent's hosts' QP ends; keep every other host's (see ``peer_ends``).

    Args:
        bootstrap: Kafka ``host:port[,host:port]``.
        sink: where this agent's records go (its bounded Kafka sink).
        local_hosts: hosts this agent reads itself.
        known_hosts: the topology's hosts (empty: any host).
        agent_id: put in every record.
        refresh_ns: republish an unchanged table at least this often (ns).
        max_age_ns: drop another host's table this old (ns, by the publisher's clock).
        topic: the exchange topic.
        addresses: the topology's host -> RDMA device -> IP; a table naming another address is skipped.
        max_ahead_ns: how far a table's time may lead this agent's clock before it is clamped (``RemoteEnds``).
    """

    def __init__(self, bootstrap: str, sink: Sink, local_hosts: Collection[str], known_hosts: Collection[str],
                 agent_id: str, refresh_ns: int, max_age_ns: int, topic: str = QP_ENDS.name,
                 client_config: Mapping[str, Any] | None = None,
                 addresses: Mapping[str, Mapping[str, str]] | None = None, max_ahead_ns: int = MAX_AHEAD_NS) -> None:
        self.bootstrap = bootstrap
        #: Extra KafkaConsumer settings (TLS/SASL: ``schemas.kafka_security.kafka_python_kwargs``).
        self.client_config = dict(client_config or {})
        self.sink = sink
        self.topic = topic
        self.agent_id = agent_id
        self.remote = RemoteEnds(local_hosts, known_hosts, max_age_ns, addresses, max_ahead_ns)
        self.publisher = Publisher(refresh_ns)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._consume, name="qp-ends-consumer", daemon=True)

    def start(self) -> PeerExchange:
        self._thread.start()
        return self

    def publish(self, host: str, ends: Ends, time_ns: int) -> bool:
        """Send ``host``'s table as of ``time_ns`` when it changed or is due for a refresh."""
        if not self.publisher.due(host, digest(ends), time_ns):
            return False
        self.sink.send(self.topic, key(host), encode(host, time_ns, self.agent_id, ends)[1])
        return True

    def directory(self, now_ns: int) -> PeerDirectory | None:
        """The other hosts' ends as of ``now_ns`` (see ``RemoteEnds.directory``)."""
        return self.remote.directory(now_ns)

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _consume(self) -> None:
        delay = _RETRY_S[0]
        while not self._stop.is_set():
            consumer = None
            try:
                consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                         auto_offset_reset="earliest", client_id=f"flowtracer-agent-{self.agent_id}",
                                         request_timeout_ms=30_000, fetch_max_wait_ms=_FETCH_WAIT_MS,
                                         **self.client_config)
                parts = self._partitions(consumer)
                if parts is None:
                    return
                consumer.assign(parts)
                consumer.seek_to_beginning(*parts)
                log.info("reading QP ends of other hosts from %s (%d partition(s))", self.topic, len(parts))
                delay = _RETRY_S[0]
                while not self._stop.is_set():
                    for records in consumer.poll(timeout_ms=200).values():
                        for r in records:
                            if r.value is not None:  # a tombstone removes nothing we must forget early
                                self.remote.offer(r.value)
            except Exception as e:  # whatever kafka-python raises, the thread must live on
                level = logging.WARNING if isinstance(e, KafkaError) else logging.ERROR
                log.log(level, "QP ends exchange: %r; retrying in %.0f s (flows keep the peers already known)",
                        e, delay)
            finally:
                if consumer is not None:
                    consumer.close()
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, _RETRY_S[1])

    def _partitions(self, consumer: KafkaConsumer) -> list[TopicPartition] | None:
        """The topic's partitions, waiting for it to exist; None when stopped first."""
        warned = False
        while not self._stop.is_set():
            ps = consumer.partitions_for_topic(self.topic)
            if ps:
                return [TopicPartition(self.topic, p) for p in sorted(ps)]
            if not warned:
                log.info("waiting for topic %s to exist", self.topic)
                warned = True
            time.sleep(0.5)
        return None
