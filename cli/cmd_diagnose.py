"""``flowtracer diagnose``: incidents with ranked suspects from the processor's output topics."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from flowtracer.config_flags import given_flags
from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, exit_with
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.influx_options import influx_options
from flowtracer.kafka_options import kafka_config_option, kafka_security_or_exit
from flowtracer.plumbing.component_config import ComponentConfigError, load_component
from flowtracer.plumbing.kafka_security import kafka_python_kwargs

log = logging.getLogger("flowtracer.diagnose")
PROG = "flowtracer diagnose"


@click.command("diagnose")
@click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Diagnose YAML (deploy/config/diagnose.yaml); FLOWTRACER_DIAGNOSE_* variables override it, "
                   "flags override both (docs/configuration.md).")
@click.option("--topology", type=click.Path(path_type=Path), default=None, help="Fabric topology YAML [required].")
@click.option("--kafka", default=None, help="Kafka bootstrap servers host:port[,host:port] [required].")
@click.option("--hop", "hop_s", type=click.FloatRange(min=0.001), default=None,
              help="The processor's window hop in seconds (its --hop) [default: 1].")
@click.option("--grace", "grace_s", type=click.FloatRange(min=0.0), default=None,
              help="A window without a fabric FIM sample is diagnosed this many seconds after its first record "
                   "reached this service [default: 10].")
@click.option("--start", type=click.Choice(["latest", "earliest"]), default=None,
              help="Read the output topics from now on (latest) or replay what they hold (earliest) "
                   "[default: latest].")
@click.option("--topic-wait", "topic_wait_s", type=click.FloatRange(min=0.0), default=None,
              help="Seconds to wait for the output topics to exist before giving up (exit 1) [default: 30].")
@influx_options
@click.option("--line-protocol-file", type=click.Path(path_type=Path), default=None,
              help="Write the incident points as InfluxDB line protocol to this file instead of InfluxDB.")
@click.option("--metrics-port", type=int, default=None, help="Prometheus /metrics port; 0 = off [default: 0].")
@kafka_config_option
def diagnose(config_file: Path | None, kafka_config: Path | None, **flags: object) -> None:
    """Turn the processor's outputs into incidents with ranked suspects (docs/stream.md, Incidents).

    Reads flowtracer.link-loads.v1, link-congestion.v1, fim.v1, collisions.v1 and path-loads.v1; a window is
    diagnosed once the fabric FIM sample of it (or of a later window) arrived, or --grace after its first
    record. Publishes every open or just-closed incident to flowtracer.incidents.v1 and, with --influx-url or
    --line-protocol-file, the `incident` points. Run one per fabric: it sees the whole fabric.
    """
    from prometheus_client import start_http_server

    from flowtracer.stream.diagnosis.config import DiagnoseSettings
    from flowtracer.stream.diagnosis.publisher import IncidentPublisher
    from flowtracer.stream.diagnosis.service import DiagnoseConfig, DiagnoseError, DiagnoseMetrics, DiagnoseService
    from flowtracer.stream.runtime.worker import make_sink

    try:
        settings = load_component(DiagnoseSettings, "diagnose", config_file, given_flags(FLAG_FIELDS, flags))
    except ComponentConfigError as e:
        exit_with(PROG, EXIT_BAD_INPUT, str(e))
    try:
        topo = load_topology(settings.topology)
    except TopologyError as e:
        exit_with(PROG, EXIT_BAD_INPUT, f"invalid topology: {e}")
    security = kafka_security_or_exit(kafka_config, PROG, base=settings.kafka_security, bootstrap=settings.kafka)
    influx, lp = settings.influx, settings.line_protocol
    try:
        sink = make_sink(influx.url, influx.org, influx.bucket, influx.token_file, lp.file, lp.max_bytes, lp.keep)
    except ValueError as e:
        exit_with(PROG, EXIT_BAD_INPUT, str(e))
    client_config = kafka_python_kwargs(security)
    kafka, metrics_port = settings.kafka, settings.metrics_port
    cfg = DiagnoseConfig(bootstrap=kafka, topology=topo, hop_ns=round(settings.hop_s * 1e9),
                         grace_ns=round(settings.grace_s * 1e9),
                         start=settings.start, client_config=client_config, topic_wait_s=settings.topic_wait_s)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping (%s)", signal.Signals(signum).name)
        stop.set()

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    try:
        publisher = IncidentPublisher(kafka, sink, client_config)
    except Exception as e:  # kafka-python: NoBrokersAvailable and friends
        sink.close()
        exit_with(PROG, EXIT_FAILURE, f"cannot reach Kafka at {kafka}: {type(e).__name__}: {e}")
    metrics = DiagnoseMetrics()
    if metrics_port:
        start_http_server(metrics_port, addr="127.0.0.1", registry=metrics.registry)
    code = 0
    try:
        DiagnoseService(cfg, publisher, metrics).run(stop)
    except DiagnoseError as e:
        click.echo(f"{PROG}: {e}", err=True)
        code = EXIT_FAILURE
    finally:
        publisher.close()
    log.info("stopped: %d incident snapshots published, %d not delivered", publisher.sent, publisher.errors)
    sys.exit(code)


FLAG_FIELDS = {
    "topology": "topology", "kafka": "kafka", "hop_s": "hop_s", "grace_s": "grace_s", "start": "start",
    "topic_wait_s": "topic_wait_s", "influx_url": "influx.url", "influx_org": "influx.org",
    "influx_bucket": "influx.bucket", "influx_token_file": "influx.token_file",
    "line_protocol_file": "line_protocol.file", "metrics_port": "metrics_port",
}
"""Each flag's parameter -> the DiagnoseSettings field it overrides (dotted: nested)."""
