"""Sessions against real gNMI servers misbehaving: a silent (stalled) stream, stop, a TLS target
with the wrong CA, bad credentials; and two shards sharing the targets."""

from __future__ import annotations

import logging
import math
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from gnmi_replay import ReplayServer
from gnmi_session_util import LoopThread, collect, fast_gnmi, run_session, stop_session
from gnmi_switches import Ticker, make_ca, make_server_cert, make_switch
from kafka_records import consume_all
from waiting import wait_for

from flowtracer.collectors.gnmi.config import CollectorConfig, Credentials, Kafka, Target, Tls
from flowtracer.collectors.gnmi.service import CollectorService
from flowtracer.collectors.gnmi.session import State, TargetSession
from flowtracer.collectors.gnmi.sharding import select
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.schemas.v1.counters_pb2 import CounterBatch
from flowtracer.sim.switches.schema import Tick
from flowtracer.sim.switches.server import GnmiServer, TlsFiles
from flowtracer.sim.switches.subscription import Subscription

T0 = 1_767_225_600_000_000_000
SAMPLE = {"update": {"timestamp": str(T0), "update": [{
    "path": {"elem": [{"name": "interfaces"}, {"name": "interface", "key": {"name": "E1"}}, {"name": "state"},
                      {"name": "counters"}, {"name": "in-octets"}]}, "val": {"uintVal": "5"}}]}}


def test_stalled_stream_is_cancelled_and_reconnected(caplog: pytest.LogCaptureFixture) -> None:
    """Connection 0 never sends anything (pygnmi's first next() would block forever), connection 1
    syncs and then goes silent: both are detected by the liveness timeout and cancelled."""
    batches: list[CounterBatch] = []
    caplog.set_level(logging.WARNING, logger="flowtracer")
    lt = LoopThread()
    with ReplayServer([[{"hold": True}], [SAMPLE, {"syncResponse": True}], [SAMPLE, {"syncResponse": True}]]) as srv:
        s = TargetSession(Target(name="sw", address="127.0.0.1", port=srv.port),
                          fast_gnmi(0.2, liveness_timeout=0.5), collector_id="t", emit=collect(batches))
        fut = run_session(s, lt)
        try:
            # Wait for connection 2's baseline, not just its accept: the server counts a connection
            # before the collector has read (and emitted) anything from it.
            wait_for(lambda: srv.connections >= 3 and len(batches) >= 2, 10, "two reconnects and two baselines")
        finally:
            stop_session(s, fut, lt)
            lt.close()
        # >= 3: on a slow machine connection 2 may itself stall before the stop, and a 4th be refused
        wait_for(lambda: len(srv.ended) >= 3, 5, "the server to see every call end")
    assert srv.ended[:2] == [(0, "cancelled"), (1, "cancelled")]
    assert s.stats.reconnects >= 2 and caplog.text.count("stalled: no message for 0.5 s (liveness timeout)") >= 2
    assert [b.session for b in batches] == [2, 3]


def test_stop_really_cancels_the_call() -> None:
    """pygnmi's close() only half-closes; a switch that ignores half-close keeps streaming. We cancel."""
    lt = LoopThread()
    with ReplayServer([[SAMPLE, {"syncResponse": True}]]) as srv:
        s = TargetSession(Target(name="sw", address="127.0.0.1", port=srv.port), fast_gnmi(liveness_timeout=0.0),
                          collector_id="t", emit=lambda b: None)
        fut = run_session(s, lt)
        wait_for(lambda: s.stats.state is State.UP, 5, "sync")
        stop_session(s, fut, lt)
        lt.close()
        wait_for(lambda: bool(srv.ended), 5, "the call to end on the server")
    assert srv.ended == [(0, "cancelled")]
    assert s.stats.state is State.STOPPED


def _run_service(svc: CollectorService, until: object, timeout: float, what: str) -> float:
    """Run ``svc`` until ``until()`` holds; the seconds it ran."""
    lt = LoopThread()
    started = time.monotonic()
    fut = lt.submit(svc.run())
    try:
        wait_for(until, timeout, what)  # type: ignore[arg-type]
    finally:
        svc.stop()
        fut.result(20)
        lt.close()
    return time.monotonic() - started


def test_wrong_ca_and_bad_credentials_fail_clearly_and_slowly_others_unaffected(
        kafka: TansuBroker, unique_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    kafka.create_topics({unique_id: 4})
    ca_a, ca_a_key, ca_a_cert = make_ca(tmp_path, "ca-a")
    ca_b, _, _ = make_ca(tmp_path, "ca-b")
    cert, key = make_server_cert(tmp_path, ca_a_key, ca_a_cert)
    monkeypatch.setenv("T_GNMI_PASSWORD", "wrong-pass-123")
    names = ("good", "tls-wrong-ca", "tls-ok", "bad-creds")
    states = {n: make_switch(n) for n in names}
    servers = {
        "good": GnmiServer({"good": states["good"]}),
        "tls-wrong-ca": GnmiServer({"tls-wrong-ca": states["tls-wrong-ca"]}, tls=TlsFiles(cert, key)),
        "tls-ok": GnmiServer({"tls-ok": states["tls-ok"]}, tls=TlsFiles(cert, key)),
        "bad-creds": GnmiServer({"bad-creds": states["bad-creds"]}, credentials=("admin", "right-pass")),
    }
    ports = {n: s.start() for n, s in servers.items()}
    try:
        targets = [
            Target(name="good", address="127.0.0.1", port=ports["good"]),
            Target(name="tls-wrong-ca", address="127.0.0.1", port=ports["tls-wrong-ca"],
                   tls=Tls(enabled=True, ca_file=ca_b, server_name="switch.test")),
            Target(name="tls-ok", address="127.0.0.1", port=ports["tls-ok"],
                   tls=Tls(enabled=True, ca_file=ca_a, server_name="switch.test")),
            Target(name="bad-creds", address="127.0.0.1", port=ports["bad-creds"],
                   credentials=Credentials(username="admin", password_env="T_GNMI_PASSWORD")),
        ]
        cfg = CollectorConfig(collector_id="c1", gnmi=fast_gnmi(0.2),
                              kafka=Kafka(bootstrap=kafka.bootstrap, topic=unique_id, idempotence=False))
        svc = CollectorService(cfg, targets)
        by = {s.name: s for s in svc.sessions}
        caplog.set_level(logging.INFO, logger="flowtracer")
        with Ticker(list(states.values()), 0.1):
            ran_s = _run_service(svc, lambda: by["good"].stats.batches >= 5 and by["tls-ok"].stats.batches >= 5
                         and by["bad-creds"].stats.reconnects >= 1 and by["tls-wrong-ca"].stats.reconnects >= 1,
                         15, "good targets streaming, bad ones failed")
    finally:
        for s in servers.values():
            s.stop()
    wrong, creds = by["tls-wrong-ca"].stats, by["bad-creds"].stats
    assert wrong.last_error_class == "config" and "TLS handshake failed" in wrong.last_error
    assert creds.last_error_class == "config" and "UNAUTHENTICATED" in creds.last_error
    assert "credentials" in creds.last_error
    # slow retries (3 s in this config, where the fast backoff is 0.2-1 s) while the good targets kept streaming
    slow_bound = 1 + math.ceil(ran_s / 3.0)
    assert wrong.reconnects <= slow_bound and creds.reconnects <= slow_bound, (ran_s, wrong.reconnects, creds.reconnects)
    assert wrong.batches == creds.batches == 0
    log_text = caplog.text
    assert "gNMI tls-wrong-ca (127.0.0.1:" in log_text and "retrying in 3.0 s" in log_text
    assert "wrong-pass-123" not in log_text
    got = {CounterBatch.FromString(v).switch for _, v in consume_all(kafka.bootstrap, unique_id, idle_s=1.0)}
    assert got == {"good", "tls-ok"}


def test_two_shards_cover_every_target_once(kafka: TansuBroker, unique_id: str) -> None:
    kafka.create_topics({unique_id: 4})
    names = [f"leaf{i:02d}" for i in range(6)]
    states = {n: make_switch(n, ifaces=2) for n in names}
    servers = {n: GnmiServer({n: st}) for n, st in states.items()}
    ports = {n: s.start() for n, s in servers.items()}
    targets = [Target(name=n, address="127.0.0.1", port=ports[n]) for n in names]
    svcs = []
    lts = []
    try:
        for i in range(2):
            cfg = CollectorConfig(collector_id=f"shard{i}", gnmi=fast_gnmi(0.2), shard={"index": i, "count": 2},
                                  kafka=Kafka(bootstrap=kafka.bootstrap, topic=unique_id, idempotence=False))
            svcs.append(CollectorService(cfg, targets))
        with Ticker(list(states.values()), 0.1):
            futs = []
            for svc in svcs:
                lt = LoopThread()
                lts.append(lt)
                futs.append(lt.submit(svc.run()))
            wait_for(lambda: all(s.stats.batches >= 3 for svc in svcs for s in svc.sessions), 15, "batches")
            for svc, fut in zip(svcs, futs, strict=True):
                svc.stop()
                fut.result(20)
    finally:
        for lt in lts:
            lt.close()
        for s in servers.values():
            s.stop()
    seen: dict[str, set[str]] = {"shard0": set(), "shard1": set()}
    for _, v in consume_all(kafka.bootstrap, unique_id, idle_s=1.0):
        b = CounterBatch.FromString(v)
        seen[b.collector_id].add(b.switch)
    assert seen["shard0"].isdisjoint(seen["shard1"])
    assert seen["shard0"] | seen["shard1"] == set(names)
    assert seen["shard0"] == {t.name for t in select(targets, 0, 2)} and seen["shard0"]


# One session in a process of its own, printing each batch's session and stamp: a process can be starved (stopped).
_SESSION_CHILD = """
import asyncio, sys
from flowtracer.collectors.gnmi.config import Backoff, Gnmi, Subscription, Target
from flowtracer.collectors.gnmi.session import TargetSession
subs = [Subscription(**{**s.model_dump(), "sample_interval": 0.2}) for s in Gnmi().subscriptions]
gnmi = Gnmi(subscriptions=subs, start_spread=0.0, batch_grace=0.05, liveness_timeout=0.6,
            backoff=Backoff(base=0.2, cap=1.0, reset_after=5.0, slow_retry=3.0))
from flowtracer.collectors.gnmi.counters.columns import EncodedBatch
def emit(b):
    m = b.message() if isinstance(b, EncodedBatch) else b
    print(m.session, m.timestamp_ns, flush=True)
s = TargetSession(Target(name="leaf1", address="127.0.0.1", port=int(sys.argv[1])), gnmi, collector_id="t", emit=emit)
asyncio.run(s.run())
"""


def test_a_collector_starved_of_cpu_reads_what_waited_instead_of_reconnecting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector's process gets no CPU for 2.5 liveness timeouts (stopped, as a loaded machine can leave it)
    while the switch keeps streaming: the samples wait in the socket. The session reads them on the same stream:
    no reconnect, so no sample lost and no new baseline (its watchdog must not wake first and cancel the call)."""
    sent: list[int] = []  # the stamp of every sample the switch sent after its initial sync, as the switch counts them
    on_tick = Subscription.on_tick

    def counted(sub: Subscription, tick: Tick, tolerance_ns: int) -> list[bytes]:
        out = on_tick(sub, tick, tolerance_ns)
        if out:
            sent.append(tick.timestamp_ns)
        return out

    monkeypatch.setattr(Subscription, "on_tick", counted)
    st = make_switch("leaf1")
    lines: list[str] = []
    with GnmiServer({"leaf1": st}) as srv, Ticker([st], 0.1):
        child = subprocess.Popen([sys.executable, "-c", _SESSION_CHILD, str(srv.port)], stdout=subprocess.PIPE,
                                 text=True)
        reader = threading.Thread(target=lambda: lines.extend(child.stdout or ()), daemon=True)
        reader.start()
        try:
            wait_for(lambda: len(lines) >= 3, 20, "the session streaming")
            before = len(lines)
            child.send_signal(signal.SIGSTOP)
            time.sleep(1.5)  # the starvation itself: the switch goes on sampling meanwhile
            child.send_signal(signal.SIGCONT)
            wait_for(lambda: len(lines) >= before + 10, 10, "ten samples after the starvation")
        finally:
            child.send_signal(signal.SIGCONT)
            child.terminate()
            child.wait(10)
            reader.join(5)
    got = [tuple(int(x) for x in line.split()) for line in lines]
    assert {session for session, _ in got} == {1}, "the session reconnected"
    # Every sample the switch sent between the first and the last batch, by the switch's own count: how far apart
    # they are is the simulator's tick timing, not the collector's doing. One instant may come as two batches (its
    # notifications arrived further apart than batch_grace: the rest goes out late, nothing lost).
    stamps = sorted({ts for _, ts in got})
    assert [ts for ts in sent if stamps[0] < ts <= stamps[-1]] == stamps[1:], "a sample missing"
