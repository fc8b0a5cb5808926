#!/usr/bin/env python3
"""Run a flowtracer stage and relay its loopback-only ``/metrics`` and ``/healthz`` to another address.

``flowtracer agent`` and ``flowtracer process`` serve their Prometheus endpoint on 127.0.0.1 only
(by design: "metrics are for the local scraper or a sidecar", collectors/self_metrics.py), and
neither has a flag to bind elsewhere. In a container, 127.0.0.1 is unreachable from Prometheus, so
the deployments start those stages through this wrapper::

    flowtracer-metrics-relay --listen 0.0.0.0:9475 --upstream 127.0.0.1:9465 -- \\
        flowtracer process --metrics-port 9465 ...

It serves ``GET /metrics`` and ``GET /healthz`` on ``--listen`` by fetching the same path from
``--upstream`` (status code, content type and body as the stage answered; 503 when the stage does
not answer) and nothing else (404). It is reachable from the node's network (the agent's relay listens
on the node's IP), so it is bounded: a request must arrive within ``--timeout`` seconds (5) of the
connection, at most :data:`WORKERS` connections are served at once and :data:`BACKLOG` more wait;
a connection beyond that is closed at once and counted (``RelayServer.refused``, logged at 1, 10,
100, ... refusals), and one still served after twice the timeout (a request trickled in byte by byte) is
cut (``RelayServer.cut``). 600 idle half-open requests leave the relay ``WORKERS`` + 3 threads.
It starts the command as its child, forwards SIGTERM, SIGINT,
SIGHUP and SIGQUIT to it, and exits with the child's exit code (128 + signal number when the child
was killed), so it can be a container's PID 1. Without a command it only relays (a sidecar).

Standard library only; reads no environment variables.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

PATHS = ("/metrics", "/healthz")
"""The only paths relayed."""


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) -> (host, port); ValueError naming the text otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not host:port")
    return host.strip("[]"), int(port)


WORKERS = 4
"""Connections served at once (one thread each, started with the server)."""

BACKLOG = 16
"""Accepted connections waiting for a worker; one more is closed at once and counted."""

TIMEOUT_S = 5.0
"""Seconds a connection may take to send its request (each read), and the upstream to answer; a connection
still served after twice that is cut."""


class RelayServer(HTTPServer):
    """An HTTP server with a fixed pool of :data:`WORKERS` threads and a queue of :data:`BACKLOG`
    connections; what finds the queue full is closed unanswered and counted in ``refused``."""

    request_queue_size = 64  # the listen backlog: accepted at once, then queued or refused here

    def __init__(self, listen: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 workers: int = WORKERS, backlog: int = BACKLOG, deadline_s: float = 2 * TIMEOUT_S) -> None:
        super().__init__(listen, handler)
        self.refused = 0
        self.cut = 0  # connections cut at their deadline (a client trickling its request byte by byte)
        self.deadline_s = deadline_s
        self.serving: dict[Any, float] = {}  # connection -> monotonic deadline, while a worker serves it
        self.lock = threading.Lock()
        self.closing = threading.Event()
        threading.Thread(target=self.watch, name="metrics-relay-deadlines", daemon=True).start()
        self.backlog = backlog
        self.waiting: queue.Queue[tuple[Any, Any] | None] = queue.Queue()  # only serve_forever's thread adds
        self.workers = [threading.Thread(target=self.work, name=f"metrics-relay-{i}", daemon=True)
                        for i in range(workers)]
        for w in self.workers:
            w.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Queue the connection for a worker, or close it when the queue is full."""
        if self.waiting.qsize() < self.backlog:
            self.waiting.put((request, client_address))
        else:
            self.shutdown_request(request)
            self.refused += 1
            if str(self.refused).strip("0") == "1":  # 1, 10, 100, ...: say so without flooding the log
                print(f"flowtracer-metrics-relay: {self.refused} connections refused so far: "
                      f"{len(self.workers)} served and {self.backlog} waiting already", file=sys.stderr,
                      flush=True)

    def work(self) -> None:
        """One worker: serve queued connections until :meth:`server_close` sends None."""
        while (item := self.waiting.get()) is not None:
            request, client_address = item
            with self.lock:
                self.serving[request] = time.monotonic() + self.deadline_s
            try:
                self.finish_request(request, client_address)
            except Exception:
                self.handle_error(request, client_address)
            finally:
                with self.lock:
                    self.serving.pop(request, None)
                self.shutdown_request(request)

    def watch(self) -> None:
        """Cut every connection still served at its deadline: the per-read timeout alone lets a client that
        sends a byte every few seconds hold a worker for ever."""
        while not self.closing.wait(min(1.0, self.deadline_s / 4)):
            now = time.monotonic()
            with self.lock:
                late = [r for r, deadline in self.serving.items() if deadline <= now]
                for r in late:
                    del self.serving[r]
            for r in late:
                self.cut += 1
                with contextlib.suppress(OSError):  # already closed by its worker
                    r.shutdown(socket.SHUT_RDWR)  # the worker's read ends; it closes the socket

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away before its answer is not an error of the relay; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def server_close(self) -> None:
        """Close the socket, drop what waits, and tell the workers to stop (not waited for: a worker
        may be reading an idle connection for up to the timeout, and the relay is a container's PID 1)."""
        super().server_close()
        self.closing.set()
        while True:
            try:
                item = self.waiting.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self.shutdown_request(item[0])
        for _ in self.workers:
            self.waiting.put(None)


def make_server(listen: tuple[str, int], upstream: tuple[str, int], timeout_s: float = TIMEOUT_S,
                workers: int = WORKERS, backlog: int = BACKLOG) -> RelayServer:
    """An HTTP server on ``listen`` relaying :data:`PATHS` from ``upstream`` (not started). A client
    has ``timeout_s`` seconds per read to send its request, the upstream as long to answer."""
    base = f"http://{upstream[0]}:{upstream[1]}"

    class Handler(BaseHTTPRequestHandler):
        timeout = timeout_s  # socket timeout of the connection: an idle half-open request ends

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path not in PATHS:
                self._reply(404, "text/plain", f"only {' and '.join(PATHS)} are relayed\n".encode())
                return
            try:
                with urllib.request.urlopen(base + path, timeout=timeout_s) as r:
                    self._reply(r.status, r.headers.get("Content-Type", "text/plain"), r.read())
            except urllib.error.HTTPError as e:  # e.g. /healthz 503: relay it as it is
                self._reply(e.code, e.headers.get("Content-Type", "text/plain"), e.read())
            except OSError as e:
                self._reply(503, "text/plain", f"upstream {base}{path} does not answer: {e}\n".encode())

        def _reply(self, code: int, ctype: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # scrapes every few seconds would flood the stage's log

    return RelayServer(listen, Handler, workers, backlog, 2 * timeout_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="flowtracer-metrics-relay", description=__doc__.splitlines()[0])
    ap.add_argument("--listen", required=True, metavar="HOST:PORT", help="where Prometheus scrapes")
    ap.add_argument("--upstream", required=True, metavar="HOST:PORT", help="the stage's --metrics-port on loopback")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, metavar="SECONDS",
                    help=f"a client's time to send its request, the stage's to answer (default {TIMEOUT_S:g})")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS... (omit to only relay)")
    args = ap.parse_args(argv)
    try:
        listen, upstream = parse_address(args.listen), parse_address(args.upstream)
    except ValueError as e:
        print(f"flowtracer-metrics-relay: {e}", file=sys.stderr)
        return 2
    if not args.timeout > 0:
        print(f"flowtracer-metrics-relay: --timeout {args.timeout}: must be above 0 seconds", file=sys.stderr)
        return 2
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        server = make_server(listen, upstream, args.timeout)
    except OSError as e:
        print(f"flowtracer-metrics-relay: cannot listen on {args.listen}: {e.strerror or e}", file=sys.stderr)
        return 1
    threading.Thread(target=server.serve_forever, name="metrics-relay", daemon=True).start()
    stop = threading.Event()
    received: list[int] = []  # signals not yet passed to the child
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:
        if child is not None and child.poll() is None:
            child.send_signal(signum)
        else:  # no child (yet): remember it
            received.append(signum)
            stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    bound = f"{listen[0]}:{server.server_address[1]}"
    print(f"flowtracer-metrics-relay: http://{bound}{{{','.join(PATHS)}}} -> http://{args.upstream}",
          file=sys.stderr, flush=True)
    try:
        if not command:
            stop.wait()
            return 0
        if received:  # stopped before the command started
            return 128 + received[0]
        try:
            child = subprocess.Popen(command)
        except OSError as e:
            print(f"flowtracer-metrics-relay: cannot run {command[0]!r}: {e.strerror or e}", file=sys.stderr)
            return 127
        while received:  # arrived while the child was starting
            child.send_signal(received.pop(0))
        code = child.wait()
        return 128 - code if code < 0 else code
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
