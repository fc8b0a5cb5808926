"""Run a processor worker: sink selection, the Faust worker, metrics, clean shutdown."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from prometheus_client import start_http_server

from flowtracer.schemas.kafka_security import kafka_python_kwargs
from flowtracer.stream.runtime.app import build_app, fabric_changelog_topic, state_changelog_topic
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.sinks import registry
from flowtracer.stream.sinks.base import Sink
from flowtracer.stream.sinks.null import NullSink
from flowtracer.stream.stages.emitted import Emitted

log = logging.getLogger(__name__)


def make_sink(influx_url: str | None, org: str, bucket: str, token_file: Path | None,
              line_protocol_file: Path | None) -> Sink:
    """The configured sink: InfluxDB, a line-protocol file, or none (Kafka outputs only)."""
    if influx_url is not None:
        return registry.make_sink("influx", {"url": influx_url, "org": org, "bucket": bucket,
                                             "token_file": token_file})
    if line_protocol_file is not None:
        return registry.make_sink("file", {"path": line_protocol_file})
    return registry.make_sink("none", {})


def emitted_lines(e: Emitted) -> list[str]:
    """Line protocol of every output in a finalization (see stream/influx_points.py)."""
    from flowtracer.stream.sinks.line_protocol import to_lines

    return to_lines([*e.link_loads, *e.path_loads, *e.fims, *e.collisions])


def ensure_changelogs(bootstrap: str, wanted: dict[str, int], client_config: dict[str, Any] | None = None) -> None:
    """Create the state tables' changelogs (name -> partition count) that are missing; the broker
    would pick its own counts. ``client_config``: TLS/SASL settings for the admin client."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="flowtracer-processor-admin",
                             **(client_config or {}))
    try:
        existing = set(admin.list_topics())
        for name, partitions in wanted.items():
            if name not in existing:
                with contextlib.suppress(TopicAlreadyExistsError):
                    admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def run_worker(cfg: ProcessorConfig, sink: Sink, metrics_port: int = 0) -> int:
    """Run until SIGINT/SIGTERM; returns the exit code."""
    import faust

    lines = (lambda e: []) if sink.name == NullSink.name else emitted_lines
    ensure_changelogs(cfg.kafka, {state_changelog_topic(cfg): cfg.partitions, fabric_changelog_topic(cfg): 1},
                      kafka_python_kwargs(cfg.kafka_security))
    app, proc = build_app(cfg, sink, lines)
    if cfg.web_port:
        from flowtracer.stream.dashboard.server import register_dashboard

        register_dashboard(app, proc)
    if metrics_port:
        start_http_server(metrics_port, addr="127.0.0.1", registry=proc.metrics.registry)
    worker = faust.Worker(app, loglevel=logging.getLogger().getEffectiveLevel(), quiet=True,
                          redirect_stdouts=False, override_logging=False)
    code = 0
    try:
        worker.execute_from_commandline()
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        sink.close()
    if proc.failure is not None:
        return 1
    return code
