"""The same switch over PROTO, JSON_IETF and JSON, and over TLS with skip_verify: values and deltas
equal the switch state at every sample instant."""

from __future__ import annotations

from pathlib import Path

import pytest
from gnmi_session_util import check_against_truth, collect_batches, fast_gnmi
from gnmi_switches import Ticker, make_ca, make_server_cert, make_switch

from flowtracer.collectors.gnmi.config import Encoding, Target, Tls
from flowtracer.schemas.v1.counters_pb2 import CounterBatch
from flowtracer.sim.switches.server import GnmiServer, TlsFiles


def _collect(target: Target, encoding: Encoding, ticker: Ticker, n: int = 6) -> list[CounterBatch]:
    batches, s = collect_batches(target, fast_gnmi(0.1, encoding=encoding, batch_grace=0.3), n)
    assert s.stats.decode_errors == 0
    return batches


@pytest.mark.parametrize("encoding", list(Encoding))
def test_encodings_give_exact_deltas(encoding: Encoding) -> None:
    st = make_switch("leaf1")
    with GnmiServer({"leaf1": st}) as srv, Ticker([st], 0.1) as ticker:
        batches = _collect(Target(name="leaf1", address="127.0.0.1", port=srv.port), encoding, ticker)
    assert check_against_truth(batches, ticker) >= 40


def test_tls_skip_verify_trusts_what_the_switch_presents(tmp_path: Path) -> None:
    _, ca_key, ca_cert = make_ca(tmp_path, "ca")
    cert, key = make_server_cert(tmp_path, ca_key, ca_cert)
    st = make_switch("leaf1")
    with GnmiServer({"leaf1": st}, tls=TlsFiles(cert, key)) as srv, Ticker([st], 0.1) as ticker:
        target = Target(name="leaf1", address="127.0.0.1", port=srv.port, tls=Tls(enabled=True, skip_verify=True))
        batches = _collect(target, Encoding.PROTO, ticker, n=3)
    assert check_against_truth(batches, ticker) >= 10
