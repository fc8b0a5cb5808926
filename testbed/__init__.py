"""Real throw-away servers that only tests and benchmarks use: VictoriaMetrics (the time-series store tests write
to), a stunnel4 TLS proxy (Kafka over TLS), a SASL proxy (``sasl_proxy`` over ``sasl_server`` and
``kafka_frames``), a TCP proxy that can be cut (broker outages), Prometheus and Alertmanager for the alert rules'
end-to-end test, and a scripted ``/api/v2/write`` endpoint (``write_server``) that answers the HTTP statuses a
test chooses. They run as the embedded processes do (``flowtracer.embedded.managed_process``)."""
