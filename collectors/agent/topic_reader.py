"""Read a topic on a thread, forever: the agent's way of following what other stages publish for it.

One kafka-python consumer without a consumer group: it waits for the topic to exist, assigns every partition,
starts at the beginning (a compacted topic: each key's latest record is the state) or at the end (a topic of
events: only what comes from now on matters) and hands every non-null value to ``on_value``.
When the broker is unreachable the thread retries with backoff (1 s doubling to 30 s); the agent keeps working
with what it already read. Used for the QP ends exchange (``peers/exchange.py``) and the
processor's ECMP groups and re-trace requests (``tracing/processor_feedback.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

log = logging.getLogger(__name__)

RETRY_S = (1.0, 30.0)  # consumer (re)connect backoff: first, cap
# A fetch returns after at most this long even when empty. Kafka answers as soon as a record
# arrives anyway; brokers that hold every fetch to its limit (Tansu) would otherwise delay a
# record by their own wait. Costs an idle agent 10 small requests/s.
FETCH_WAIT_MS = 100


class TopicReader:
    """Hands every record value of ``topic`` (from the beginning, then as they come) to ``on_value``.

    Args:
        bootstrap: Kafka ``host:port[,host:port]``.
        topic: the compacted topic.
        on_value: called on the reader's thread with each non-null value (bytes).
        client_id: the Kafka client id.
        what: what the topic holds, for log lines ("QP ends of other hosts").
        client_config: extra KafkaConsumer settings (TLS/SASL: ``schemas.kafka_security.kafka_python_kwargs``).
        from_end: start at the end of each partition (events) instead of the beginning (compacted state).
    """

    def __init__(self, bootstrap: str, topic: str, on_value: Callable[[bytes], object], client_id: str, what: str,
                 client_config: Mapping[str, Any] | None = None, from_end: bool = False) -> None:
        self.bootstrap = bootstrap
        self.from_end = from_end
        self.topic = topic
        self.on_value = on_value
        self.client_id = client_id
        self.what = what
        self.client_config = dict(client_config or {})
        #: Set once every partition has its start offset: from then on every new record is handed over.
        self.positioned = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._consume, name=f"reader-{topic}", daemon=True)

    def start(self) -> TopicReader:
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _consume(self) -> None:
        delay = RETRY_S[0]
        while not self._stop.is_set():
            consumer = None
            try:
                consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                         auto_offset_reset="earliest", client_id=self.client_id,
                                         request_timeout_ms=30_000, fetch_max_wait_ms=FETCH_WAIT_MS,
                                         **self.client_config)
                parts = self._partitions(consumer)
                if parts is None:
                    return
                consumer.assign(parts)
                if self.from_end:
                    consumer.seek_to_end(*parts)
                else:
                    consumer.seek_to_beginning(*parts)
                for tp in parts:  # resolve the start offsets now, so that ``positioned`` means it
                    consumer.position(tp)
                self.positioned.set()
                log.info("reading %s from %s (%d partition(s))", self.what, self.topic, len(parts))
                delay = RETRY_S[0]
                while not self._stop.is_set():
                    for records in consumer.poll(timeout_ms=200).values():
                        for r in records:
                            if r.value is not None:  # a tombstone removes nothing we must forget early
                                self.on_value(r.value)
            except Exception as e:  # whatever kafka-python raises, the thread must live on
                level = logging.WARNING if isinstance(e, KafkaError) else logging.ERROR
                log.log(level, "reading %s from %s: %r; retrying in %.0f s (keeping what was read)",
                        self.what, self.topic, e, delay)
            finally:
                if consumer is not None:
                    consumer.close()
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, RETRY_S[1])

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
