"""What the embedded default runs (``flowtracer demo``, the local pipeline): the Tansu Kafka broker with its
throw-away S3 object store, the sweeper that applies the topic plan's retention to the store, and the managed
processes they run as, started on free loopback ports and always stopped. Tests and benchmarks use them too;
test-only servers are in ``flowtracer.testbed``."""
