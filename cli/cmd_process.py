"""``flowtracer process``: run a stream-processor worker."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click
from pydantic import ValidationError

from flowtracer.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE
from flowtracer.fabric.topology import TopologyError, load_topology
from flowtracer.influx_options import influx_options
from flowtracer.kafka_options import kafka_config_option, kafka_security_or_exit
from flowtracer.plumbing.kafka_security import kafka_python_kwargs
from flowtracer.plumbing.topic_admin import TopicError, ensure_topics
from flowtracer.schemas.record_identity import IdentityError, load_key

log = logging.getLogger("flowtracer.process")


def _fail(code: int, msg: str) -> None:
    click.echo(f"flowtracer process: {msg}", err=True)
    sys.exit(code)


@click.command("process")
@click.option("--topology", type=click.Path(path_type=Path), required=True, help="Fabric topology YAML.")
@click.option("--kafka", required=True, help="Kafka bootstrap servers host:port[,host:port].")
@click.option("--resolver", default="hash", show_default=True,
              help="How flows are placed on paths: hash (the topology's ECMP hash models), infer (from counters) or "
                   "trace (the agents' path traces, infer for untraced flows).")
@click.option("--collision-confidence", type=float, default=0.9, show_default=True,
              help="Claim a collision only from placements at least this confident (0..1) that put a flow on one "
                   "member.")
@click.option("--trace-max-age", "trace_max_age_s", type=float, default=1200.0, show_default=True,
              help="trace resolver: how many seconds a path trace without valid_until_ns (from an agent before that "
                   "field) places its flow; stamped traces hold until their valid_until_ns or an ECMP group change "
                   "on their path (docs/tracing.md).")
@click.option("--partitions", type=int, default=8, show_default=True,
              help="Partitions of the co-partitioned input topics (created if missing).")
@click.option("--hop", "hop_s", type=float, default=1.0, show_default=True,
              help="Window hop in seconds: the collectors' sample interval and the agents' window.")
@click.option("--rolling-window", "rolling_window_s", type=float, default=10.0, show_default=True,
              help="Rolling FIM window in seconds (a multiple of --hop).")
@click.option("--grace", "grace_s", type=float, default=3.0, show_default=True,
              help="Finalize a window at the latest this many seconds after its first record.")
@click.option("--max-ahead", "max_ahead_s", type=float, default=10.0, show_default=True,
              help="Dead-letter a record stamped more than this many seconds ahead of this worker's clock.")
@influx_options
@click.option("--line-protocol-file", type=click.Path(path_type=Path), default=None,
              help="Write InfluxDB line protocol to this file instead of (or without) InfluxDB.")
@click.option("--line-protocol-max-bytes", type=click.IntRange(min=1), default=1 << 30, show_default=True,
              help="Rotate the line-protocol file (to FILE.1, FILE.2, ...) once it holds this many bytes.")
@click.option("--line-protocol-keep", type=click.IntRange(min=0), default=3, show_default=True,
              help="Rotated line-protocol files kept; the oldest beyond this is deleted (and counted).")
@click.option("--tansu", is_flag=True, help="Broker is Tansu (the embedded default): Faust settings it needs.")
@click.option("--fetch-wait-ms", type=click.IntRange(1, 60_000), default=None,
              help="How long the broker may hold a fetch that finds nothing, ms [default: 100 with --tansu, else "
                   "1500]. Tansu answers such a fetch only when the wait is over, so it delays each of the worker's "
                   "three internal hops; Apache Kafka answers when data arrives (docs/operations.md).")
@click.option("--web-port", type=int, default=0, show_default=True,
              help="Worker web port: the dashboard on 127.0.0.1; 0 = off.")
@click.option("--metrics-port", type=int, default=0, show_default=True, help="Prometheus /metrics port; 0 = off.")
@click.option("--app-id", default="flowtracer-processor", show_default=True, help="Consumer group / Faust app id.")
@click.option("--host-key-master-file", type=click.Path(path_type=Path), default=None,
              envvar="FLOWTRACER_HOST_KEY_MASTER_FILE",
              help="Master key (hex) the agents' per-host keys derive from: every flow batch and path trace must "
                   "then be signed by the host it names (docs/operations.md, Record identity).")
@kafka_config_option
def process(topology: Path, kafka: str, resolver: str, collision_confidence: float, trace_max_age_s: float,
            partitions: int, hop_s: float, rolling_window_s: float,
            grace_s: float, max_ahead_s: float, influx_url: str | None, influx_org: str, influx_bucket: str,
            influx_token_file: Path | None, line_protocol_file: Path | None, line_protocol_max_bytes: int,
            line_protocol_keep: int, tansu: bool, fetch_wait_ms: int | None, web_port: int, metrics_port: int,
            app_id: str, host_key_master_file: Path | None = None, kafka_config: Path | None = None) -> None:
    """Join switch counters and host flows into link/path loads, collisions and a rolling FIM.

    Reads flowtracer.counters.v1, flowtracer.flows.v1 and (--resolver trace) flowtracer.path-traces.v1; writes
    the output topics of docs/schemas.md and, with --influx-url or --line-protocol-file, the measurements of
    docs/stream.md. Run several workers with the same --app-id to split the partitions.
    """
    from flowtracer.stream.resolvers.registry import RESOLVERS
    from flowtracer.stream.runtime.config import ProcessorConfig
    from flowtracer.stream.runtime.worker import make_sink, run_worker

    if resolver not in RESOLVERS:
        _fail(EXIT_BAD_INPUT, f"--resolver {resolver!r}: choose one of {', '.join(sorted(RESOLVERS))}")
    security = kafka_security_or_exit(kafka_config, "flowtracer process", bootstrap=kafka)
    try:
        cfg = ProcessorConfig(topology=topology, kafka=kafka, kafka_security=security, resolver=resolver,
                              partitions=partitions, hop_s=hop_s,
                              collision_confidence=collision_confidence, trace_max_age_s=trace_max_age_s,
                              rolling_window_s=rolling_window_s, grace_s=grace_s, max_ahead_s=max_ahead_s, tansu=tansu,
                              fetch_wait_ms=fetch_wait_ms, web_port=web_port,
                              app_id=app_id)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(map(str, err["loc"])) or "config"
        _fail(EXIT_BAD_INPUT, f"{where}: {err['msg'].removeprefix('Value error, ')}")
    master = None
    if host_key_master_file is not None:
        try:
            master = load_key(host_key_master_file, "--host-key-master-file")
        except IdentityError as e:
            _fail(EXIT_BAD_INPUT, str(e))
    try:
        load_topology(cfg.topology)
    except TopologyError as e:
        _fail(EXIT_BAD_INPUT, f"invalid topology: {e}")
    try:
        sink = make_sink(influx_url, influx_org, influx_bucket, influx_token_file, line_protocol_file,
                         line_protocol_max_bytes, line_protocol_keep)
    except ValueError as e:
        _fail(EXIT_BAD_INPUT, str(e))
    try:
        ensure_topics(cfg.kafka, cfg.partitions, app_id=cfg.app_id,
                      client_config=kafka_python_kwargs(cfg.kafka_security))
    except TopicError as e:
        _fail(EXIT_FAILURE, str(e))
    sys.exit(run_worker(cfg, sink, metrics_port, master))
