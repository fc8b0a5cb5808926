"""Shards cover every target exactly once; reconnect policy: error classes and backoff schedule."""

from __future__ import annotations

import random

import grpc
import pytest

from flowtracer.collectors.gnmi.backoff import Backoff, ErrorClass, classify
from flowtracer.collectors.gnmi.sharding import owner, parse_shard, select

NAMES = [f"leaf{i:03d}" for i in range(300)] + [f"spine{i:02d}" for i in range(20)]


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_cover_every_target_exactly_once(n: int) -> None:
    shards = [select(NAMES, i, n, name=str) for i in range(n)]
    flat = [t for s in shards for t in s]
    assert sorted(flat) == sorted(NAMES)
    assert len(flat) == len(set(flat))
    assert min(map(len, shards)) > len(NAMES) / n * 0.6  # roughly balanced


def test_adding_a_shard_moves_few_targets() -> None:
    moved = sum(owner(t, 4) != owner(t, 5) for t in NAMES)
    assert moved < len(NAMES) * 0.35  # ~1/5 expected; hash % N would move ~4/5


def test_parse_shard() -> None:
    assert parse_shard("1/3") == (1, 3)
    for bad in ("3/3", "a/2", "1", "-1/2"):
        with pytest.raises(ValueError):
            parse_shard(bad)


@pytest.mark.parametrize(("code", "details", "cls", "reason"), [
    (grpc.StatusCode.UNAUTHENTICATED, "", ErrorClass.CONFIG, "credentials"),
    (grpc.StatusCode.PERMISSION_DENIED, "", ErrorClass.CONFIG, "permission"),
    (grpc.StatusCode.INVALID_ARGUMENT, "", ErrorClass.CONFIG, "subscription"),
    (grpc.StatusCode.UNIMPLEMENTED, "", ErrorClass.CONFIG, "unimplemented"),
    (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
     "Ssl handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED", ErrorClass.CONFIG,
     "server_cert_untrusted"),
    (grpc.StatusCode.UNAVAILABLE, "last error: UNKNOWN: ipv4:127.0.0.1:1: Tls handshake failed (TSI_PROTOCOL_FAILURE): "
     "SSL_ERROR_SSL: error:10000418:SSL routines:OPENSSL_internal:TLSV1_ALERT_UNKNOWN_CA: OK", ErrorClass.CONFIG,
     "client_cert_rejected"),
    (grpc.StatusCode.UNAVAILABLE, "Connection refused", ErrorClass.TRANSIENT, "unreachable"),
    (grpc.StatusCode.DEADLINE_EXCEEDED, "", ErrorClass.TRANSIENT, "timeout"),
    (grpc.StatusCode.INTERNAL, "", ErrorClass.TRANSIENT, "stream_failed"),
])
def test_classify(code: grpc.StatusCode, details: str, cls: ErrorClass, reason: str) -> None:
    got, why, hint = classify(code, details)
    assert got is cls and why == reason and hint


def test_backoff_doubles_with_jitter_caps_and_resets_after_healthy_time() -> None:
    b = Backoff(base=1.0, cap=60.0, reset_after=60.0, rng=random.Random(1))
    delays = [b.next_delay() for _ in range(10)]
    for n, d in enumerate(delays):
        top = min(60.0, 2.0**n)
        assert top / 2 <= d <= top
    assert max(delays) <= 60.0
    b.healthy(59.0)
    assert b.next_delay() >= 30.0  # not healthy long enough: still capped high
    b.healthy(61.0)
    assert b.next_delay() <= 1.0
