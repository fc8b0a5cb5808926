"""Real throw-away servers for tests, benchmarks and the demo: the embedded Tansu broker and VictoriaMetrics,
started on free loopback ports and always stopped; Prometheus and Alertmanager for the alert rules'
end-to-end test (``prometheus``, ``alertmanager``); and a scripted ``/api/v2/write`` endpoint
(``write_server``) that answers the HTTP statuses a test chooses."""
