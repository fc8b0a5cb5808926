"""Real dumps replayed as a switch's stream by a real gRPC server, through the collector's session: SONiC's
target-addressed COUNTERS_DB notifications become CounterBatches, and a kind of data no profile maps (Nokia SR OS
native paths) is counted per shape in ``flowtracer_gnmi_ignored_updates_total`` and logged once per shape."""

from __future__ import annotations

import logging

import pytest
from gnmi_replay import ReplayServer
from gnmi_session_util import LoopThread, fast_gnmi, run_session, stop_session
from pygnmi.spec.v080.gnmi_pb2 import Notification, SubscribeResponse
from real_dumps import REAL, notifications
from test_gnmi_malformed_message import ListSink
from waiting import wait_for

from flowtracer.collectors.gnmi.config import CollectorConfig, Kafka, Target
from flowtracer.collectors.gnmi.service import CollectorService

S = 1_000_000_000


def step(n: Notification) -> dict[str, bytes]:
    return {"raw": SubscribeResponse(update=n).SerializeToString()}


def test_sonic_target_addressed_stream_and_unmapped_shapes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="flowtracer")
    (eth9,) = notifications(REAL / "sonic_counters_ethernet9.get.textproto")
    later = Notification()
    later.CopyFrom(eth9)
    later.timestamp += S
    sros = notifications(REAL / "nokia_sros_port_stats.gnmic-sub.json")
    steps = [step(eth9), {"syncResponse": True}, *[step(n) for n in sros], step(later), *[step(n) for n in sros],
             {"hold": True}]
    lt = LoopThread()
    with ReplayServer([steps]) as srv:
        sink = ListSink()
        cfg = CollectorConfig(collector_id="t", gnmi=fast_gnmi(1.0, liveness_timeout=0.0),
                              kafka=Kafka(bootstrap="127.0.0.1:9", topic="unused"))
        svc = CollectorService(cfg, [Target(name="sonic1", address="127.0.0.1", port=srv.port, platform="sonic")],
                               sink=sink)  # type: ignore[arg-type]
        s, batches = svc.sessions[0], sink.batches
        fut = run_session(s, lt)
        try:
            wait_for(lambda: any(b.timestamp_ns == eth9.timestamp + S for b in batches), 10,
                     "the second Ethernet9 sample as a CounterBatch")
            wait_for(lambda: s.stats.ignored.get("/state/port[port-id=*]/statistics/out-octets") == 2, 10,
                     "the second round of SR OS updates counted")
        finally:
            stop_session(s, fut, lt)
            lt.close()
    (b,) = [b for b in batches if b.timestamp_ns == eth9.timestamp + S]
    (port,) = b.interfaces
    assert port.name == "Ethernet9" and port.in_octets.value == 0 and port.in_octets.delta == 0
    assert s.stats.decode_errors == 0
    st = s.stats.ignored
    assert st["/state/service/vpls[service-name=*]/oper-state"] == 4
    assert st["/state/port[port-id=*]/statistics/in-octets"] == 2
    assert st["sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_*_RX_PKTS"] == 2 * 8
    logged = [r.getMessage() for r in caplog.records if "not read by the sonic profile" in r.getMessage()]
    assert sum("/state/port[port-id=*]/statistics/in-octets" in m for m in logged) == 1, "once per shape"
    assert len(logged) == 4, "one line per message bringing new shapes: Ethernet9's blob, then 3 SR OS ones"
    assert svc.metrics.registry.get_sample_value(
        "flowtracer_gnmi_ignored_updates_total",
        {"target": "sonic1", "shape": "/state/port[port-id=*]/statistics/in-octets"}) == 2
