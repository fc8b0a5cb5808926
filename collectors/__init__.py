"""Collectors: gNMI collectors for switch counters (``gnmi/``) and host agents for RDMA flows (``agent/``),
both publishing protobuf records to Kafka."""
