"""`flowtracer top` against a running broker (real Tansu, real records on the output topics): the view of what
the topics hold, redrawn on a terminal and as compact change lines in a pipe, read without a consumer group."""

from __future__ import annotations

import contextlib
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer
from terminal import Terminal, tmux_or_none
from waiting import wait_for

from flowtracer.embedded.tansu import TansuBroker
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.plumbing.topic_admin import ensure_topics
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, common_pb2

S = 1_000_000_000
TOPO = generate(FabricSpec(hosts=8, leaves=2, spines=2, name="top-test"))
UP = "leaf01:Ethernet5>spine01:Ethernet1"
SUSPECT = "cable:leaf02:Ethernet5~spine01:Ethernet2"


class Fabric:
    """A broker whose output topics get the records a processor and ``flowtracer diagnose`` would write."""

    def __init__(self, broker: TansuBroker, topology: Path) -> None:
        self.broker = broker
        self.topology = topology
        self.producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
        self.start_ns = time.time_ns() // S * S

    def windows(self, first: int, last: int, fim: float) -> None:
        """Windows ``first``..``last`` (s after start): a fabric FIM sample, a link load and a harmful collision."""
        for k in range(first, last + 1):
            end = self.start_ns + k * S
            self._send(topics.FIM, analytics_pb2.FimSample(schema_version=1, window_end_ns=end, group="fabric",
                                                           basis=analytics_pb2.LOAD_BASIS_MEASURED, fim=fim))
            self._send(topics.LINK_LOADS, analytics_pb2.LinkLoad(schema_version=1, window_end_ns=end, link=UP,
                                                                 src_node="leaf01", dst_node="spine01",
                                                                 measured_valid=True, measured_bytes=10**9))
            flows = [common_pb2.FlowRef(key=common_pb2.FlowKey(src_ip="10.0.0.1", dst_ip="10.0.0.5",
                                                               udp_src_port=p), src_host="host01", dst_host="host05")
                     for p in (49152, 49153)]
            self._send(topics.COLLISIONS, analytics_pb2.Collision(
                schema_version=1, window_end_ns=end, switch="leaf01", group="leaf01:spine01|spine02", link=UP,
                idle_link="leaf01:Ethernet6>spine02:Ethernet1", link_utilization=0.97, flows=flows, harmful=True,
                harm_basis="queue"))
        self.producer.flush(10)

    def incident(self, state: str) -> None:
        self._send(topics.INCIDENTS, analytics_pb2.Incident(
            schema_version=1, window_end_ns=self.start_ns + 3 * S, id=f"degraded_link/{SUSPECT}/1", kind="degraded_link",
            state=state, start_ns=self.start_ns + 2 * S,
            suspects=[analytics_pb2.Suspect(component=SUSPECT, score=2.5)], flows=["host01:mlx5_0>host05:mlx5_0"],
            hosts=["host01", "host05"], jobs=["4711"]), key=b"degraded_link")
        self.producer.flush(10)

    def _send(self, topic: topics.Topic, msg: object, key: bytes | None = None) -> None:
        self.producer.send(topic.name, msg.SerializeToString(), key=key)  # type: ignore[attr-defined]

    def top(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "flowtracer", *args, "top", "--kafka", self.broker.bootstrap, "--topology",
                str(self.topology), "--every", "0.3"]


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[Fabric]:
    topology = tmp_path / "topology.yaml"
    topology.write_text(TOPO.to_yaml())
    with TansuBroker(log_dir=tmp_path) as broker:
        ensure_topics(broker.bootstrap, partitions=2)
        f = Fabric(broker, topology)
        try:
            yield f
        finally:
            f.producer.close(5)


class Lines:
    """A process's stdout lines, read as they come (a thread), so the test can wait on what it printed."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)


def test_piped_top_prints_what_changed_and_commits_nothing(fabric: Fabric) -> None:
    fabric.windows(1, 5, 0.4)
    fabric.incident("open")
    proc = subprocess.Popen(fabric.top(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = Lines(proc)
        wait_for(lambda: out.has("+ incident degraded_link") or proc.poll() is not None, 60, "the incident line")
        assert out.has("fabric FIM measured 0.400"), out.lines
        assert out.has("+ collision leaf01:spine01|spine02: 2 flows on leaf01:Ethernet5>spine01:Ethernet1 97% "
                       "HARMFUL"), out.lines
        [inc] = [line for line in out.lines if "+ incident" in line]
        assert f"top suspect {SUSPECT} (2.50); jobs 4711; 1 flows, 2 hosts" in inc
        # the fabric changes: the incident closes and the FIM moves; quiet frames in between print nothing
        printed = len(out.lines)
        fabric.incident("closed")
        fabric.windows(6, 8, 0.8)
        wait_for(lambda: out.has("- incident closed") and out.has("(was 0.400)"), 60, "the change lines")
        assert len(out.lines) == printed + 2, out.lines[printed:]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    # read-only: no consumer group joined, so none holds offsets
    admin = fabric.broker.admin()
    try:
        assert list(admin.list_groups()) == []
    finally:
        admin.close()


def test_top_on_a_terminal_redraws_one_screen_and_with_json_logs_prints_lines(fabric: Fabric, tmp_path: Path) -> None:
    if tmux_or_none() is None:
        pytest.skip("tmux is not installed (`make system-deps` installs it)")
    fabric.windows(1, 5, 0.4)
    fabric.incident("open")
    term = Terminal("exec " + shlex.join(fabric.top()), tmp_path, 120, 40)
    try:
        screen = term.wait_screen(lambda s: "fabric FIM   measured 0.400" in s and "degraded_link since" in s, 60,
                                  "top's screen with the FIM and the incident")
        assert "collisions   1 now, 1 seen" in screen and "incidents    1 open, 0 closed" in screen, screen
        assert f"top suspect {SUSPECT} (2.50)" in screen and "HARMFUL" in screen, screen
        assert not term.exited(), screen
    finally:
        term.close()
    # --log-format json asks for lines a log shipper reads, even on a terminal
    term = Terminal("exec " + shlex.join(fabric.top("--log-format", "json")), tmp_path, 120, 40)
    try:
        screen = term.wait_screen(lambda s: "+ incident degraded_link" in s, 60, "top's compact lines")
        assert "fabric FIM measured 0.400" in screen and "collisions   " not in screen, screen
    finally:
        term.close()


def test_top_says_what_is_wrong_without_a_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    res = subprocess.run([sys.executable, "-m", "flowtracer", "top", "--kafka", "127.0.0.1:1", "--topology",
                          str(missing)], capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2 and "flowtracer top: invalid topology" in res.stderr and str(missing) in res.stderr
    assert "Traceback" not in res.stderr
    topology = tmp_path / "topology.yaml"
    topology.write_text(TOPO.to_yaml())
    with contextlib.closing(__import__("socket").socket()) as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = subprocess.run([sys.executable, "-m", "flowtracer", "top", "--kafka", f"127.0.0.1:{port}", "--topology",
                          str(topology)], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 1, res.stderr
    assert "flowtracer top: cannot consume the output topics" in res.stderr and "Traceback" not in res.stderr
