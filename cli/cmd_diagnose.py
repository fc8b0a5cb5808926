"""``flowtracer diagnose``: incidents with ranked suspects from the processor's output topics."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, exit_with
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.influx_options import influx_options
from flowtracer.kafka_options import kafka_config_option, kafka_security_or_exit
from flowtracer.plumbing.kafka_security import kafka_python_kwargs

log = logging.getLogger("flowtracer.diagnose")
PROG = "flowtracer diagnose"


@click.command("diagnose")
@click.option("--topology", type=click.Path(path_type=Path), required=True, help="Fabric topology YAML.")
@click.option("--kafka", required=True, help="Kafka bootstrap servers host:port[,host:port].")
@click.option("--hop", "hop_s", type=click.FloatRange(min=0.001), default=1.0, show_default=True,
              help="The processor's window hop in seconds (its --hop).")
@click.option("--grace", "grace_s", type=click.FloatRange(min=0.0), default=10.0, show_default=True,
              help="A window without a fabric FIM sample is diagnosed this many seconds after its first record "
                   "reached this service.")
@click.option("--start", type=click.Choice(["latest", "earliest"]), default="latest", show_default=True,
              help="Read the output topics from now on (latest) or replay what they hold (earliest).")
@click.option("--topic-wait", "topic_wait_s", type=click.FloatRange(min=0.0), default=30.0, show_default=True,
              help="Seconds to wait for the output topics to exist before giving up (exit 1).")
@influx_options
@click.option("--line-protocol-file", type=click.Path(path_type=Path), default=None,
              help="Write the incident points as InfluxDB line protocol to this file instead of InfluxDB.")
@click.option("--metrics-port", type=int, default=0, show_default=True, help="Prometheus /metrics port; 0 = off.")
@kafka_config_option
def diagnose(topology: Path, kafka: str, hop_s: float, grace_s: float, start: str, topic_wait_s: float,
             influx_url: str | None, influx_org: str, influx_bucket: str, influx_token_file: Path | None,
             line_protocol_file: Path | None, metrics_port: int, kafka_config: Path | None = None) -> None:
    """Turn the processor's outputs into incidents with ranked suspects (docs/stream.md, Incidents).

    Reads flowtracer.link-loads.v1, link-congestion.v1, fim.v1, collisions.v1 and path-loads.v1; a window is
    diagnosed once the fabric FIM sample of it (or of a later window) arrived, or --grace after its first
    record. Publishes every open or just-closed incident to flowtracer.incidents.v1 and, with --influx-url or
    --line-protocol-file, the `incident` points. Run one per fabric: it sees the whole fabric.
    """
    from prometheus_client import start_http_server

    from flowtracer.stream.diagnosis.publisher import IncidentPublisher
    from flowtracer.stream.diagnosis.service import DiagnoseConfig, DiagnoseError, DiagnoseMetrics, DiagnoseService
    from flowtracer.stream.runtime.worker import make_sink

    try:
        topo = load_topology(topology)
    except TopologyError as e:
        exit_with(PROG, EXIT_BAD_INPUT, f"invalid topology: {e}")
    security = kafka_security_or_exit(kafka_config, PROG, bootstrap=kafka)
    try:
        sink = make_sink(influx_url, influx_org, influx_bucket, influx_token_file, line_protocol_file)
    except ValueError as e:
        exit_with(PROG, EXIT_BAD_INPUT, str(e))
    client_config = kafka_python_kwargs(security)
    cfg = DiagnoseConfig(bootstrap=kafka, topology=topo, hop_ns=round(hop_s * 1e9), grace_ns=round(grace_s * 1e9),
                         start=start, client_config=client_config, topic_wait_s=topic_wait_s)
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
