"""A throw-away single-node VictoriaMetrics for tests and local runs (real database, no mocks).

:class:`VictoriaMetrics` runs ``/usr/bin/victoria-metrics`` (Debian package ``victoria-metrics``,
version 1.79.5) with storage in a temporary directory on a loopback port, waits for ``/health``,
and always stops it again (context manager, :meth:`VictoriaMetrics.stop`, ``atexit``).

How InfluxDB line protocol lands in VictoriaMetrics (checked against 1.79 by experiment):

* ``POST <url>/api/v2/write`` (what influxdb-client's WriteApi calls) is accepted; ``org``,
  ``bucket`` and the token are ignored and add no label.
* Measurement ``m`` with field ``f`` becomes the metric ``m_f`` (separator ``_``); every tag
  becomes a label with the same name and value. One line with N fields gives N series.
* Field values become numbers: integer fields (``5i``) come back as JSON integers (``5``),
  booleans as 1/0 and *string fields as 0* (not dropped!). Integers are exact up to 2**53.
* Floats are stored as decimals of about 12 significant digits, truncated: 3.141592653589793
  comes back as 3.141592653589, 1/3 as 0.333333333333, and 1e-15 as 0. Compare floats with a
  relative tolerance of ~1e-11, or use values that have at most 12 significant digits.
* Timestamps are stored in milliseconds: a nanosecond timestamp is truncated (not rounded) to the
  millisecond (``-influxTrimTimestamp=1ms``), and the export returns ms since the epoch.
* A malformed line is skipped with an error in VictoriaMetrics' log, yet the request still gets
  204, so the writer never learns about it; only reading the data back shows the loss.
* Rows older than ``-retentionPeriod`` (default 1 month) are dropped just as silently, also with
  204; this wrapper sets 100 years so tests may use fixed historical timestamps. Rows more than
  2 days in the future are rejected too (1 day ahead is accepted, 3 days is not).

Flags set here so written data is readable at once and "same series, same timestamp" yields one
sample:

* ``-dedup.minScrapeInterval=1ms``: without it, writing a point twice stores two samples with the
  same timestamp and the export returns both. With it, one sample per series and ms is returned.
  Which of two *different* values wins is not defined in 1.79 (it depends on how the storage
  parts merge; the export and a PromQL query were seen to disagree), so a rewrite of the same
  point must carry the same value, or the reader must not care which one it gets.
* ``-search.latencyOffset=0s``: PromQL queries otherwise hide the last 30 s of data.
* ``-search.disableCache``: no response cache that could serve results from before a write.
* :meth:`VictoriaMetrics.export` calls ``/internal/force_flush`` first, because ingested rows sit
  in an in-memory buffer for up to ~1 s before they become searchable.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

DEBIAN_PACKAGE = "victoria-metrics"
"""Debian package that installs :data:`DEFAULT_BINARY`."""

DEFAULT_BINARY = Path("/usr/bin/victoria-metrics")

HOST = "127.0.0.1"

EXTRA_FLAGS: tuple[str, ...] = (
    "-retentionPeriod=100y",
    "-dedup.minScrapeInterval=1ms",
    "-search.latencyOffset=0s",
    "-search.disableCache",
)
"""Flags beyond storage path and listen address; the module docstring gives the reasons."""


class VictoriaMetricsError(RuntimeError):
    """The binary is missing, cannot start, does not become ready, or a request failed."""


def _free_port(host: str = HOST) -> int:
    """A TCP port on *host* that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _check_port_free(host: str, port: int) -> None:
    """Raise :class:`VictoriaMetricsError` when *port* on *host* cannot be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR as the server sets it, so that a port in TIME_WAIT counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise VictoriaMetricsError(
                    f"cannot start VictoriaMetrics: port {host}:{port} is already in use"
                ) from e
            raise


def _log_tail(path: Path | None, max_chars: int = 4000) -> str:
    """The last *max_chars* characters of a log file, for error messages."""
    if path is None:
        return "<no log>"
    try:
        return path.read_text(errors="replace")[-max_chars:]
    except OSError:
        return "<no log>"


class VictoriaMetrics:
    """One single-node VictoriaMetrics process on ``127.0.0.1`` with throw-away storage.

    Use as a context manager, or call :meth:`start` and :meth:`stop` (both idempotent)::

        with VictoriaMetrics() as vm:
            client = InfluxDBClient(url=vm.url, token="unused", org="unused")
            ...
            series = vm.export('{__name__=~"link_.*"}')

    Args:
        port: TCP port for ``-httpListenAddr``; ``None`` picks a free one. A port in use raises
            :class:`VictoriaMetricsError`.
        binary: the ``victoria-metrics`` executable.
        extra_flags: flags added after storage path and listen address.
        ready_timeout_s: seconds to wait for ``/health`` to answer OK.
        stop_timeout_s: seconds to wait after SIGTERM before SIGKILL.
        log_dir: directory for ``victoria-metrics.log`` (kept after stop); ``None`` puts it in the
            temporary directory that :meth:`stop` removes. The storage always goes to a
            temporary directory that :meth:`stop` removes.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        binary: Path = DEFAULT_BINARY,
        extra_flags: tuple[str, ...] = EXTRA_FLAGS,
        ready_timeout_s: float = 30.0,
        stop_timeout_s: float = 10.0,
        log_dir: Path | None = None,
    ) -> None:
        self._requested_port = port
        self.binary = binary
        self.extra_flags = extra_flags
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._log_dir = log_dir
        self._tmpdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._port: int | None = None
        self.storage_path: Path | None = None
        self.log_path: Path | None = None
        self.ready_after_s: float | None = None
        """Seconds from process start until ``/health`` answered OK."""

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start VictoriaMetrics and block until ``/health`` is OK; returns ``self``."""
        if self._proc is not None:
            return self
        if not (self.binary.is_file() and os.access(self.binary, os.X_OK)):
            raise VictoriaMetricsError(
                f"{self.binary} not found or not executable; it comes from the Debian package "
                f"{DEBIAN_PACKAGE!r}: apt-get install {DEBIAN_PACKAGE}"
            )
        port = self._requested_port if self._requested_port is not None else _free_port()
        _check_port_free(HOST, port)
        self._tmpdir = Path(tempfile.mkdtemp(prefix="flowtracer-vm-"))
        self.storage_path = self._tmpdir / "data"
        log_dir = self._tmpdir if self._log_dir is None else self._log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / "victoria-metrics.log"
        self._log_file = self.log_path.open("wb")
        argv = [
            str(self.binary),
            f"-storageDataPath={self.storage_path}",
            f"-httpListenAddr={HOST}:{port}",
            *self.extra_flags,
        ]
        self._port = port
        started = time.monotonic()
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
            cwd=self._tmpdir,
        )
        atexit.register(self.stop)
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        self.ready_after_s = time.monotonic() - started
        return self

    def _wait_ready(self, started: float) -> None:
        """Poll ``/health``, then check via ``/flags`` that the server answering is ours."""
        assert self._proc is not None
        deadline = started + self.ready_timeout_s
        last_error: BaseException | None = None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise VictoriaMetricsError(
                    f"VictoriaMetrics exited with status {code} before it was ready (port "
                    f"{self._port}); log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
            try:
                health = self._get("/health", timeout_s=1.0).decode()
            except (OSError, VictoriaMetricsError) as e:
                last_error = e
            else:
                if health.strip() == "OK":
                    # Another VictoriaMetrics on the port (bound after our port check) would also
                    # say OK; /flags shows whose storage path is being served.
                    flags = self._get("/flags", timeout_s=1.0).decode()
                    if f'-storageDataPath="{self.storage_path}"' not in flags:
                        raise VictoriaMetricsError(
                            f"another VictoriaMetrics answers on port {self._port}; ours could not "
                            "bind it"
                        )
                    return
                last_error = VictoriaMetricsError(f"/health answered {health!r}")
            if time.monotonic() > deadline:
                raise VictoriaMetricsError(
                    f"VictoriaMetrics on port {self._port} not ready after {self.ready_timeout_s} s "
                    f"(last error: {last_error!r}); log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
            time.sleep(0.02)  # poll interval

    def stop(self) -> None:
        """Stop the server: SIGTERM, wait, SIGKILL after ``stop_timeout_s``; remove the storage.
        Safe to call twice."""
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        self._port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- use -------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def port(self) -> int:
        """The HTTP port; raises when the server is not started."""
        if self._port is None:
            raise VictoriaMetricsError("VictoriaMetrics is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the base URL for influxdb-client and the HTTP API."""
        return f"http://{HOST}:{self.port}"

    def _get(self, path: str, params: list[tuple[str, str]] | None = None, timeout_s: float = 10.0) -> bytes:
        """GET *path* with query *params*; raises :class:`VictoriaMetricsError` on HTTP errors."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=timeout_s) as resp:
                return bytes(resp.read())
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            raise VictoriaMetricsError(f"GET {path} failed: HTTP {e.code}: {body}") from e

    def force_flush(self) -> None:
        """Make every row ingested so far searchable (``/internal/force_flush``)."""
        self._get("/internal/force_flush")

    def export(self, match: str) -> list[dict[str, Any]]:
        """All raw samples of the series matching the selector *match*, e.g. ``'link_bytes'`` or
        ``'{__name__=~"link_.*",leaf="leaf1"}'``, after a force flush.

        Returns one dict per series, in no particular order:
        ``{"metric": {"__name__": ..., <label>: ...}, "values": [...], "timestamps": [...]}``
        with timestamps in ms since the Unix epoch, ascending. Only samples up to the current
        time are exported (VictoriaMetrics' default ``end``).
        """
        self.force_flush()
        body = self._get("/api/v1/export", [("match[]", match)])
        return [json.loads(line) for line in body.decode().splitlines() if line.strip()]

    def __repr__(self) -> str:
        state = f"url={self.url}" if self._port is not None else "stopped"
        return f"VictoriaMetrics({state})"
