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

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from flowtracer.embedded.managed_process import HOST, ManagedProcess

DEBIAN_PACKAGE = "victoria-metrics"
"""Debian package that installs :data:`DEFAULT_BINARY`."""

DEFAULT_BINARY = Path("/usr/bin/victoria-metrics")

EXTRA_FLAGS: tuple[str, ...] = (
    "-retentionPeriod=100y",
    "-dedup.minScrapeInterval=1ms",
    "-search.latencyOffset=0s",
    "-search.disableCache",
)
"""Flags beyond storage path and listen address; the module docstring gives the reasons."""


class VictoriaMetricsError(RuntimeError):
    """The binary is missing, cannot start, does not become ready, or a request failed."""


class VictoriaMetrics(ManagedProcess):
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
        ready_timeout_s: seconds to wait for ``/health`` to answer OK (:attr:`ready_after_s`
            says how long it took).
        stop_timeout_s: seconds to wait after SIGTERM before SIGKILL.
        log_dir: directory for ``victoria-metrics.log`` (kept after stop); ``None`` puts it in the
            temporary directory that :meth:`stop` removes. The storage always goes to a
            temporary directory that :meth:`stop` removes.
    """

    _error = VictoriaMetricsError
    _title = "VictoriaMetrics"
    _what = "VictoriaMetrics"
    _log_name = "victoria-metrics.log"
    _tmp_prefix = "flowtracer-vm-"
    _always_tmpdir = True  # the storage
    _probe_errors = (OSError, VictoriaMetricsError)

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
        super().__init__(port, ready_timeout_s=ready_timeout_s, stop_timeout_s=stop_timeout_s, log_dir=log_dir)
        self.binary = binary
        self.extra_flags = extra_flags
        self.storage_path: Path | None = None

    # -- lifecycle (ManagedProcess) --------------------------------------------------------------

    def _binary(self) -> Path:
        if not (self.binary.is_file() and os.access(self.binary, os.X_OK)):
            raise VictoriaMetricsError(
                f"{self.binary} not found or not executable; it comes from the Debian package "
                f"{DEBIAN_PACKAGE!r}: apt-get install {DEBIAN_PACKAGE}"
            )
        return self.binary

    def _command(self, binary: Path, port: int) -> tuple[list[str], dict[str, Any]]:
        assert self._tmpdir is not None
        self.storage_path = self._tmpdir / "data"
        argv = [
            str(binary),
            f"-storageDataPath={self.storage_path}",
            f"-httpListenAddr={HOST}:{port}",
            *self.extra_flags,
        ]
        return argv, {"cwd": self._tmpdir}

    def _probe(self) -> str:
        """``/health``; raises VictoriaMetricsError unless it answers OK."""
        health = self._get("/health", timeout_s=1.0).decode()
        if health.strip() != "OK":
            raise VictoriaMetricsError(f"/health answered {health!r}")
        return health

    def _accept(self, health: str) -> bool:
        # Another VictoriaMetrics on the port (bound after our port check) would also say OK;
        # /flags shows whose storage path is being served.
        flags = self._get("/flags", timeout_s=1.0).decode()
        if f'-storageDataPath="{self.storage_path}"' not in flags:
            raise VictoriaMetricsError(f"another VictoriaMetrics answers on port {self._port}; ours could not bind it")
        return True

    # -- use -------------------------------------------------------------------------------------

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
