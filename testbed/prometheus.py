"""A throw-away Prometheus for tests: scrapes given targets, evaluates given rule files, sends alerts to an
Alertmanager (real server, no mocks).

:class:`Prometheus` runs ``/usr/bin/prometheus`` (Debian package ``prometheus``, 2.42.0 on Debian 12) with its
TSDB in a temporary directory on a loopback port, waits for ``/-/ready`` and always stops it again (context
manager, :meth:`~flowtracer.embedded.managed_process.ManagedProcess.stop`, ``atexit``). The configuration file is
written from the arguments: one scrape job per entry of ``jobs``, ``scrape_interval`` and
``evaluation_interval`` both ``interval_s`` (a test uses 1 s; Prometheus accepts any duration), and
``--rules.alert.resend-delay`` the same, so a firing alert reaches the Alertmanager within an interval
(the default resends every minute; a resolved alert is sent at once either way).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import yaml

from flowtracer.embedded.managed_process import HOST, ManagedProcess

DEBIAN_PACKAGE = "prometheus"
"""Debian package that installs :data:`DEFAULT_BINARY` (and ``promtool``)."""

DEFAULT_BINARY = Path("/usr/bin/prometheus")


class PrometheusError(RuntimeError):
    """The binary is missing, cannot start, does not become ready, or a request failed."""


def http_get_json(url: str, error: type[Exception], timeout_s: float = 5.0) -> Any:
    """GET *url* and parse its JSON body; *error* names the URL and the HTTP status on failure."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise error(f"GET {url} failed: HTTP {e.code}: {e.read().decode(errors='replace')}") from e


class PrometheusStyleServer(ManagedProcess):
    """What Prometheus and Alertmanager share: a binary from a Debian package, readiness on ``/-/ready``, a
    ``url``. A subclass sets ``_package`` and the :class:`ManagedProcess` attributes."""

    _package: ClassVar[str] = ""
    """The Debian package that installs the binary (named when it is missing)."""

    def __init__(self, binary: Path, port: int | None, ready_timeout_s: float, stop_timeout_s: float,
                 log_dir: Path | None) -> None:
        super().__init__(port, ready_timeout_s=ready_timeout_s, stop_timeout_s=stop_timeout_s, log_dir=log_dir)
        self.binary = binary

    def _binary(self) -> Path:
        if not (self.binary.is_file() and os.access(self.binary, os.X_OK)):
            raise self._error(f"{self.binary} not found or not executable; it comes from the Debian package "
                              f"{self._package!r}: apt-get install {self._package}")
        return self.binary

    def _probe(self) -> bytes:
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1.0) as resp:
            return bytes(resp.read())

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{HOST}:{self.port}"

    def __repr__(self) -> str:
        state = f"url={self.url}" if self._port is not None else "stopped"
        return f"{type(self).__name__}({state})"


class Prometheus(PrometheusStyleServer):
    """One Prometheus on ``127.0.0.1`` with throw-away storage.

    Args:
        jobs: scrape job name -> ``host:port`` targets (``/metrics`` on each).
        rule_files: alerting/recording rule files to load.
        alertmanager: ``host:port`` of the Alertmanager to send alerts to; ``None``: none.
        interval_s: scrape and rule evaluation interval, and the alert resend delay, s.
        port, ready_timeout_s, stop_timeout_s, log_dir: as :class:`ManagedProcess`.
        binary: the ``prometheus`` executable.
    """

    _error = PrometheusError
    _title = "Prometheus"
    _what = "Prometheus"
    _log_name = "prometheus.log"
    _tmp_prefix = "flowtracer-prometheus-"
    _always_tmpdir = True  # the TSDB and the configuration file
    _probe_errors = (OSError, PrometheusError)
    _package = DEBIAN_PACKAGE

    def __init__(self, jobs: Mapping[str, Sequence[str]], rule_files: Sequence[Path] = (), *,
                 alertmanager: str | None = None, interval_s: float = 1.0, port: int | None = None,
                 binary: Path = DEFAULT_BINARY, ready_timeout_s: float = 30.0, stop_timeout_s: float = 10.0,
                 log_dir: Path | None = None) -> None:
        super().__init__(binary, port, ready_timeout_s, stop_timeout_s, log_dir)
        self.jobs = {name: list(targets) for name, targets in jobs.items()}
        self.rule_files = [Path(f).resolve() for f in rule_files]
        self.alertmanager = alertmanager
        self.interval_s = interval_s
        self.storage_path: Path | None = None

    def config(self) -> dict[str, Any]:
        """The ``prometheus.yml`` this instance runs with."""
        interval = f"{round(self.interval_s * 1000)}ms"
        cfg: dict[str, Any] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval},
            "rule_files": [str(f) for f in self.rule_files],
            "scrape_configs": [{"job_name": name, "static_configs": [{"targets": targets}]}
                               for name, targets in self.jobs.items()],
        }
        if self.alertmanager is not None:
            cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [self.alertmanager]}]}]}
        return cfg

    def _command(self, binary: Path, port: int) -> tuple[list[str], dict[str, Any]]:
        assert self._tmpdir is not None
        self.storage_path = self._tmpdir / "data"
        config = self._tmpdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        interval = f"{round(self.interval_s * 1000)}ms"
        argv = [str(binary), f"--config.file={config}", f"--storage.tsdb.path={self.storage_path}",
                f"--web.listen-address={HOST}:{port}", f"--rules.alert.resend-delay={interval}"]
        return argv, {"cwd": self._tmpdir}

    def _accept(self, answer: bytes) -> bool:
        # Another Prometheus bound to the port after our check would answer too: its TSDB path says whose it is.
        flags = http_get_json(f"{self.url}/api/v1/status/flags", PrometheusError)["data"]
        if flags.get("storage.tsdb.path") != str(self.storage_path):
            raise PrometheusError(f"another Prometheus answers on port {self._port}; ours could not bind it")
        return True

    def targets_health(self) -> dict[str, str]:
        """Each active target's ``scrapeUrl`` -> ``health`` (``up``, ``down``, ``unknown``)."""
        data = http_get_json(f"{self.url}/api/v1/targets?state=active", PrometheusError)["data"]
        return {t["scrapeUrl"]: t["health"] for t in data["activeTargets"]}
