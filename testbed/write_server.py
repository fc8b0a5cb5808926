"""A scripted InfluxDB write endpoint: ``/api/v2/write`` on a free loopback port that answers the
statuses a test chose (a revoked token's 401, a 503 outage, a 429 with Retry-After), then 204.

It stores the bodies it answered 204 to and the time of every request, so a test can check that
nothing was lost, nothing written twice, and how long the client waited between retries. Nothing
here speaks Flux or keeps series: VictoriaMetrics is the store for everything else.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

REFUSAL = b'{"code":"invalid","message":"scripted refusal"}'
"""The body of every scripted non-204 answer (InfluxDB's error shape)."""


class WriteServer:
    """Answers the next scripted statuses (then 204); ``stored`` holds the lines of 204-answered
    bodies, ``requests`` the monotonic time of every request (s)."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, str]]] = []
        self.stored: list[str] = []
        self.requests: list[float] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                with server.lock:
                    server.requests.append(time.monotonic())
                    status, headers = server.script.pop(0) if server.script else (204, {})
                    if status == 204:
                        server.stored.extend(body.split("\n"))
                payload = REFUSAL if status != 204 else b""
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="write-server", daemon=True)
        self.thread.start()

    def answer(self, *statuses: int, **headers: str) -> None:
        """Answer the next requests with *statuses*, in order, each with *headers*."""
        with self.lock:
            self.script.extend((s, dict(headers)) for s in statuses)

    def lines(self) -> list[str]:
        """A copy of the lines stored so far."""
        with self.lock:
            return list(self.stored)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> WriteServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
