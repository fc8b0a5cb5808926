"""Mutual TLS and passwords towards switches: real gNMI servers that require a client certificate signed
by their CA and check username/password, one real collector with a target per case. The good target
streams; each bad one fails with one error line naming the target and the cause, is counted by reason,
and is retried slowly (no crash loop) while the others go on."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import pytest
from gnmi_session_util import LoopThread, fast_gnmi
from gnmi_switches import Ticker, make_switch
from kafka_records import consume_all
from prometheus_client import generate_latest
from tls_certs import make_ca, make_client_cert, make_server_cert
from waiting import wait_for

from flowtracer.collectors.gnmi.config import Backoff, CollectorConfig, Credentials, Kafka, Target, Tls
from flowtracer.collectors.gnmi.service import CollectorService
from flowtracer.collectors.gnmi.session import State
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.schemas.v1.counters_pb2 import CounterBatch
from flowtracer.sim.switches.server import GnmiServer, TlsFiles

SLOW_RETRY_S = 1.0
#: target -> (reason label, words its error line must contain)
EXPECTED = {
    "wrong-ca": ("server_cert_untrusted", "the switch's certificate is not trusted"),
    "expired-cert": ("client_cert_expired", "expired-client.pem expired at"),
    "other-ca-cert": ("client_cert_rejected", "not signed by a CA the switch trusts"),
    "no-cert": ("client_cert_missing", "requires a client certificate and none is configured"),
    "wrong-password": ("credentials", "the switch rejected the credentials"),
}


def test_mtls_and_passwords_good_streams_bad_fail_clearly_and_retry_slowly(
        kafka: TansuBroker, unique_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    kafka.create_topics({unique_id: 1})
    ca_a, ca_a_key, ca_a_cert = make_ca(tmp_path, "ca-a")
    ca_b, ca_b_key, ca_b_cert = make_ca(tmp_path, "ca-b")
    server_cert, server_key = make_server_cert(tmp_path, ca_a_key, ca_a_cert)
    good = make_client_cert(tmp_path, ca_a_key, ca_a_cert, "good-client")
    expired = make_client_cert(tmp_path, ca_a_key, ca_a_cert, "expired-client", expired=True)
    foreign = make_client_cert(tmp_path, ca_b_key, ca_b_cert, "foreign-client")
    # The switches' password from a file, the collector's from the environment: never argv.
    (tmp_path / "switch-password").write_text("right-pass-456\n")
    switch_creds = Credentials(username="admin", password_file=tmp_path / "switch-password").resolve()
    assert switch_creds is not None
    monkeypatch.setenv("T_MTLS_GOOD_PW", "right-pass-456")
    monkeypatch.setenv("T_MTLS_BAD_PW", "wrong-pass-789")

    names = ("mtls-ok", *EXPECTED)
    states = {n: make_switch(n, ifaces=2) for n in names}
    servers = {n: GnmiServer({n: st}, tls=TlsFiles(server_cert, server_key, ca_file=ca_a),
                             credentials=(switch_creds[0], switch_creds[1].get_secret_value()))
               for n, st in states.items()}
    ports = {n: s.start() for n, s in servers.items()}

    def target(name: str, ca: Path = ca_a, client: tuple[Path, Path] | None = good,
               password_env: str = "T_MTLS_GOOD_PW") -> Target:
        tls = Tls(enabled=True, ca_file=ca, server_name="switch.test", cert_file=client[0] if client else None,
                  key_file=client[1] if client else None)
        return Target(name=name, address="127.0.0.1", port=ports[name], tls=tls,
                      credentials=Credentials(username="admin", password_env=password_env))

    targets = [target("mtls-ok"), target("wrong-ca", ca=ca_b), target("expired-cert", client=expired),
               target("other-ca-cert", client=foreign), target("no-cert", client=None),
               target("wrong-password", password_env="T_MTLS_BAD_PW")]
    gnmi = fast_gnmi(0.2, backoff=Backoff(base=0.2, cap=1.0, reset_after=5.0, slow_retry=SLOW_RETRY_S))
    cfg = CollectorConfig(collector_id="c1", gnmi=gnmi,
                          kafka=Kafka(bootstrap=kafka.bootstrap, topic=unique_id, idempotence=False))
    svc = CollectorService(cfg, targets)
    by = {s.name: s for s in svc.sessions}
    caplog.set_level(logging.INFO, logger="flowtracer")
    lt = LoopThread()
    try:
        with Ticker(list(states.values()), 0.1):
            started = time.monotonic()
            fut = lt.submit(svc.run())
            try:
                # Three failures each: the collector kept running and retried twice.
                wait_for(lambda: by["mtls-ok"].stats.batches >= 5
                         and all(sum(by[n].stats.failures.values()) >= 3 for n in EXPECTED),
                         20, "the good target streaming, every bad one failing three times")
                running = {n: by[n].stats.state for n in EXPECTED}
                metrics = generate_latest(svc.metrics.registry).decode()
            finally:
                svc.stop()
                fut.result(20)
            ran_s = time.monotonic() - started
    finally:
        lt.close()
        for s in servers.values():
            s.stop()

    ok = by["mtls-ok"].stats
    assert ok.counter_updates > 0 and ok.failures == {}, "good certificates and password: counters flow"
    got = {CounterBatch.FromString(v).switch for _, v in consume_all(kafka.bootstrap, unique_id, idle_s=1.0)}
    assert got == {"mtls-ok"}
    log_text = caplog.text
    assert "right-pass-456" not in log_text and "wrong-pass-789" not in log_text
    # a hot loop would make hundreds of attempts; slow retries make at most one per SLOW_RETRY_S
    bound = 1 + math.ceil(ran_s / SLOW_RETRY_S)
    for name, (reason, words) in EXPECTED.items():
        st = by[name].stats
        assert running[name] in (State.BACKOFF, State.CONNECTING), (name, running[name])
        assert set(st.failures) == {reason} and 3 <= st.failures[reason] <= bound, (name, st.failures, ran_s)
        assert st.last_error_class == "config" and words in st.last_error, (name, st.last_error)
        lines = [ln for ln in log_text.splitlines() if f"gNMI {name} (127.0.0.1:{ports[name]}): " in ln]
        assert lines and all(f"[{reason}]; retrying in {SLOW_RETRY_S:.1f} s" in ln for ln in lines), (name, lines)
        assert words in lines[0], (name, lines[0])
        assert st.batches == 0
        assert (f'flowtracer_gnmi_connection_failures_total{{reason="{reason}",target="{name}"}}'
                in metrics), name
    assert "Traceback" not in log_text

