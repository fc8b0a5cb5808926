"""Real throw-away servers for tests, benchmarks and the demo: the embedded Tansu broker and VictoriaMetrics,
started on free loopback ports and always stopped."""
