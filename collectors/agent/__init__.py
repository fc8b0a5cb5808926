"""Host agents: RDMA flow records from Linux hosts (or the simulator's host views) -> FlowBatch on Kafka."""
