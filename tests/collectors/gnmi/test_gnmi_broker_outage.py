"""The broker stopped for 10 s under a running collector: no crash, the buffer depth shows on
/metrics, data resumes afterwards, and the drop counter says exactly which batches were lost."""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request
from collections.abc import Iterator

import pytest
from gnmi_session_util import LoopThread, fast_gnmi
from gnmi_switches import Ticker, make_switch
from kafka_records import consume_all
from waiting import wait_for

from flowtracer.collectors.gnmi.config import CollectorConfig, Kafka, Metrics, Target
from flowtracer.collectors.gnmi.service import CollectorService
from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.schemas.v1.counters_pb2 import CounterBatch
from flowtracer.sim.switches.server import GnmiServer

OUTAGE_S = 10.0


@pytest.fixture
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    with TansuBroker(log_dir=tmp_path_factory.mktemp("tansu-outage")) as b:
        yield b


def _scrape(port: int, name: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    m = re.search(rf"^{name} (\S+)$", body, re.M)
    return float(m.group(1)) if m else float("nan")


def test_broker_stopped_for_10s(own_broker: TansuBroker, unique_id: str) -> None:
    own_broker.create_topics({unique_id: 4})
    names = ["leaf01", "leaf02", "spine01"]
    states = {n: make_switch(n) for n in names}
    servers = {n: GnmiServer({n: st}) for n, st in states.items()}
    ports = {n: s.start() for n, s in servers.items()}
    mport = free_port()
    cfg = CollectorConfig(
        collector_id="outage", gnmi=fast_gnmi(0.1), metrics=Metrics(port=mport),
        kafka=Kafka(bootstrap=own_broker.bootstrap, topic=unique_id, idempotence=False, max_buffer=100))
    svc = CollectorService(cfg, [Target(name=n, address="127.0.0.1", port=ports[n]) for n in names])
    pid = own_broker._proc.pid  # type: ignore[union-attr]  # our own child process
    lt = LoopThread()
    depth = []
    try:
        with Ticker(list(states.values()), 0.1):
            fut = lt.submit(svc.run())
            wait_for(lambda: svc.sink.sent_ok >= 20, 10, "batches flowing")
            os.kill(pid, signal.SIGSTOP)
            try:
                end = time.monotonic() + OUTAGE_S
                while time.monotonic() < end:
                    time.sleep(1.0)
                    depth.append(_scrape(mport, "flowtracer_kafka_buffered"))
                    assert _scrape(mport, "flowtracer_gnmi_updates_per_second") > 0  # switches still read
            finally:
                os.kill(pid, signal.SIGCONT)
            resumed_ns = time.time_ns()
            backlog = svc.sink.sent_ok + svc.sink.buffered
            wait_for(lambda: svc.sink.sent_ok > backlog + 30, 30, "the backlog and then new data to arrive")
            dropped_metric = _scrape(mport, 'flowtracer_kafka_dropped_total{reason="buffer_full"}')
            svc.stop()
            fut.result(30)
    finally:
        lt.close()
        for s in servers.values():
            s.stop()
    assert max(depth) >= 100, depth  # the buffer filled up and it showed
    batches = [CounterBatch.FromString(v) for _, v in consume_all(own_broker.bootstrap, unique_id, idle_s=2.0)]
    seqs: dict[str, set[int]] = {n: set() for n in names}
    for b in batches:
        seqs[b.switch].add(b.sequence)
    emitted = {s.name: s.assembler.sequence for s in svc.sessions}
    missing = sum(emitted[n] - len(seqs[n]) for n in names)
    assert all(max(seqs[n]) == emitted[n] for n in names), "the newest batches made it"
    assert svc.sink.dropped > 0
    assert missing == svc.sink.dropped == dropped_metric, "the drop counter says exactly what was lost"
    assert any(b.timestamp_ns > resumed_ns for b in batches), "data resumed after the outage"
