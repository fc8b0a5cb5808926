"""The routing what-if tool: replays recorded flows under other routing strategies (ECMP, static, spraying) and
reports FIM and throughput; reads the processor's Kafka outputs, never its internals."""
