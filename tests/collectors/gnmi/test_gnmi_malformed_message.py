"""A malformed SubscribeResponse (bytes that do not parse as protobuf) is skipped and counted; the
switch stream goes on: no reconnect, and the next good counters arrive in the same session."""

from __future__ import annotations

import logging

import pytest
from gnmi_replay import ReplayServer
from gnmi_session_util import LoopThread, fast_gnmi, run_session, stop_session
from waiting import wait_for

from flowtracer.collectors.gnmi.config import CollectorConfig, Kafka, Target
from flowtracer.collectors.gnmi.service import CollectorService
from flowtracer.schemas.v1.counters_pb2 import CounterBatch

T0 = 1_767_225_600_000_000_000
S = 1_000_000_000


def sample(ts: int, octets: int) -> dict:
    return {"update": {"timestamp": str(ts), "update": [{
        "path": {"elem": [{"name": "interfaces"}, {"name": "interface", "key": {"name": "E1"}},
                          {"name": "state"}, {"name": "counters"}, {"name": "in-octets"}]},
        "val": {"uintVal": str(octets)}}]}}


class ListSink:
    """Stands in for the Kafka sink: the batches as the service serialized them."""

    def __init__(self) -> None:
        self.batches: list[CounterBatch] = []

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.batches.append(CounterBatch.FromString(value))


GARBAGE = b"\xff\xff\xff\xff\x0f"  # field 0 / a varint that never ends: not a SubscribeResponse
TRUNCATED = b"\x0a\x7f\x12"  # "update" of 127 bytes, 1 present


def test_a_malformed_message_is_skipped_counted_logged_once_and_the_stream_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="flowtracer")
    steps = [sample(T0, 100), {"syncResponse": True}, sample(T0 + S, 200),
             {"raw": GARBAGE}, sample(T0 + 2 * S, 300),
             {"raw": TRUNCATED}, {"raw": GARBAGE}, sample(T0 + 3 * S, 400)]
    lt = LoopThread()
    with ReplayServer([steps]) as srv:
        sink = ListSink()
        cfg = CollectorConfig(collector_id="t", gnmi=fast_gnmi(1.0, liveness_timeout=0.0),
                              kafka=Kafka(bootstrap="127.0.0.1:9", topic="unused"))
        svc = CollectorService(cfg, [Target(name="sw", address="127.0.0.1", port=srv.port)],
                               sink=sink)  # type: ignore[arg-type]
        s, batches = svc.sessions[0], sink.batches
        fut = run_session(s, lt)
        try:
            wait_for(lambda: any(b.timestamp_ns == T0 + 3 * S for b in batches), 10,
                     "the counters sent after the malformed messages")
        finally:
            stop_session(s, fut, lt)
            lt.close()
    assert srv.connections == 1 and s.stats.reconnects == 0, "the stream was torn down"
    assert {b.session for b in batches} == {1}
    got = {b.timestamp_ns - T0: b.interfaces[0].in_octets for b in batches if b.interfaces}
    assert {t: (c.value, c.delta) for t, c in got.items()} == {
        0: (100, 0), S: (200, 100), 2 * S: (300, 100), 3 * S: (400, 100)}
    assert s.stats.malformed == {"unparseable": 3}
    assert s.stats.messages == 8
    skipped = [r for r in caplog.records if "malformed message" in r.getMessage()]
    assert len(skipped) == 1, "logged once per cause, not once per message"
    assert "sw" in skipped[0].getMessage() and "unparseable" in skipped[0].getMessage()
    assert "unexpected error" not in caplog.text

    # the count is exported per target, by reason
    assert svc.metrics.registry.get_sample_value(
        "flowtracer_gnmi_malformed_messages_total", {"target": "sw", "reason": "unparseable"}) == 3
    assert svc.metrics.registry.get_sample_value("flowtracer_gnmi_reconnects_total", {"target": "sw"}) == 0
