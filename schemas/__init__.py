"""Every contract the stages share, once: protobuf messages (``v1/``), topics and keys, the topology model,
ECMP hash models, wire primitives and the parsers for durations and speeds."""
