"""A collector process's own health: Prometheus metrics and ``/healthz`` over HTTP on loopback.

Every process gets its own ``CollectorRegistry`` (never the global default one), so several
collectors or agents in one test process do not collide, and ``/metrics`` shows exactly this
process's instruments. ``MetricsServer`` serves:

* ``GET /metrics``: the registry in the Prometheus text format;
* ``GET /healthz``: ``200`` with a JSON body when the health callback says ok, else ``503``.

Port ``0`` means off (nothing listens); a negative port asks the OS for a free one (tests).
The server binds ``127.0.0.1`` unless told otherwise: metrics are for the local scraper or a
sidecar, not for the world.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from flowtracer.plumbing.log_rate_limit import register_suppressed

log = logging.getLogger(__name__)

Health = Callable[[], tuple[bool, dict[str, Any]]]
"""Returns (healthy, details); details are rendered as JSON on /healthz."""


def _always_ok() -> tuple[bool, dict[str, Any]]:
    return True, {}


class SinkMetrics:
    """Prometheus instruments of one Kafka sink, registered in ``registry``.

    ``<prefix>_sent_ok_total`` records acknowledged by the broker, ``<prefix>_send_failed_total``
    failed delivery attempts (the record is retried, not lost), ``<prefix>_dropped_total{reason}``
    records given up for good (``buffer_full``: the oldest record was evicted; ``rejected``: the
    broker refused it for good; ``shutdown``: still buffered when ``close`` gave up),
    ``<prefix>_buffered`` records accepted but not yet acknowledged (queue + in flight).
    """

    def __init__(self, registry: CollectorRegistry, prefix: str = "flowtracer_kafka") -> None:
        self.sent_ok = Counter(f"{prefix}_sent_ok", "Records acknowledged by Kafka.", registry=registry)
        self.send_failed = Counter(f"{prefix}_send_failed", "Failed delivery attempts (record retried).",
                                   registry=registry)
        self.dropped = Counter(f"{prefix}_dropped", "Records dropped for good, by reason.", ["reason"],
                               registry=registry)
        self.buffered = Gauge(f"{prefix}_buffered", "Records accepted but not yet acknowledged.",
                              registry=registry)
        self.buffered_bytes = Gauge(f"{prefix}_buffered_bytes", "Bytes of records waiting in the queue.",
                                    registry=registry)
        self.connected = Gauge(f"{prefix}_producer_up", "1 while a Kafka producer is connected.",
                               registry=registry)


class SelfMetrics:
    """The process-wide metrics registry plus its HTTP endpoint.

    ``registry`` is where components register their instruments; ``serve(port)`` starts the HTTP
    server in a daemon thread and returns the bound port (0 when ``port`` is 0, i.e. off).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        register_suppressed(self.registry)  # the Kafka client's log lines dropped as repeats (process-wide)
        self.health: Health = _always_ok
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def sink_metrics(self, prefix: str = "flowtracer_kafka") -> SinkMetrics:
        """Instruments for one ``KafkaSink`` in this registry."""
        return SinkMetrics(self.registry, prefix)

    def serve(self, port: int, host: str = "127.0.0.1", health: Health | None = None) -> int:
        """Serve /metrics and /healthz on ``host:port``; 0 = off, negative = any free port.

        Returns the bound port (0 when off). Raises ``OSError`` naming the port when it is taken.
        """
        if health is not None:
            self.health = health
        if port == 0:
            return 0
        registry, owner = self.registry, self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, CONTENT_TYPE_LATEST, generate_latest(registry))
                elif path == "/healthz":
                    try:
                        ok, details = owner.health()
                    except Exception as e:  # a broken health check is itself unhealthy
                        ok, details = False, {"error": repr(e)}
                    body = json.dumps({"ok": ok, **details}, default=str).encode()
                    self._reply(200 if ok else 503, "application/json", body)
                else:
                    self._reply(404, "text/plain", b"try /metrics or /healthz\n")

            def _reply(self, code: int, ctype: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("metrics http: " + format, *args)

        try:
            self._server = ThreadingHTTPServer((host, max(port, 0)), Handler)
        except OSError as e:
            raise OSError(e.errno, f"cannot serve metrics on {host}:{port}: {e.strerror}") from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()
        bound = int(self._server.server_address[1])
        log.info("metrics on http://%s:%d/metrics, health on /healthz", host, bound)
        return bound

    def stop(self) -> None:
        """Stop the HTTP server (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
