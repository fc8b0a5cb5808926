"""The same switch over PROTO, JSON_IETF and JSON, and over TLS with skip_verify: values and deltas
equal the switch state at every sample instant."""

from __future__ import annotations

from pathlib import Path

import pytest
from gnmi_session_util import IF_FIELDS, LoopThread, fast_gnmi, run_session, stop_session
from gnmi_switches import Ticker, make_ca, make_server_cert, make_switch
from waiting import wait_for

from flowtracer.collectors.gnmi.config import Encoding, Target, Tls
from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE, GAP, OK
from flowtracer.collectors.gnmi.session import TargetSession
from flowtracer.schemas.v1.counters_pb2 import CounterBatch
from flowtracer.sim.switches.server import GnmiServer, TlsFiles
from flowtracer.sim.switches.state import INTERFACE_COUNTERS


def _collect(target: Target, encoding: Encoding, ticker: Ticker, n: int = 6) -> list[CounterBatch]:
    batches: list[CounterBatch] = []
    lt = LoopThread()
    s = TargetSession(target, fast_gnmi(0.1, encoding=encoding, batch_grace=0.3), collector_id="t", emit=batches.append)
    fut = run_session(s, lt)
    try:
        wait_for(lambda: len(batches) >= n, 10, f"{n} batches")
    finally:
        stop_session(s, fut, lt)
        lt.close()
    assert s.stats.decode_errors == 0
    return batches


def _check(batches: list[CounterBatch], ticker: Ticker) -> int:
    checked = 0
    for b in batches:
        ifs, nhs = ticker.truth[b.timestamp_ns][b.switch]
        for i in b.interfaces:
            for f, name in zip(IF_FIELDS, INTERFACE_COUNTERS, strict=True):
                c = getattr(i, f)
                assert c.value == ifs[i.name][name]
                if c.status in (OK, GAP):
                    prev = ticker.truth[b.timestamp_ns - i.interval_ns][b.switch][0]
                    assert c.delta == ifs[i.name][name] - prev[i.name][name]
                    checked += 1
                else:
                    assert c.status == BASELINE
        for n in b.next_hops:
            assert (n.octets_forwarded.value, n.packets_forwarded.value) == nhs[n.index]
            if n.octets_forwarded.status == OK:
                prev_nh = ticker.truth[b.timestamp_ns - n.interval_ns][b.switch][1]
                assert n.octets_forwarded.delta == nhs[n.index][0] - prev_nh[n.index][0]
                checked += 1
        assert {n.egress_interface for n in b.next_hops} == {"Ethernet3", "Ethernet4"}
    return checked


@pytest.mark.parametrize("encoding", list(Encoding))
def test_encodings_give_exact_deltas(encoding: Encoding) -> None:
    st = make_switch("leaf1")
    with GnmiServer({"leaf1": st}) as srv, Ticker([st], 0.1) as ticker:
        batches = _collect(Target(name="leaf1", address="127.0.0.1", port=srv.port), encoding, ticker)
    assert _check(batches, ticker) >= 40


def test_tls_skip_verify_trusts_what_the_switch_presents(tmp_path: Path) -> None:
    _, ca_key, ca_cert = make_ca(tmp_path, "ca")
    cert, key = make_server_cert(tmp_path, ca_key, ca_cert)
    st = make_switch("leaf1")
    with GnmiServer({"leaf1": st}, tls=TlsFiles(cert, key)) as srv, Ticker([st], 0.1) as ticker:
        target = Target(name="leaf1", address="127.0.0.1", port=srv.port, tls=Tls(enabled=True, skip_verify=True))
        batches = _collect(target, Encoding.PROTO, ticker, n=3)
    assert _check(batches, ticker) >= 10
