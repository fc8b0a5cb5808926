"""A bounded, backpressured Kafka producer for (topic, key, value) records (kafka-python).

Why a queue in front of kafka-python: its producer has no memory bound of its own (3.x has no
``buffer_memory``), its constructor fails while the broker is unreachable, and ``send`` blocks
up to ``max_block_ms`` waiting for metadata. A collector must keep reading its switches while
Kafka is down, must not grow without bound, and must say exactly what it lost. So:

* ``send`` only appends to a bounded in-memory queue (never blocks, never raises); when the queue
  holds ``max_buffer`` records or ``max_buffer_bytes`` bytes, the OLDEST record is dropped,
  counted (``dropped``) and logged (rate-limited): fresh telemetry is worth more than stale.
* One sender thread creates the producer (retrying with backoff until the broker answers) and
  moves records into it, at most ``max_in_flight`` unacknowledged at a time: that cap is the
  backpressure toward the queue, and keeps kafka-python's own accumulator bounded.
* Records handed to kafka-python stay there until acknowledged: kafka-python retries them
  (``delivery_timeout_s`` defaults to a week), so only records that never left the queue are
  dropped, and ``dropped`` is exact: a timed-out request may have landed, so giving up on it
  would make the count a guess. Nothing is lost silently: ``accepted == sent_ok + dropped +
  buffered`` holds at every quiet moment (``sent_ok`` may count a retried duplicate twice).
  With a short ``delivery_timeout_s`` an expired record goes back to the queue front.
* ``acks="all"``; the idempotent producer is used where the broker supports it. ``None`` (the
  default) lets kafka-python decide from the broker's API versions (on for Kafka >= 0.11).
  Tansu claims Kafka 3.9 APIs but does not implement idempotence reliably, and nothing in the
  protocol identifies it: pass ``enable_idempotence=False`` for Tansu (tests, embedded demo).

Ordering: records leave in send order; a retried record can land after newer ones (consumers
use ``CounterBatch.sequence``). Delivery is at-least-once.

Why one module over 400 lines: the queue, the sender thread and the loss accounting are one
mechanism under one condition variable; split apart, the invariant ``accepted == sent_ok + dropped +
buffered`` would span modules.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError

from flowtracer.collectors.self_metrics import SinkMetrics

log = logging.getLogger(__name__)

_Record = tuple[str, bytes, bytes | None, int | None]  # (topic, key, value or None = tombstone, partition)
RecordHeaders = Callable[[str, bytes, bytes | None], list[tuple[str, bytes]]]
"""Headers of one record from (topic, key, value)."""
_DROP_LOG_EVERY_S = 10.0  # at most one "dropped" warning per this many seconds
_CONNECT_BACKOFF_S = (0.2, 10.0)  # producer (re)creation backoff: first, cap


def _size(rec: _Record) -> int:
    return len(rec[1]) + len(rec[2] or b"")


class KafkaSink:
    """Bounded, backpressured Kafka producer (kafka-python) for (topic, key, value) records.

    Args:
        bootstrap: ``host:port[,host:port...]`` of the Kafka brokers.
        client_id: Kafka client id (shows in broker logs and quotas).
        max_buffer: records queued while Kafka is slow or down; beyond it the oldest is dropped.
            At most ``max_in_flight`` more sit inside kafka-python awaiting acknowledgement, so
            memory is bounded by (max_buffer + max_in_flight) records.
        max_buffer_bytes: the same bound in bytes (key + value), whichever is hit first.
        acks: ``"all"`` (default), ``1`` or ``0``.
        linger_ms: ms kafka-python waits to fill a produce request.
        enable_idempotence: ``None`` = kafka-python's detection (on for brokers >= 0.11);
            ``False`` for Tansu.
        max_in_flight: records handed to kafka-python but not yet acknowledged, at most.
        delivery_timeout_s: seconds kafka-python keeps retrying one record before giving it back
            (it is then re-queued here). Default: a week, i.e. until the broker is back.
        metrics: Prometheus instruments to update (``SelfMetrics.sink_metrics()``), optional.
        producer_config: extra ``KafkaProducer`` settings (e.g. security), applied last.
        headers: ``(topic, key, value) -> [(name, bytes)]``, the headers of each record as it is handed
            to kafka-python (the host agent's signature, ``flowtracer.schemas.record_identity``).
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str,
        max_buffer: int = 100_000,
        max_buffer_bytes: int = 256 * 1024 * 1024,
        acks: str | int = "all",
        linger_ms: int = 20,
        enable_idempotence: bool | None = None,
        max_in_flight: int = 2_000,
        delivery_timeout_s: float = 7 * 86400.0,
        request_timeout_s: float = 10.0,
        metrics: SinkMetrics | None = None,
        producer_config: Mapping[str, Any] | None = None,
        headers: RecordHeaders | None = None,
    ) -> None:
        if max_buffer < 1:
            raise ValueError(f"max_buffer must be at least 1, not {max_buffer}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        self.bootstrap = bootstrap
        self._headers = headers
        self.client_id = client_id
        self.max_buffer = max_buffer
        self.max_buffer_bytes = max_buffer_bytes
        # A small buffer must mean something: never hand kafka-python more than it holds.
        self.max_in_flight = min(max_in_flight, max_buffer)
        self._metrics = metrics
        request_ms = int(request_timeout_s * 1000)
        self._producer_config: dict[str, Any] = {
            "bootstrap_servers": bootstrap.split(","),
            "client_id": client_id,
            "acks": acks,
            "linger_ms": linger_ms,
            "retries": 2**31 - 1,  # kafka-python retries until delivery_timeout_ms
            "request_timeout_ms": request_ms,
            "delivery_timeout_ms": max(int(delivery_timeout_s * 1000), request_ms + linger_ms),
            "max_block_ms": 5_000,  # bounded metadata waits keep close() responsive
            "bootstrap_timeout_ms": 5_000,
            "reconnect_backoff_max_ms": 2_000,
        }
        if enable_idempotence is not None:
            self._producer_config["enable_idempotence"] = enable_idempotence
        self._producer_config.update(producer_config or {})

        self._cond = threading.Condition()
        self._queue: deque[_Record] = deque()
        self._queue_bytes = 0
        self._in_flight = 0
        self._accepted = 0
        self._sent_ok = 0
        self._send_failed = 0
        self._dropped = 0
        self._dropped_unlogged = 0
        self._last_drop_log = 0.0
        self._closing = False
        self._stopped = threading.Event()
        self._producer: KafkaProducer | None = None
        self._last_error: str = ""
        self._thread = threading.Thread(target=self._run, name=f"kafka-sink-{client_id}", daemon=True)
        self._thread.start()

    # -- counters ------------------------------------------------------------------------------

    @property
    def accepted(self) -> int:
        """Records ``send`` accepted (including ones later dropped)."""
        return self._accepted

    @property
    def sent_ok(self) -> int:
        """Records the broker acknowledged."""
        return self._sent_ok

    @property
    def send_failed(self) -> int:
        """Failed delivery attempts; each failed record was re-queued (or dropped if oldest)."""
        return self._send_failed

    @property
    def dropped(self) -> int:
        """Records given up for good (buffer full, rejected by the broker, or left at close)."""
        return self._dropped

    @property
    def buffered(self) -> int:
        """Records accepted but not yet acknowledged: queued plus in flight."""
        return len(self._queue) + self._in_flight

    @property
    def connected(self) -> bool:
        """Whether a producer exists (the broker answered at least once)."""
        return self._producer is not None

    @property
    def last_error(self) -> str:
        """The last Kafka error seen, for /healthz ("" when none)."""
        return self._last_error

    # -- API -----------------------------------------------------------------------------------

    def send(self, topic: str, key: bytes, value: bytes | None, partition: int | None = None) -> None:
        """Queue one record (``value`` None: a tombstone; ``partition`` None: the key's default
        partition). Never blocks, never raises; when full, the oldest record is dropped."""
        rec = (topic, key, value, partition)
        with self._cond:
            self._accepted += 1
            if self._closing:
                self._drop(1, "shutdown", "sink is closed")
                return
            self._queue.append(rec)
            self._queue_bytes += _size(rec)
            self._enforce_bounds()
            self._cond.notify()
        self._update_gauges()

    def partitions_for(self, topic: str) -> int | None:
        """Partition count of ``topic`` from the broker's metadata; None while not connected or unknown."""
        producer = self._producer
        if producer is None:
            return None
        try:
            parts = producer.partitions_for(topic)
        except KafkaError:
            return None
        return len(parts) if parts else None

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every accepted record is acknowledged or dropped, at most ``timeout`` s.

        Returns True when nothing is left buffered.
        """
        deadline = None if timeout is None else time.monotonic() + timeout

        def remaining() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        with self._cond:
            while self._queue and not self._stopped.is_set():
                r = remaining()
                if r == 0.0:
                    return False
                self._cond.wait(0.05 if r is None else min(r, 0.05))
        producer = self._producer
        if producer is not None:
            with contextlib.suppress(KafkaError):  # timed out: the count below says what is left
                producer.flush(remaining())
        with self._cond:
            while self.buffered and not self._stopped.is_set():
                r = remaining()
                if r == 0.0:
                    break
                self._cond.wait(0.05 if r is None else min(r, 0.05))
            return self.buffered == 0

    def close(self, timeout: float = 10.0) -> None:
        """Flush for up to ``timeout`` s, then stop. What is still buffered is counted as dropped."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify_all()
        flushed = self.flush(timeout)
        self._stopped.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=max(1.0, timeout))
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=0 if not flushed else 1)
            except Exception as e:
                log.debug("closing the Kafka producer: %r", e)
        with self._cond:
            left = len(self._queue) + self._in_flight
            self._queue.clear()
            self._queue_bytes = 0
            self._in_flight = 0
            if left:
                self._drop(left, "shutdown", f"Kafka did not take them within {timeout} s of close")
                self._log_drops(force=True)
        self._update_gauges()
        if self._metrics is not None:
            self._metrics.connected.set(0)
        log.info("Kafka sink %s closed: %d sent, %d dropped, %d failed attempts",
                 self.client_id, self._sent_ok, self._dropped, self._send_failed)

    def __enter__(self) -> KafkaSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------------

    def _enforce_bounds(self) -> None:
        """Drop oldest records until both bounds hold (caller holds the lock)."""
        n = 0
        while len(self._queue) > self.max_buffer or (self._queue_bytes > self.max_buffer_bytes and self._queue):
            old = self._queue.popleft()
            self._queue_bytes -= _size(old)
            n += 1
        if n:
            self._drop(n, "buffer_full", "")

    def _drop(self, n: int, reason: str, why: str) -> None:
        """Count ``n`` records as dropped (caller holds the lock); log at most every 10 s."""
        self._dropped += n
        self._dropped_unlogged += n
        if self._metrics is not None:
            self._metrics.dropped.labels(reason).inc(n)
        if why:
            log.error("Kafka sink %s: dropped %d records (%s): %s", self.client_id, n, reason, why)
            self._dropped_unlogged -= n
        else:
            self._log_drops()

    def _log_drops(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._dropped_unlogged and (force or now - self._last_drop_log >= _DROP_LOG_EVERY_S):
            log.warning("Kafka sink %s: buffer full (%d records / %d bytes max): dropped the %d oldest records "
                        "since the last report, %d in total; Kafka: %s", self.client_id, self.max_buffer,
                        self.max_buffer_bytes, self._dropped_unlogged, self._dropped,
                        self._last_error or "slow")
            self._dropped_unlogged = 0
            self._last_drop_log = now

    def _update_gauges(self) -> None:
        m = self._metrics
        if m is not None:
            m.buffered.set(self.buffered)
            m.buffered_bytes.set(self._queue_bytes)

    def _on_ok(self, _metadata: object) -> None:
        with self._cond:
            self._in_flight -= 1
            self._sent_ok += 1
            self._cond.notify_all()
        if self._metrics is not None:
            self._metrics.sent_ok.inc()
        self._update_gauges()

    def _on_error(self, rec: _Record, exc: BaseException) -> None:
        retriable = bool(getattr(exc, "retriable", False)) or isinstance(exc, KafkaTimeoutError)
        with self._cond:
            self._in_flight -= 1
            self._send_failed += 1
            self._last_error = repr(exc)
            if retriable and not self._stopped.is_set():
                # Back to the front: it is the oldest, so the first to go if the queue is full.
                self._queue.appendleft(rec)
                self._queue_bytes += _size(rec)
                self._enforce_bounds()
            elif not retriable:
                self._drop(1, "rejected", f"{rec[0]}: {exc!r}")
            else:  # the producer is being closed: counted, summarised by close()
                self._drop(1, "shutdown", "")
            self._cond.notify_all()
        if self._metrics is not None:
            self._metrics.send_failed.inc()
        self._update_gauges()

    def _connect(self) -> KafkaProducer | None:
        """Create the producer; None (logged) while the broker does not answer."""
        try:
            producer = KafkaProducer(**self._producer_config)
        except KafkaError as e:
            self._last_error = repr(e)
            return None
        log.info("Kafka sink %s connected to %s (idempotence %s)", self.client_id, self.bootstrap,
                 producer.config.get("enable_idempotence"))
        self._last_error = ""
        if self._metrics is not None:
            self._metrics.connected.set(1)
        return producer

    def _run(self) -> None:
        backoff = _CONNECT_BACKOFF_S[0]
        warned = False
        while not self._stopped.is_set():
            if self._producer is None:
                self._producer = self._connect()
                if self._producer is None:
                    if not warned:
                        log.warning("Kafka sink %s: cannot reach %s (%s); buffering up to %d records, retrying",
                                    self.client_id, self.bootstrap, self._last_error, self.max_buffer)
                        warned = True
                    self._stopped.wait(backoff)
                    backoff = min(backoff * 2, _CONNECT_BACKOFF_S[1])
                    continue
                backoff, warned = _CONNECT_BACKOFF_S[0], False
            with self._cond:
                while not self._stopped.is_set() and (not self._queue or self._in_flight >= self.max_in_flight):
                    self._log_drops()
                    self._cond.wait(0.5)
                if self._stopped.is_set():
                    return
                n = min(len(self._queue), self.max_in_flight - self._in_flight)
                batch = [self._queue.popleft() for _ in range(n)]
                self._queue_bytes -= sum(map(_size, batch))
                self._in_flight += n
            self._hand_over(batch)

    def _hand_over(self, batch: list[_Record]) -> None:
        """Give records to kafka-python; what it cannot take now goes back to the queue front."""
        producer = self._producer
        assert producer is not None
        for i, rec in enumerate(batch):
            try:
                headers = None if self._headers is None else self._headers(rec[0], rec[1], rec[2])
                fut = producer.send(rec[0], value=rec[2], key=rec[1], partition=rec[3], headers=headers)
            except KafkaTimeoutError as e:  # no metadata within max_block_ms: broker unreachable
                with self._cond:
                    self._last_error = repr(e)
                    self._send_failed += 1
                    rest = batch[i:]
                    self._in_flight -= len(rest)
                    self._queue.extendleft(reversed(rest))
                    self._queue_bytes += sum(map(_size, rest))
                    self._enforce_bounds()
                if self._metrics is not None:
                    self._metrics.send_failed.inc()
                self._stopped.wait(0.5)
                return
            except (KafkaError, ValueError, TypeError) as e:  # e.g. record too large: never deliverable
                with self._cond:
                    self._in_flight -= 1
                    self._drop(1, "rejected", f"{rec[0]}: {e!r}")
                continue
            fut.add_callback(self._on_ok)
            fut.add_errback(lambda exc, rec=rec: self._on_error(rec, exc))
        self._update_gauges()
