"""Shared plumbing every stage uses the same way: Kafka connection security, the topic plan and its
administration, the per-stage ACL plan, located YAML config loading, durations, gNMI target credentials and the
Kafka clients' log rate limit."""
