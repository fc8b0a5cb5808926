"""A throw-away Alertmanager for tests: receives the alerts a :class:`~flowtracer.testbed.prometheus.Prometheus`
sends and lists them (real server, no mocks).

:class:`Alertmanager` runs ``/usr/bin/prometheus-alertmanager`` (Debian package ``prometheus-alertmanager``,
0.25.0 on Debian 12) with its storage in a temporary directory on a loopback port, clustering off
(``--cluster.listen-address=`` empty: otherwise it binds 0.0.0.0:9094 and gossips), waits for ``/-/ready`` and
always stops it again. Its one receiver sends nothing anywhere: a test reads ``/api/v2/alerts``, which lists the
alerts that are active now (a resolved alert leaves the list once Prometheus sent its resolution).
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flowtracer.embedded.managed_process import HOST
from flowtracer.testbed.prometheus import PrometheusStyleServer, http_get_json

DEBIAN_PACKAGE = "prometheus-alertmanager"
"""Debian package that installs :data:`DEFAULT_BINARY`."""

DEFAULT_BINARY = Path("/usr/bin/prometheus-alertmanager")


class AlertmanagerError(RuntimeError):
    """The binary is missing, cannot start, does not become ready, or a request failed."""


@dataclass(frozen=True)
class Alert:
    """One alert as the Alertmanager holds it: its labels (``alertname`` included), annotations, state
    (``active``, ``suppressed``, ``unprocessed``), and ``startsAt`` (RFC 3339)."""

    labels: dict[str, str]
    annotations: dict[str, str]
    state: str
    starts_at: str


class Alertmanager(PrometheusStyleServer):
    """One Alertmanager on ``127.0.0.1`` with throw-away storage and a receiver that sends nothing.

    Args:
        group_wait_s: how long a new group waits before its first notification, s (reading ``/api/v2/alerts``
            does not wait for it).
        port, ready_timeout_s, stop_timeout_s, log_dir: as :class:`ManagedProcess`.
        binary: the ``prometheus-alertmanager`` executable.
    """

    _error = AlertmanagerError
    _title = "Alertmanager"
    _what = "Alertmanager"
    _log_name = "alertmanager.log"
    _tmp_prefix = "flowtracer-alertmanager-"
    _always_tmpdir = True  # the storage and the configuration file
    _probe_errors = (OSError, AlertmanagerError)
    _package = DEBIAN_PACKAGE

    def __init__(self, *, group_wait_s: float = 1.0, port: int | None = None, binary: Path = DEFAULT_BINARY,
                 ready_timeout_s: float = 30.0, stop_timeout_s: float = 10.0, log_dir: Path | None = None) -> None:
        super().__init__(binary, port, ready_timeout_s, stop_timeout_s, log_dir)
        self.group_wait_s = group_wait_s
        self.receiver = ""

    def _command(self, binary: Path, port: int) -> tuple[list[str], dict[str, Any]]:
        assert self._tmpdir is not None
        # A receiver named after the temporary directory: the readiness check knows our server by it.
        self.receiver = f"flowtracer-test-{self._tmpdir.name}"
        wait = f"{round(self.group_wait_s * 1000)}ms"
        config = self._tmpdir / "alertmanager.yml"
        config.write_text(yaml.safe_dump({
            "route": {"receiver": self.receiver, "group_by": ["alertname"], "group_wait": wait,
                      "group_interval": wait, "repeat_interval": "1h"},
            "receivers": [{"name": self.receiver}],
        }, sort_keys=False))
        argv = [str(binary), f"--config.file={config}", f"--storage.path={self._tmpdir / 'data'}",
                f"--web.listen-address={HOST}:{port}", "--cluster.listen-address="]
        return argv, {"cwd": self._tmpdir}

    def _accept(self, answer: bytes) -> bool:
        status = http_get_json(f"{self.url}/api/v2/status", AlertmanagerError)
        if self.receiver not in status.get("config", {}).get("original", ""):
            raise AlertmanagerError(f"another Alertmanager answers on port {self._port}; ours could not bind it")
        return True

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``, as Prometheus's ``alertmanagers`` target."""
        return f"{HOST}:{self.port}"

    def alerts(self, **labels: str) -> list[Alert]:
        """The active alerts (``/api/v2/alerts``) whose labels include every ``labels`` item."""
        query = urllib.parse.urlencode([("filter", f'{k}="{v}"') for k, v in labels.items()])
        got = http_get_json(f"{self.url}/api/v2/alerts?{query}", AlertmanagerError)
        return [Alert(dict(a["labels"]), dict(a.get("annotations", {})), a["status"]["state"], a["startsAt"])
                for a in got]
