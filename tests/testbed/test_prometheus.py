"""The throw-away Prometheus and Alertmanager (testbed/prometheus.py, testbed/alertmanager.py) against the real
Debian binaries: an alert on a metric this test serves fires into the Alertmanager and leaves it once resolved;
both stop by their process id; a missing binary or a taken port is a clear error."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server
from waiting import wait_for

from flowtracer.embedded.managed_process import HOST, free_port
from flowtracer.testbed.alertmanager import Alertmanager, AlertmanagerError
from flowtracer.testbed.prometheus import Prometheus, PrometheusError

RULES = """groups:
  - name: t
    rules:
      - alert: QueueHigh
        expr: queue_depth > 10
        for: 1s
        labels: {severity: warning}
        annotations: {summary: "{{ $labels.job }} queue at {{ $value }}"}
"""


@pytest.fixture
def gauge() -> Iterator[tuple[Gauge, int]]:
    """A ``queue_depth`` gauge served on a free port (the target Prometheus scrapes)."""
    registry = CollectorRegistry()
    g = Gauge("queue_depth", "records waiting", registry=registry)
    port = free_port()
    server, thread = start_http_server(port, addr=HOST, registry=registry)
    yield g, port
    server.shutdown()
    thread.join(5)


def test_an_alert_fires_into_the_alertmanager_and_resolves(tmp_path: Path, gauge: tuple[Gauge, int]) -> None:
    g, port = gauge
    rules = tmp_path / "rules.yml"
    rules.write_text(RULES)
    with Alertmanager() as am, Prometheus({"queue": [f"{HOST}:{port}"]}, [rules], alertmanager=am.address) as prom:
        wait_for(lambda: prom.targets_health() == {f"http://{HOST}:{port}/metrics": "up"}, 30, "the target scraped")
        assert not am.alerts(alertname="QueueHigh")
        g.set(42)
        wait_for(lambda: bool(am.alerts(alertname="QueueHigh")), 60, "QueueHigh to fire")
        (alert,) = am.alerts(alertname="QueueHigh", job="queue")
        assert alert.labels["severity"] == "warning" and alert.state == "active"
        assert alert.annotations == {"summary": "queue queue at 42"}
        g.set(3)
        wait_for(lambda: not am.alerts(alertname="QueueHigh"), 60, "QueueHigh to resolve")
        pids = [prom.pid, am.pid]
    for pid in pids:
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # stopped and reaped


def test_missing_binaries_name_their_debian_package(tmp_path: Path) -> None:
    with pytest.raises(PrometheusError, match=r"Debian package 'prometheus': apt-get install prometheus"):
        Prometheus({}, binary=tmp_path / "prometheus").start()
    with pytest.raises(AlertmanagerError, match=r"Debian package 'prometheus-alertmanager'"):
        Alertmanager(binary=tmp_path / "alertmanager").start()


def test_a_taken_port_is_an_error_naming_it() -> None:
    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(PrometheusError, match=rf"cannot start Prometheus: port {HOST}:{port} is already in use"):
            Prometheus({}, port=port).start()
        with pytest.raises(AlertmanagerError, match=rf"cannot start Alertmanager: port {HOST}:{port} is already"):
            Alertmanager(port=port).start()
