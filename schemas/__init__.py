"""The contracts the stages share, once: protobuf messages (``v1/``), topic names, keys and partitioning, wire
primitives, record identity, shared bounds and the OpenConfig leaves the contract is built on."""
