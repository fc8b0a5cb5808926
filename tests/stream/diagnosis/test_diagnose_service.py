"""``flowtracer diagnose`` as a real process against a real broker: output records of a degraded link in, windows
assembled, the incident published and read back, the ``incident`` point written, a clean stop on SIGTERM; bad
configuration is one line and exit 2. The diagnosis itself is tested in test_diagnosis.py."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from waiting import wait_for

from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.dashboard.incident_feed import IncidentFeed
from flowtracer.stream.diagnosis.assembly import TOPICS
from flowtracer.stream.diagnosis.service import reading_behind

S = 1_000_000_000
TOPO = generate(FabricSpec(hosts=16, leaves=4, spines=2, name="t"))
DOWN = "spine01:Ethernet3>leaf03:Ethernet5"
CABLE = "cable:leaf03:Ethernet5~spine01:Ethernet3"


def _records(t0: int, k: int, degraded: bool = True) -> list[tuple[str, str, bytes]]:
    """Window k's outputs: every link loaded at 10 GB, from window 3 on a queue on DOWN at that rate (far below
    nominal: a degraded cable) unless not ``degraded``, one path over DOWN, and the fabric's FIM sample last (as the
    fabric stage does)."""
    end = t0 + k * S
    out = [(topics.LINK_LOADS.name, lk, analytics_pb2.LinkLoad(
        schema_version=1, window_start_ns=end - S, window_end_ns=end, link=lk, src_node=dl.src_node,
        dst_node=dl.dst_node, speed_bps=dl.speed_bps, measured_valid=True, measured_bytes=10**10).SerializeToString())
        for lk, dl in Fabric(TOPO).links.items()]
    if k >= 3 and degraded:
        out.append((topics.LINK_CONGESTION.name, DOWN, analytics_pb2.LinkCongestion(
            schema_version=1, window_start_ns=end - S, window_end_ns=end, link=DOWN, ecn_marked_pkts=700,
            ecn_valid=True, queue_watermark_bytes=1_250_000, watermark_valid=True).SerializeToString()))
    out.append((topics.PATH_LOADS.name, "p", analytics_pb2.PathLoad(
        schema_version=1, window_start_ns=end - S, window_end_ns=end, path_id="p", links=[DOWN], src_host="host09",
        src_nic="mlx5_0", dst_host="host12", dst_nic="mlx5_0", bytes=10**10).SerializeToString()))
    out.append((topics.FIM.name, "fabric", analytics_pb2.FimSample(
        schema_version=1, window_start_ns=end - 10 * S, window_end_ns=end, group="fabric",
        basis=analytics_pb2.LOAD_BASIS_MEASURED, fim=0.05).SerializeToString()))
    return out


def _send(kafka: TansuBroker, records: list[tuple[str, str, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks=1)
    for topic, key, value in records:
        producer.send(topic, key=topics.key(key), value=value)
    producer.flush(10)
    producer.close()


def _incidents(kafka: TansuBroker, t0: int, windows: int = 10) -> list[analytics_pb2.Incident]:
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None, enable_auto_commit=False,
                             consumer_timeout_ms=1500)
    try:
        parts = [TopicPartition(topics.INCIDENTS.name, p) for p in consumer.partitions_for_topic(
            topics.INCIDENTS.name) or ()]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        found = [analytics_pb2.Incident.FromString(r.value) for r in consumer]
    finally:
        consumer.close()
    return [i for i in found if t0 < i.window_end_ns <= t0 + windows * S]


def _metric(port: int, series: str) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3).read().decode()
    return next((float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(series + " ")), None)


def test_the_service_publishes_the_degraded_link_incident_and_stops_cleanly(kafka: TansuBroker,
                                                                            tmp_path: Path) -> None:
    admin = kafka.admin()
    try:  # the session's broker: another test may have created them
        have = set(admin.list_topics())
    finally:
        admin.close()
    kafka.create_topics({t: 1 for t in (*TOPICS, topics.INCIDENTS.name) if t not in have})
    t0 = time.time_ns() // S * S  # this run's windows: the topics may hold other tests' records
    _send(kafka, [r for k in range(1, 6) for r in _records(t0, k)])
    topo = tmp_path / "fabric.yaml"
    topo.write_text(TOPO.to_yaml())
    lp = tmp_path / "incidents.lp"
    port = free_port()
    with _diagnose(topo, kafka, "--start", "earliest", "--line-protocol-file", str(lp), "--metrics-port", str(port),
                   stderr=subprocess.PIPE) as proc:
        wait_for(lambda: len(_incidents(kafka, t0)) >= 2 or proc.poll() is not None, 20, "two incident snapshots")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        found = _incidents(kafka, t0)
        # opened in window 4 (2 of the last 3 windows), a snapshot again in window 5
        assert [(i.window_end_ns - t0) // S for i in found] == [4, 5]
        inc = found[-1]
        assert inc.kind == "degraded_link" and inc.state == "open" and inc.suspects[0].component == CABLE
        assert inc.start_ns == t0 + 3 * S and inc.detected_ns == t0 + 4 * S
        assert list(inc.flows) == ["host09:mlx5_0>host12:mlx5_0"]
        # every window was complete by its fabric FIM sample, none by the grace
        assert _metric(port, 'flowtracer_diagnose_windows_total{complete="fim"}') == 5
        assert _metric(port, "flowtracer_diagnose_incident_records_total") == 2
        # the built-in dashboard's incident list reads the same records back
        feed = IncidentFeed(kafka.bootstrap, poll_ms=100)
        feed.start()
        try:
            wait_for(lambda: any(i["id"] == inc.id for i in feed.board.json(time.time_ns())) or feed.board.error,
                     10, "the dashboard's incident feed to list the incident")
            assert feed.board.error is None
        finally:
            feed.stop()
    err = proc.stderr.read() if proc.stderr else ""
    assert "Traceback" not in err and "incident degraded_link/" in err
    lines = lp.read_text().splitlines()  # the processor's sink code: the same points it would send to InfluxDB
    assert [line.split(" ")[-1] for line in lines] == [str(t0 + 4 * S), str(t0 + 5 * S)]
    assert all(line.startswith("incident,kind=degraded_link,top_suspect=") and "open=1i" in line for line in lines)

    # Restarted from the end of the topics, it takes the open incident over: the fault goes on under the same id,
    # then the repaired cable closes it (10 quiet windows after its last sighting), under that id too.
    log = tmp_path / "diagnose-2.log"
    with log.open("w") as err2, _diagnose(topo, kafka, "--metrics-port", str(free_port()), stderr=err2) as proc:
        wait_for(lambda: "diagnosing" in log.read_text() or proc.poll() is not None, 20, "the second run to start")
        assert proc.poll() is None, log.read_text()
        taken = re.search(r"took over \d+ open incidents from \d+ snapshots: (.*)", log.read_text())
        assert taken and inc.id in taken.group(1).split(", "), log.read_text()  # (other tests' may be open too)
        _send(kafka, [r for k in range(6, 8) for r in _records(t0, k)]
              + [r for k in range(8, 19) for r in _records(t0, k, degraded=False)])

        def mine() -> list[analytics_pb2.Incident]:
            return [i for i in _incidents(kafka, t0, 20) if i.start_ns > t0]

        # generous: on a loaded machine each read of the shared incidents topic takes seconds
        wait_for(lambda: any(i.state == "closed" for i in mine()) or proc.poll() is not None, 60,
                 "the incident to close")
        assert proc.poll() is None, log.read_text()
        later = [i for i in mine() if i.window_end_ns > t0 + 5 * S]
        assert {i.id for i in later} == {inc.id}, [(i.id, i.state) for i in later]
        assert [i.state for i in later] == ["open"] * 11 + ["closed"]  # windows 6..16 open, closed in 17
        assert later[-1].end_ns == t0 + 7 * S and later[-1].windows == inc.windows + 2


@contextmanager
def _diagnose(topo: Path, kafka: TansuBroker, *args: str, stderr: Any) -> Iterator[subprocess.Popen[str]]:
    """``flowtracer diagnose`` running; on leaving, SIGTERM must stop it cleanly (killed if the test failed)."""
    proc = subprocess.Popen([sys.executable, "-m", "flowtracer", "diagnose", "--topology", str(topo), "--kafka",
                             kafka.bootstrap, *args], stderr=stderr, text=True)
    try:
        yield proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_reader_knows_when_records_wait_unread_on_a_partition(kafka: TansuBroker) -> None:
    """Against the real broker: a poll that returns part of what was fetched leaves the reader behind (the fetch's
    high watermark is past its position); reading the rest catches it up."""
    name = f"ft-behind-{time.time_ns()}"
    kafka.create_topics({name: 1})
    _send(kafka, [(name, "k", b"x")] * 10)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None, enable_auto_commit=False,
                             max_poll_records=3)
    try:
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        read: list[Any] = []
        wait_for(lambda: bool(read.extend(r for rs in consumer.poll(500).values() for r in rs)) or bool(read), 20,
                 "the first records")
        assert len(read) == 3 and reading_behind(consumer, [tp])
        wait_for(lambda: bool(read.extend(r for rs in consumer.poll(500).values() for r in rs)) or len(read) >= 10,
                 20, "the other seven records")
        assert len(read) == 10
        assert not reading_behind(consumer, [tp])
    finally:
        consumer.close()


def test_bad_kafka_settings_are_one_line_and_exit_2(tmp_path: Path) -> None:
    topo = tmp_path / "fabric.yaml"
    topo.write_text(TOPO.to_yaml())
    bad = tmp_path / "kafka.yaml"
    bad.write_text("security_protocol: SSL\nca_file: /nonexistent/ca.pem\n")
    run = subprocess.run([sys.executable, "-m", "flowtracer", "diagnose", "--topology", str(topo), "--kafka",
                          "127.0.0.1:1", "--kafka-config", str(bad)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("flowtracer diagnose: ") and "/nonexistent/ca.pem" in line, line
