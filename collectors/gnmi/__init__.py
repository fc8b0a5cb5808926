"""gNMI collectors: switch interface and next-hop counters -> CounterBatch on Kafka. The I/O shell (service,
session, channel, backoff, sharding, config) sits here; the pure counter core in ``counters/``."""
