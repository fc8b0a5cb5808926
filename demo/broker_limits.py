"""The embedded broker's limits in the demo: how long it keeps records, and the memory at which the demo stops.
No imports, so the CLI can show them as its options' defaults without loading the pipeline."""

BROKER_RETENTION_S = 240.0
"""How long the embedded broker keeps inputs and outputs with ``--broker-storage objects``, s: four minutes, far more
than any reader of the demo lags (the processor, the status and the dashboard read within seconds), and short enough
that the store is full, and flat, well before minute 5 of a long run."""
MIN_BROKER_RETENTION_S = 60.0
"""The shortest retention allowed, s: every reader of the demo keeps within seconds; a minute is slack for a stall."""
BROKER_MEMORY_LIMIT_MB = 2048.0
"""The embedded broker's resident memory at which the demo stops, MB: Tansu's memory storage frees no record
(docs/operations.md, "The embedded broker's memory"), so without a limit a demo left running would take the
machine's memory (about 1 GB an hour at 16 hosts); 2 GB is two hours of the default demo."""
