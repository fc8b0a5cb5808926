"""KafkaSink against a real broker (Tansu): delivery, a broker that is down or stopped, exact
accounting of what was dropped (oldest first), metrics, and a close that flushes."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

import pytest
from kafka.errors import KafkaError
from kafka_records import consume_all
from prometheus_client import generate_latest

from flowtracer.collectors.kafka_sink import KafkaSink
from flowtracer.collectors.self_metrics import SelfMetrics
from flowtracer.embedded.tansu import TansuBroker, free_port


def _metric(sm: SelfMetrics, name: str) -> float:
    v = sm.registry.get_sample_value(name.split("{")[0], _labels(name))
    return 0.0 if v is None else v


def _labels(name: str) -> dict[str, str]:
    if "{" not in name:
        return {}
    body = name.split("{", 1)[1].rstrip("}")
    return dict(kv.split("=") for kv in body.split(","))


@pytest.fixture
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """A broker of this test alone: the test stops and restarts it."""
    with TansuBroker(log_dir=tmp_path_factory.mktemp("tansu-own")) as b:
        yield b


def test_delivers_everything_and_close_flushes(kafka: TansuBroker, unique_id: str) -> None:
    kafka.create_topics({unique_id: 8})
    sm = SelfMetrics()
    sink = KafkaSink(kafka.bootstrap, client_id=unique_id, enable_idempotence=False, metrics=sm.sink_metrics())
    sent = {(f"leaf{i % 16}".encode(), f"v{i}".encode()) for i in range(500)}
    for k, v in sorted(sent):
        sink.send(unique_id, k, v)
    sink.close()
    assert (sink.sent_ok, sink.dropped, sink.buffered) == (500, 0, 0)
    assert set(consume_all(kafka.bootstrap, unique_id, expect=500)) == sent
    assert _metric(sm, "flowtracer_kafka_sent_ok_total") == 500


def test_broker_down_at_start_drops_exactly_the_oldest(unique_id: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    port = free_port()
    sm = SelfMetrics()
    sink = KafkaSink(f"127.0.0.1:{port}", client_id=unique_id, max_buffer=50, enable_idempotence=False,
                     metrics=sm.sink_metrics())
    t = time.monotonic()
    for i in range(120):
        sink.send(unique_id, b"k", f"r{i:03d}".encode())
    assert time.monotonic() - t < 0.5  # never blocks while Kafka is away
    assert (sink.buffered, sink.dropped) == (50, 70)
    assert _metric(sm, "flowtracer_kafka_dropped_total{reason=buffer_full}") == 70
    assert _metric(sm, "flowtracer_kafka_buffered") == 50
    with TansuBroker(port=port, log_dir=tmp_path_factory.mktemp("tansu-late")) as broker:
        assert sink.flush(30)
        got = sorted(v.decode() for _, v in consume_all(broker.bootstrap, unique_id, expect=50))
        sink.close()
    assert got == [f"r{i:03d}" for i in range(70, 120)]
    assert sink.accepted == sink.sent_ok + sink.dropped == 120


def test_stopped_broker_backpressure_and_exact_drop_count(own_broker: TansuBroker, unique_id: str) -> None:
    """SIGSTOP the broker for 4 s while sending 50 records/s into a 60-record buffer: nothing
    blocks, the depth shows, and afterwards received + dropped == sent, exactly."""
    own_broker.create_topics({unique_id: 4})
    sm = SelfMetrics()
    sink = KafkaSink(own_broker.bootstrap, client_id=unique_id, max_buffer=60, max_in_flight=40,
                     enable_idempotence=False, request_timeout_s=2.0,
                     metrics=sm.sink_metrics())
    pid = own_broker._proc.pid  # type: ignore[union-attr]  # our own child process
    n, depth_seen = 0, 0.0
    try:
        for phase_s, stopped in ((1.0, False), (4.0, True), (1.0, False)):
            if stopped:
                os.kill(pid, signal.SIGSTOP)
            end = time.monotonic() + phase_s
            # while stopped, go on until the buffer overflowed (a slow loop may need more than 4 s)
            while time.monotonic() < end or (stopped and sink.dropped == 0 and time.monotonic() < end + 20):
                sink.send(unique_id, f"k{n % 8}".encode(), f"{n:06d}".encode())
                n += 1
                depth_seen = max(depth_seen, _metric(sm, "flowtracer_kafka_buffered"))
                time.sleep(0.02)
            if stopped:
                os.kill(pid, signal.SIGCONT)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert sink.flush(30)
    sink.close()
    got = {v for _, v in consume_all(own_broker.bootstrap, unique_id, expect=n)}
    assert got <= {f"{i:06d}".encode() for i in range(n)}
    assert depth_seen >= 60  # the buffer filled while the broker was stopped
    assert sink.dropped > 0
    assert len(got) + sink.dropped == n  # every record is either delivered or counted as dropped
    assert sink.accepted == n and sink.buffered == 0


def test_metrics_endpoint_serves_metrics_and_healthz() -> None:
    import json
    import urllib.error
    import urllib.request

    sm = SelfMetrics()
    sm.sink_metrics().sent_ok.inc(3)
    port = sm.serve(-1, health=lambda: (False, {"why": "test"}))
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert "flowtracer_kafka_sent_ok_total 3.0" in body
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert e.value.code == 503 and json.loads(e.value.read()) == {"ok": False, "why": "test"}
    finally:
        sm.stop()
    assert sm.serve(0) == 0  # 0 = off
    assert generate_latest(sm.registry)


def test_broker_killed_and_restarted_resumes(unique_id: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Kafka really goes away (process ended) and comes back empty on the same port: what was sent
    meanwhile is delivered to the new broker; nothing blocks or raises."""
    port = free_port()
    log_dir = tmp_path_factory.mktemp("tansu-restart")
    sink = KafkaSink(f"127.0.0.1:{port}", client_id=unique_id, max_buffer=1000, enable_idempotence=False,
                     request_timeout_s=2.0)
    with TansuBroker(port=port, log_dir=log_dir) as first:
        first.create_topics({unique_id: 4})
        for i in range(20):
            sink.send(unique_id, b"k", f"before{i}".encode())
        assert sink.flush(20)
    t = time.monotonic()
    for i in range(50):
        sink.send(unique_id, f"k{i % 4}".encode(), f"during{i}".encode())
    assert time.monotonic() - t < 0.5 and sink.buffered == 50
    time.sleep(2.0)
    with TansuBroker(port=port, log_dir=log_dir) as second:
        with contextlib.suppress(KafkaError):  # the producer may have auto-created it already
            second.create_topics({unique_id: 4})
        assert sink.flush(60)
        got = {v.decode() for _, v in consume_all(second.bootstrap, unique_id, expect=50)}
        sink.close()
    assert {f"during{i}" for i in range(50)} <= got
    assert sink.dropped == 0
