"""QP ends exchanged between agents: wire format, validation, the latest-table store, and the
``PeerDirectory`` fallback from local to remote ends (pure; Kafka is in test_agent_peer_exchange)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from flowtracer.collectors.agent.peers.ends import BadQpEnds, Publisher, RemoteEnds, decode, encode
from flowtracer.collectors.agent.peers.matching import Endpoint, PeerDirectory
from flowtracer.schemas.v1 import peers_pb2 as pb

A = Endpoint("host-a", "mlx5_0", 1, "10.0.0.1")
B = Endpoint("host-b", "mlx5_0", 1, "10.0.0.2")
B2 = Endpoint("host-b", "mlx5_1", 1, "10.0.1.2")
C = Endpoint("host-c", "mlx5_0", 1, "10.0.0.3")
S = 1_000_000_000


def _ends(end: Endpoint, pairs: list[tuple[int, int]]) -> dict[Endpoint, tuple[np.ndarray, np.ndarray]]:
    return {end: (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))}


def test_encode_decode_round_trip_sorts_by_lqpn_and_digest_ignores_time() -> None:
    ends = {**_ends(B2, [(0x30, 0x40)]), **_ends(B, [(0x22, 0x11), (0x21, 0x12)])}
    digest, value = encode("host-b", 5 * S, "agent-b", ends)
    he = decode(value)
    assert (he.host, he.time_ns) == ("host-b", 5 * S)
    assert list(he.ends) == [B, B2]  # ports in (device, port) order
    assert he.ends[B][0].tolist() == [0x21, 0x22] and he.ends[B][1].tolist() == [0x12, 0x11]
    assert pb.QpEnds.FromString(value).agent_id == "agent-b"
    assert encode("host-b", 6 * S, "agent-b", ends)[0] == digest
    assert encode("host-b", 6 * S, "agent-b", {**ends, **_ends(B2, [(0x30, 0x41)])})[0] != digest


def test_a_port_without_an_address_is_left_out_not_published_as_a_bad_table() -> None:
    no_ip = Endpoint("host-b", "mlx5_1", 1, "")
    he = decode(encode("host-b", S, "b", {**_ends(B, [(1, 2)]), **_ends(no_ip, [(3, 4)])})[1])
    assert list(he.ends) == [B]


@pytest.mark.parametrize(("msg", "says"), [
    (pb.QpEnds(schema_version=2, host="h"), "schema_version 2"),
    (pb.QpEnds(schema_version=1), "host is empty"),
    (pb.QpEnds(schema_version=1, host="h", ports=[pb.PortQpEnds(rdma_device="mlx5_0", port=1, ip="10.0.0.1",
                                                                lqpn=[1, 2], rqpn=[3])]),
     "ports[0] (mlx5_0/1): 2 lqpn but 1 rqpn"),
    (pb.QpEnds(schema_version=1, host="h", ports=[pb.PortQpEnds(rdma_device="mlx5_0", port=1, lqpn=[1], rqpn=[3])]),
     "ip is empty"),
    (pb.QpEnds(schema_version=1, host="h", ports=[pb.PortQpEnds(rdma_device="d", port=1, ip="10.0.0.1",
                                                                lqpn=[1], rqpn=[1 << 24])]),
     "not 24 bits"),
])
def test_bad_records_name_what_is_wrong(msg: pb.QpEnds, says: str) -> None:
    with pytest.raises(BadQpEnds, match=re.escape(says)):
        decode(msg.SerializeToString())


def test_garbage_is_a_bad_record_not_a_crash() -> None:
    with pytest.raises(BadQpEnds, match="not a QpEnds message"):
        decode(b"\xff\xff\xff")
    r = RemoteEnds(["host-a"])
    assert not r.offer(b"\xff\xff\xff") and r.malformed == 1 and r.directory(0) is None


def test_remote_ends_keep_the_latest_table_of_other_known_hosts() -> None:
    r = RemoteEnds(local_hosts=["host-a"], known_hosts=["host-a", "host-b"], max_age_ns=10 * S)
    assert not r.offer(encode("host-a", S, "x", _ends(A, [(1, 2)]))[1])  # our own host: we read it ourselves
    assert not r.offer(encode("host-z", S, "x", _ends(C, [(1, 2)]))[1])  # not in the topology
    assert r.ignored == 2
    assert r.offer(encode("host-b", 2 * S, "b", _ends(B, [(0x20, 0x10)]))[1])
    assert not r.offer(encode("host-b", 2 * S, "b", _ends(B, [(0x20, 0x99)]))[1])  # redelivered / older
    assert not r.offer(encode("host-b", 3 * S, "b", _ends(B, [(0x20, 0x10)]))[1])  # refresh, same table
    assert r.seen() == {"host-b": 3 * S}
    d = r.directory(4 * S)
    assert d is not None and d.peer(A, 0x10, 0x20) == B
    assert r.directory(4 * S) is d  # unchanged: not rebuilt
    assert r.offer(encode("host-b", 4 * S, "b", _ends(B, [(0x21, 0x11)]))[1])
    d = r.directory(5 * S)
    assert d.peer(A, 0x10, 0x20) is None and d.peer(A, 0x11, 0x21) == B
    assert r.directory(14 * S + 1) is None and r.seen() == {}  # its agent went quiet: QP numbers get reused


def test_directory_falls_back_to_remote_ends_with_ids_after_the_local_ones() -> None:
    remote = PeerDirectory()
    remote.add_many(B, np.array([0x20, 0x30]), np.array([0x10, 0x11]))
    remote.add_many(C, np.array([0x40]), np.array([0x12]))
    local = PeerDirectory(remote=remote)
    local.add_many(A, np.array([0x10, 0x11, 0x12, 0x13]), np.array([0x20, 0x30, 0x40, 0x50]))
    local.add_many(B2, np.array([0x50]), np.array([0x13]))  # a second NIC of this agent's hosts
    ids = local.peers(A, np.array([0x10, 0x11, 0x12, 0x13, 0x14]), np.array([0x20, 0x30, 0x40, 0x50, 0x60]))
    assert [local.endpoint(i) if i >= 0 else None for i in ids.tolist()] == [B, B, C, B2, None]
    assert local.ips_of(ids) == ["10.0.0.2", "10.0.0.2", "10.0.0.3", "10.0.1.2", ""]
    assert ids[3] < 2 <= ids[0]  # local ends first


def test_publisher_sends_changed_tables_and_refreshes_unchanged_ones() -> None:
    p = Publisher(refresh_ns=30 * S)
    assert p.due("h", b"t1", 1 * S) and p.last("h") == 1 * S
    assert not p.due("h", b"t1", 2 * S)
    assert p.due("h", b"t2", 3 * S)
    assert not p.due("h", b"t2", 32 * S) and p.due("h", b"t2", 33 * S)
    assert p.last("other") is None
