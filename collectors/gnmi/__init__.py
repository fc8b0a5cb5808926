"""gNMI collectors: switch interface and next-hop counters -> CounterBatch on Kafka."""
