"""``addressing: target``: a SONiC target whose gNMI server only knows the older target-addressed form (prefix
target = the DB, no sonic-db origin) is subscribed that way, and its real answers become CounterBatches."""

from __future__ import annotations

import logging

import pytest
from gnmi_replay import ReplayServer
from gnmi_session_util import LoopThread, fast_gnmi, run_session, stop_session
from pygnmi.spec.v080.gnmi_pb2 import SubscribeResponse
from real_dumps import REAL, notifications
from test_gnmi_malformed_message import ListSink
from waiting import wait_for

from flowtracer.collectors.gnmi.channel import subscriptions_for, target_addressed
from flowtracer.collectors.gnmi.config import CollectorConfig, Gnmi, Kafka, Target
from flowtracer.collectors.gnmi.counters.paths import format_path
from flowtracer.collectors.gnmi.service import CollectorService

S = 1_000_000_000


def test_db_paths_are_readdressed_one_db_per_subscribe() -> None:
    t = Target(name="s", address="192.0.2.1", platform="sonic", addressing="target")
    prefix, subs, dropped = target_addressed(subscriptions_for(t, Gnmi()), t)
    assert prefix is not None and prefix.target == "COUNTERS_DB"
    assert [s.path for s in subs] == ["/COUNTERS/Ethernet*"]
    assert sorted(s.path for s in dropped) == ["sonic-db:/APPL_DB/localhost/PORT_TABLE/Ethernet*/oper_status",
                                               "sonic-db:/APPL_DB/localhost/PORT_TABLE/Ethernet*/speed"]
    o = Target(name="o", address="192.0.2.1", platform="sonic")
    assert target_addressed(subscriptions_for(o, Gnmi()), o)[0] is None


def test_target_addressing_is_only_for_db_paths() -> None:
    with pytest.raises(ValueError, match="target addressing is for DB paths"):
        Target(name="x", address="192.0.2.1", addressing="target")


def test_a_target_addressed_session_reads_real_sonic_answers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="flowtracer")
    (eth9,) = notifications(REAL / "sonic_counters_ethernet9.get.textproto")
    steps = [{"raw": SubscribeResponse(update=eth9).SerializeToString()}, {"syncResponse": True}]
    eth9.timestamp += S
    steps += [{"raw": SubscribeResponse(update=eth9).SerializeToString()}, {"hold": True}]
    lt = LoopThread()
    with ReplayServer([steps]) as srv:
        sink = ListSink()
        cfg = CollectorConfig(collector_id="t", gnmi=fast_gnmi(1.0, liveness_timeout=0.0),
                              kafka=Kafka(bootstrap="127.0.0.1:9", topic="unused"))
        target = Target(name="old-sonic", address="127.0.0.1", port=srv.port, platform="sonic", addressing="target")
        svc = CollectorService(cfg, [target], sink=sink)  # type: ignore[arg-type]
        s, batches = svc.sessions[0], sink.batches
        fut = run_session(s, lt)
        try:
            wait_for(lambda: any(b.timestamp_ns == eth9.timestamp for b in batches), 10, "the second sample's batch")
        finally:
            stop_session(s, fut, lt)
            lt.close()
    (req,) = srv.requests
    sl = req.subscribe
    assert sl.prefix.target == "COUNTERS_DB" and not sl.prefix.origin
    assert [format_path(x.path) for x in sl.subscription] == ["/COUNTERS/Ethernet*"]
    (b,) = [b for b in batches if b.timestamp_ns == eth9.timestamp]
    assert [p.name for p in b.interfaces] == ["Ethernet9"] and b.interfaces[0].out_octets.value == 0
    assert "not subscribed: sonic-db:/APPL_DB/localhost/PORT_TABLE/Ethernet*/oper_status" in caplog.text
