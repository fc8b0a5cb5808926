"""Rate limit for the Kafka clients' repeated log records, so a broker outage is a few lines, not a flood.

While the broker is unreachable, aiokafka (the processor, under Faust) logs about 100 ERROR lines a
second and kafka-python (collector, agent) a few: the same handful of messages again and again. The
``RepeatFilter`` passes the first record of each (logger, message template), then at most one per
``interval_s`` (30 s) carrying ``(N similar suppressed)``, and counts every record it drops in
``flowtracer_log_suppressed_total{logger}``. Records of other loggers pass untouched, so the
project's own lines (e.g. "cut off from Kafka", "input resumed") still say when the broker is back.

The key is the unformatted template (``record.msg``), so "Unable connect to node with id %s" is one
key whatever the node. Time is the record's own ``created`` stamp (s), so the filter is pure and
deterministic under test. Suppressed records still pending when the outage ends are not logged; the
counter has them. One filter per process, on the root handler (``flowtracer.logs.setup_logging``);
every stage's metrics registry exposes the one process-wide counter (``register_suppressed``).
"""

from __future__ import annotations

import logging
import threading

from prometheus_client import CollectorRegistry, Counter

KAFKA_CLIENT_LOGGERS = ("aiokafka", "kafka")
"""Logger name prefixes rate-limited: aiokafka (processor, under Faust) and kafka-python (collector, agent)."""
INTERVAL_S = 30.0
"""At most one record per key per this many seconds after the first."""
MAX_KEYS = 1024
"""Keys remembered; beyond it the oldest is forgotten (its next record passes as a first occurrence)."""

SUPPRESSED = Counter("flowtracer_log_suppressed", "Log records of the Kafka clients suppressed as repeats",
                     ["logger"], registry=None)
"""Process-wide, like logging itself; each stage registers it in its own registry."""


def register_suppressed(registry: CollectorRegistry) -> None:
    """Expose ``flowtracer_log_suppressed_total`` in a stage's *registry*."""
    registry.register(SUPPRESSED)


class RepeatFilter(logging.Filter):
    """Pass the first record of each (logger, template) of *loggers*, then one per *interval_s* with a count."""

    def __init__(self, loggers: tuple[str, ...] = KAFKA_CLIENT_LOGGERS, interval_s: float = INTERVAL_S,
                 counter: Counter = SUPPRESSED, max_keys: int = MAX_KEYS) -> None:
        super().__init__()
        self.loggers = loggers
        self.interval_s = interval_s
        self.counter = counter
        self.max_keys = max_keys
        # key -> (created of the last record passed (s), records suppressed since); insertion order = age
        self.keys: dict[tuple[str, str], tuple[float, int]] = {}
        # Handler.handle calls filters outside the handler's lock, and the Kafka clients log from their own
        # threads (kafka-python's sender, the collector's sessions): the check-and-update must be atomic.
        self.lock = threading.Lock()

    def limited(self, name: str) -> bool:
        """Whether records of logger *name* are rate-limited (it is one of the loggers or below one)."""
        return any(name == p or name.startswith(p + ".") for p in self.loggers)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.limited(record.name):
            return True
        with self.lock:
            return self.admit(record)

    def admit(self, record: logging.LogRecord) -> bool:
        """The rule for a record of a limited logger (caller holds ``lock``)."""
        key = (record.name, str(record.msg))
        seen = self.keys.get(key)
        if seen is not None and record.created - seen[0] < self.interval_s:
            self.keys[key] = (seen[0], seen[1] + 1)
            self.counter.labels(record.name).inc()
            return False
        if seen is not None:
            del self.keys[key]  # re-inserted below as the newest
            if seen[1]:
                # No "%" added: the record's own args still format its template.
                record.msg = f"{record.msg} ({seen[1]} similar suppressed)"
        elif len(self.keys) >= self.max_keys:
            del self.keys[next(iter(self.keys))]
        self.keys[key] = (record.created, 0)
        return True
