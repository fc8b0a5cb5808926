"""Run a processor worker: sink selection, the Faust worker, metrics, clean shutdown."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from prometheus_client import start_http_server

from .app import NullSink, build_app
from .config import ProcessorConfig
from .emitted import Emitted

log = logging.getLogger(__name__)


def make_sink(influx_url: str | None, org: str, bucket: str, token_file: Path | None,
              line_protocol_file: Path | None) -> Any:
    """The configured sink: InfluxDB, a line-protocol file, or none (Kafka outputs only)."""
    if influx_url is None and line_protocol_file is None:
        return NullSink()
    from . import sinks  # imported only when a store is configured

    if influx_url is not None:
        return sinks.InfluxSink(sinks.InfluxConfig.from_env(url=influx_url, org=org, bucket=bucket,
                                                            token_file=token_file))
    return sinks.FileSink(line_protocol_file)


def emitted_lines(e: Emitted) -> list[str]:
    """Line protocol of every output in a finalization (see stream/influx_points.py)."""
    from .influx_points import collision_lines, fim_lines, link_load_lines, path_load_lines

    return [*link_load_lines(e.link_loads), *path_load_lines(e.path_loads), *fim_lines(e.fims),
            *collision_lines(e.collisions)]


def run_worker(cfg: ProcessorConfig, sink: Any, metrics_port: int = 0) -> int:
    """Run until SIGINT/SIGTERM; returns the exit code."""
    import faust

    lines = (lambda e: []) if isinstance(sink, NullSink) else emitted_lines
    app, proc = build_app(cfg, sink, lines)
    if metrics_port:
        start_http_server(metrics_port, addr="127.0.0.1", registry=proc.metrics.registry)
    worker = faust.Worker(app, loglevel=logging.getLogger().getEffectiveLevel(), quiet=True,
                          redirect_stdouts=False, override_logging=False)
    try:
        worker.execute_from_commandline()
    except SystemExit as e:
        return int(e.code or 0)
    finally:
        sink.close()
    return 0
