"""Run a processor worker: sink selection, the Faust worker, metrics, clean shutdown."""

from __future__ import annotations

import logging
from pathlib import Path

from prometheus_client import start_http_server

from flowtracer.stream.runtime.app import build_app
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.heap import settle_heap
from flowtracer.stream.sinks import registry
from flowtracer.stream.sinks.base import Sink
from flowtracer.stream.sinks.null import NullSink
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.outputs import WRITTEN, to_lines

log = logging.getLogger(__name__)


def make_sink(influx_url: str | None, org: str, bucket: str, token_file: Path | None,
              line_protocol_file: Path | None, file_max_bytes: int = 1 << 30, file_keep: int = 3) -> Sink:
    """The configured sink: InfluxDB, a line-protocol file (rotated at *file_max_bytes*, *file_keep*
    rotated files kept), or none (Kafka outputs only)."""
    if influx_url is not None:
        return registry.make_sink("influx", {"url": influx_url, "org": org, "bucket": bucket,
                                             "token_file": token_file})
    if line_protocol_file is not None:
        return registry.make_sink("file", {"path": line_protocol_file, "max_bytes": file_max_bytes,
                                           "keep": file_keep})
    return registry.make_sink("none", {})


def emitted_lines(e: Emitted) -> list[str]:
    """Line protocol of every output in a finalization (see stream/sinks/line_protocol.py)."""
    # The lists the sink writes are the registry's (WRITTEN): drop_unwritable checks exactly these first.
    return to_lines([m for out in WRITTEN for m in getattr(e, out.kind)])


def run_worker(cfg: ProcessorConfig, sink: Sink, metrics_port: int = 0,
               host_key_master: bytes | None = None) -> int:
    """Run until SIGINT/SIGTERM; returns the exit code.

    The topics must exist: ``flowtracer process`` applies the topic plan first (``ensure_topics`` with
    the app id: contract, internal topics and these tables' changelogs), and Faust declares none itself.
    ``host_key_master``: the agents' per-host keys derive from it; flows and traces must then be signed
    by the host they name (``record_origin``).
    """
    import faust

    lines = (lambda e: []) if sink.name == NullSink.name else emitted_lines
    # Once Faust, its tables and the producer are up: they, the fabric and the libraries leave the collector's way.
    app, proc = build_app(cfg, sink, lines, on_started=settle_heap)
    if host_key_master is not None:  # agents' records must be signed by the host they name
        proc.require_host_signatures(host_key_master)
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
