"""Exchange QP ends with the other host agents over Kafka (``flowtracer.qp-ends.v1``, compacted).

Publishing goes through the agent's own bounded sink (``Sink.send``), so a Kafka outage costs
nothing but freshness. Reading is a ``TopicReader`` (one consumer thread without a consumer group,
from the beginning: compaction keeps each host's latest table) handing each record to ``RemoteEnds``.
When the broker is unreachable it retries with backoff; the agent keeps working with the tables it
already holds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from flowtracer.collectors.agent.peers.ends import MAX_AHEAD_NS, Ends, Publisher, RemoteEnds, digest, encode
from flowtracer.collectors.agent.peers.matching import PeerDirectory
from flowtracer.collectors.agent.topic_reader import TopicReader
from flowtracer.schemas.topics import QP_ENDS, key


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
        self.sink = sink
        self.topic = topic
        self.agent_id = agent_id
        self.remote = RemoteEnds(local_hosts, known_hosts, max_age_ns, addresses, max_ahead_ns)
        self.publisher = Publisher(refresh_ns)
        self.reader = TopicReader(bootstrap, topic, self.remote.offer, f"flowtracer-agent-{agent_id}",
                                  "QP ends of other hosts", client_config)

    def start(self) -> PeerExchange:
        self.reader.start()
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
        self.reader.close(timeout)
