"""The stream processor: a Faust app that joins switch counters and host flow records into per-link and
per-path loads, collisions and FIM, written to InfluxDB and Kafka."""
