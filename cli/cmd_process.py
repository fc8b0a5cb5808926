"""``flowtracer process``: run a stream-processor worker."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from flowtracer.config_flags import given_flags
from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, exit_with
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.influx_options import influx_options
from flowtracer.kafka_options import kafka_config_option, kafka_security_or_exit
from flowtracer.plumbing.component_config import ComponentConfigError, load_component
from flowtracer.plumbing.kafka_security import kafka_python_kwargs
from flowtracer.plumbing.topic_admin import TopicError, ensure_topics
from flowtracer.schemas.record_identity import IdentityError, load_key

log = logging.getLogger("flowtracer.process")
PROG = "flowtracer process"


@click.command("process")
@click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Processor YAML (deploy/config/processor.yaml); FLOWTRACER_PROCESSOR_* variables override it, "
                   "flags override both (docs/configuration.md).")
@click.option("--topology", type=click.Path(path_type=Path), default=None, help="Fabric topology YAML [required].")
@click.option("--kafka", default=None, help="Kafka bootstrap servers host:port[,host:port] [required].")
@click.option("--resolver", default=None,
              help="How flows are placed on paths: hash (the topology's ECMP hash models), infer (from counters) or "
                   "trace (the agents' path traces, infer for untraced flows) [default: hash].")
@click.option("--collision-confidence", type=float, default=None,
              help="Claim a collision only from placements at least this confident (0..1) that put a flow on one "
                   "member [default: 0.9].")
@click.option("--trace-max-age", "trace_max_age_s", type=float, default=None,
              help="trace resolver: how many seconds a path trace without valid_until_ns (from an agent before that "
                   "field) places its flow; stamped traces hold until their valid_until_ns or an ECMP group change "
                   "on their path (docs/tracing.md) [default: 1200].")
@click.option("--partitions", type=int, default=None,
              help="Partitions of the co-partitioned input topics (created if missing) [default: 8].")
@click.option("--hop", "hop_s", type=float, default=None,
              help="Window hop in seconds: the collectors' sample interval and the agents' window [default: 1].")
@click.option("--rolling-window", "rolling_window_s", type=float, default=None,
              help="Rolling FIM window in seconds (a multiple of --hop) [default: 10].")
@click.option("--grace", "grace_s", type=float, default=None,
              help="Finalize a window at the latest this many seconds after its first record [default: 3].")
@click.option("--max-ahead", "max_ahead_s", type=float, default=None,
              help="Dead-letter a record stamped more than this many seconds ahead of this worker's clock "
                   "[default: 10].")
@influx_options
@click.option("--line-protocol-file", type=click.Path(path_type=Path), default=None,
              help="Write InfluxDB line protocol to this file instead of (or without) InfluxDB.")
@click.option("--line-protocol-max-bytes", type=click.IntRange(min=1), default=None,
              help="Rotate the line-protocol file (to FILE.1, FILE.2, ...) once it holds this many bytes "
                   "[default: 1 GiB].")
@click.option("--line-protocol-keep", type=click.IntRange(min=0), default=None,
              help="Rotated line-protocol files kept; the oldest beyond this is deleted (and counted) [default: 3].")
@click.option("--tansu", is_flag=True, default=None,
              help="Broker is Tansu (the embedded default): Faust settings it needs.")
@click.option("--fetch-wait-ms", type=click.IntRange(1, 60_000), default=None,
              help="How long the broker may hold a fetch that finds nothing, ms [default: 100 with --tansu, else "
                   "1500]. Tansu answers such a fetch only when the wait is over, so it delays each of the worker's "
                   "three internal hops; Apache Kafka answers when data arrives (docs/operations.md).")
@click.option("--web-port", type=int, default=None, help="Worker web port: the dashboard on 127.0.0.1; 0 = off "
                                                         "[default: 0].")
@click.option("--metrics-port", type=int, default=None, help="Prometheus /metrics port; 0 = off [default: 0].")
@click.option("--app-id", default=None, help="Consumer group / Faust app id [default: flowtracer-processor].")
@click.option("--host-key-master-file", type=click.Path(path_type=Path), default=None,
              envvar="FLOWTRACER_HOST_KEY_MASTER_FILE",
              help="Master key (hex) the agents' per-host keys derive from: every flow batch and path trace must "
                   "then be signed by the host it names (docs/operations.md, Record identity).")
@kafka_config_option
def process(config_file: Path | None, kafka_config: Path | None, **flags: object) -> None:
    """Join switch counters and host flows into link/path loads, collisions and a rolling FIM.

    Reads flowtracer.counters.v1, flowtracer.flows.v1 and (--resolver trace) flowtracer.path-traces.v1; writes
    the output topics of docs/schemas.md and, with --influx-url or --line-protocol-file, the measurements of
    docs/stream.md. Run several workers with the same --app-id to split the partitions.
    """
    from flowtracer.stream.runtime.config import ProcessorConfig
    from flowtracer.stream.runtime.worker import make_sink, run_worker

    try:
        cfg = load_component(ProcessorConfig, "processor", config_file, given_flags(FLAG_FIELDS, flags))
    except ComponentConfigError as e:
        exit_with(PROG, EXIT_BAD_INPUT, str(e))
    security = kafka_security_or_exit(kafka_config, PROG, base=cfg.kafka_security, bootstrap=cfg.kafka)
    cfg = cfg.model_copy(update={"kafka_security": security})
    master = None
    if cfg.host_key_master_file is not None:
        try:
            master = load_key(cfg.host_key_master_file, "host_key_master_file")
        except IdentityError as e:
            exit_with(PROG, EXIT_BAD_INPUT, str(e))
    try:
        load_topology(cfg.topology)
    except TopologyError as e:
        exit_with(PROG, EXIT_BAD_INPUT, f"invalid topology: {e}")
    try:
        sink = make_sink(cfg.influx.url, cfg.influx.org, cfg.influx.bucket, cfg.influx.token_file,
                         cfg.line_protocol.file, cfg.line_protocol.max_bytes, cfg.line_protocol.keep)
    except ValueError as e:
        exit_with(PROG, EXIT_BAD_INPUT, str(e))
    try:
        ensure_topics(cfg.kafka, cfg.partitions, app_id=cfg.app_id,
                      client_config=kafka_python_kwargs(cfg.kafka_security))
    except TopicError as e:
        exit_with(PROG, EXIT_FAILURE, str(e))
    sys.exit(run_worker(cfg, sink, cfg.metrics_port, master))


FLAG_FIELDS = {
    "topology": "topology", "kafka": "kafka", "resolver": "resolver", "collision_confidence": "collision_confidence",
    "trace_max_age_s": "trace_max_age_s", "partitions": "partitions", "hop_s": "hop_s",
    "rolling_window_s": "rolling_window_s", "grace_s": "grace_s", "max_ahead_s": "max_ahead_s",
    "influx_url": "influx.url", "influx_org": "influx.org", "influx_bucket": "influx.bucket",
    "influx_token_file": "influx.token_file", "line_protocol_file": "line_protocol.file",
    "line_protocol_max_bytes": "line_protocol.max_bytes", "line_protocol_keep": "line_protocol.keep",
    "tansu": "tansu", "fetch_wait_ms": "fetch_wait_ms", "web_port": "web_port", "metrics_port": "metrics_port",
    "app_id": "app_id", "host_key_master_file": "host_key_master_file",
}
"""Each flag's parameter -> the ProcessorConfig field it overrides (dotted: nested)."""
