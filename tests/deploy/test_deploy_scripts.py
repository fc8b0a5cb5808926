"""The two helpers the deployments run from the image: the metrics relay (a real HTTP upstream, a
real child process, real signals) and the topic creator (the one topic plan it applies, from
``plumbing/topic_admin.py``, against what the stages and the processor need, and its Kafka calls
against the Tansu broker)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from deploy_helpers import DEPLOY
from waiting import wait_for

from flowtracer.embedded.tansu import TansuBroker
from flowtracer.plumbing import topic_admin
from flowtracer.schemas.topics import INPUT_TOPICS, INTERNAL_TOPICS, OUTPUT_TOPICS, internal_name
from flowtracer.stream.runtime.app import fabric_changelog_topic, state_changelog_topic
from flowtracer.stream.runtime.config import ProcessorConfig


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"deploy_{name}", DEPLOY / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


create_topics = _module("create_topics")
metrics_relay = _module("metrics_relay")


@pytest.fixture
def upstream() -> Iterator[int]:
    """A stand-in stage: /metrics 200, /healthz 503 (unhealthy), on a free loopback port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code, body = {"/metrics": (200, b"flowtracer_agent_hosts 3.0\n"),
                          "/healthz": (503, b'{"ok": false}')}.get(self.path, (404, b"no"))
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _relay(upstream_port: int, child: str | None, *child_args: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, str(DEPLOY / "metrics_relay.py"), "--listen", "127.0.0.1:0",
           "--upstream", f"127.0.0.1:{upstream_port}"]
    if child is not None:
        cmd += ["--", sys.executable, "-c", child, *child_args]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()  # type: ignore[union-attr]
    assert "->" in line, line
    return proc, line.split("http://", 1)[1].split("{", 1)[0]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


CHILD_EXITS_7_ON_SIGTERM = ("import pathlib, signal, sys, time\n"
                            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
                            "pathlib.Path(sys.argv[1]).touch()\n"
                            "time.sleep(30)")


def test_relay_serves_metrics_and_health_and_passes_signals_and_exit_codes(upstream: int, tmp_path: Path) -> None:
    ready = tmp_path / "child-ready"
    proc, addr = _relay(upstream, CHILD_EXITS_7_ON_SIGTERM, str(ready))
    try:
        wait_for(ready.exists, 10, "the child's SIGTERM handler")
        assert _get(f"http://{addr}/metrics") == (200, b"flowtracer_agent_hosts 3.0\n")
        assert _get(f"http://{addr}/healthz") == (503, b'{"ok": false}')
        assert _get(f"http://{addr}/debug")[0] == 404
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 7, "the child's exit code is the relay's"
    finally:
        proc.kill()
        proc.wait()


def test_relay_reports_a_silent_stage_as_unavailable_and_a_killed_child_as_128_plus_signal() -> None:
    proc, addr = _relay(1, "import time; time.sleep(30)")  # nothing listens on port 1
    try:
        status, body = _get(f"http://{addr}/metrics")
        assert status == 503 and b"does not answer" in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def relay_in_process(upstream: int, timeout_s: float) -> Iterator[Any]:
    """The relay's server (deploy/metrics_relay.py) on a free loopback port in this process, stopped after."""
    server = metrics_relay.make_server(("127.0.0.1", 0), ("127.0.0.1", upstream), timeout_s=timeout_s)
    threading.Thread(target=server.serve_forever, name="relay-accept", daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _answer(url: str) -> tuple[int, bytes] | None:
    """The relay's answer, or None when it refused the connection (its queue still full)."""
    try:
        return _get(url)
    except (urllib.error.URLError, ConnectionError):
        return None


def test_600_idle_half_open_requests_leave_the_relay_a_fixed_pool_and_it_serves_again(upstream: int) -> None:
    """The bound (docs/operations.md, Bounds): a thread per connection would let 600 idle clients make 602 threads."""
    before = set(threading.enumerate())
    idle: list[socket.socket] = []
    with relay_in_process(upstream, timeout_s=60) as server:
        port = server.server_address[1]
        try:
            for _ in range(600):
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(b"GET /metrics HTTP/1.1\r\n")  # the request line, never the end of the headers
                idle.append(s)
            served, waiting = metrics_relay.WORKERS, metrics_relay.BACKLOG
            wait_for(lambda: server.refused == 600 - served - waiting, 30, "every connection beyond the pool refused")
            added = set(threading.enumerate()) - before
            assert len(added) == served + 2, sorted(t.name for t in added)  # workers, deadline watch, accept loop
        finally:
            for s in idle:
                s.close()
        url = f"http://127.0.0.1:{port}/metrics"
        wait_for(lambda: _answer(url) == (200, b"flowtracer_agent_hosts 3.0\n"), 30, "the pool free again")


def test_a_request_trickled_byte_by_byte_is_cut_at_its_deadline(upstream: int) -> None:
    """Each read comes within the timeout, so only the deadline (twice the timeout) frees the worker."""
    with relay_in_process(upstream, timeout_s=0.5) as server, \
            socket.create_connection(server.server_address, timeout=30) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Drip: ")

        def dripped_and_cut() -> bool:
            try:
                s.sendall(b"a")  # one byte every 20 ms: far within the per-read timeout
                s.settimeout(0.001)
                return s.recv(1) == b""
            except TimeoutError:
                return False
            except ConnectionError:
                return True

        wait_for(dripped_and_cut, 30, "the relay cutting a trickled request")
        assert server.cut == 1


def test_the_relay_drops_a_request_that_does_not_arrive_in_time(upstream: int) -> None:
    with relay_in_process(upstream, timeout_s=0.3) as server:
        with socket.create_connection(server.server_address, timeout=30) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            assert s.recv(4096) == b"", "the relay closes an idle half-open request after its timeout"
        host, port = server.server_address
        assert _get(f"http://{host}:{port}/metrics")[0] == 200


def test_relay_rejects_a_bad_address() -> None:
    r = subprocess.run([sys.executable, str(DEPLOY / "metrics_relay.py"), "--listen", "nowhere", "--upstream",
                        "127.0.0.1:1"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "'nowhere' is not host:port" in r.stderr


def test_topic_plan_is_what_the_stages_and_the_processor_need() -> None:
    plan = {t.name: t for t in topic_admin.plan(12, ("proc-a", "proc-b"), topic_admin.ClusterPolicy(replication=3))}
    wanted = {t.name: 12 for t in (*INPUT_TOPICS, *OUTPUT_TOPICS)}  # ensure_topics' counts
    wanted["flowtracer.qp-ends.v1"] = 1
    for app in ("proc-a", "proc-b"):
        wanted |= {internal_name(app, t): 1 if t.name.endswith("group-fim.v1") else 12 for t in INTERNAL_TOPICS}
        wanted[state_changelog_topic(ProcessorConfig.model_construct(app_id=app))] = 12
        wanted[fabric_changelog_topic(ProcessorConfig.model_construct(app_id=app))] = 1
    assert {n: t.partitions for n, t in plan.items()} == wanted
    assert plan["proc-a-stage-state-changelog"].configs["cleanup.policy"] == "compact"
    assert plan["proc-a-fabric-state-changelog"].configs["cleanup.policy"] == "compact"
    assert plan["flowtracer.qp-ends.v1"].configs["cleanup.policy"] == "compact"
    assert plan["flowtracer.path-traces.v1"].configs["cleanup.policy"] == "compact"
    assert all(t.configs["min.insync.replicas"] == "2" for t in plan.values())
    strict = {n for n, t in plan.items() if t.strict}
    assert strict == {"flowtracer.counters.v1", "flowtracer.flows.v1", "flowtracer.path-traces.v1", "flowtracer.switch-congestion.v1",
                      "proc-a.flowtracer.attributions.v1",
                      "proc-b.flowtracer.attributions.v1", "proc-a.flowtracer.group-fim.v1",
                      "proc-b.flowtracer.group-fim.v1", "proc-a-stage-state-changelog", "proc-b-stage-state-changelog",
                      "proc-a-fabric-state-changelog", "proc-b-fabric-state-changelog"}


def test_dry_run_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert create_topics.main(["--dry-run", "--partitions", "4", "--retention-input", "2h"]) == 0
    out = json.loads(capsys.readouterr().out)
    counters = next(t for t in out if t["name"] == "flowtracer.counters.v1")
    assert counters == {"name": "flowtracer.counters.v1", "partitions": 4,
                        "configs": {"min.insync.replicas": "1", "retention.ms": "7200000", "compression.type": "zstd"}}
    assert create_topics.main(["--dry-run", "--retention-input", "soon"]) == 2
    assert create_topics.main(["--partitions", "4"]) == 2  # no --kafka


def test_apply_creates_topics_and_refuses_a_wrong_partition_count(kafka: TansuBroker, unique_id: str) -> None:
    TopicPlan = topic_admin.TopicPlan
    first = [TopicPlan(f"{unique_id}.in", 3, {}, strict=True), TopicPlan(f"{unique_id}.one", 1, {}, strict=True)]
    assert topic_admin.apply(kafka.bootstrap, first, replication=1, timeout_s=20) == []
    again = [TopicPlan(f"{unique_id}.in", 5, {}, strict=True), TopicPlan(f"{unique_id}.one", 1, {}, strict=True)]
    assert topic_admin.apply(kafka.bootstrap, again, replication=1, timeout_s=20) == \
        [f"{unique_id}.in has 3 partitions, needs 5"]
