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


def test_an_ip_that_is_not_an_address_is_a_bad_record() -> None:
    msg = pb.QpEnds(schema_version=1, host="host-b", time_ns=S, ports=[pb.PortQpEnds(
        rdma_device="mlx5_0", port=1, ip="not-an-ip; rm -rf /", lqpn=[1], rqpn=[2])])
    with pytest.raises(BadQpEnds, match=re.escape("ports[0] (mlx5_0/1): ip 'not-an-ip; rm -rf /' is not an IP address")):
        decode(msg.SerializeToString())
    for t in (0, -5):
        with pytest.raises(BadQpEnds, match="time_ns"):
            decode(pb.QpEnds(schema_version=1, host="host-b", time_ns=t).SerializeToString())


ADDRESSES = {"host-a": {"mlx5_0": "10.0.0.1"}, "host-b": {"mlx5_0": "10.0.0.2", "mlx5_1": "10.0.1.2"},
             "host-c": {"mlx5_0": "10.0.0.3"}}


def test_a_table_is_kept_only_with_the_named_hosts_topology_addresses() -> None:
    r = RemoteEnds(local_hosts=["host-a"], addresses=ADDRESSES, max_age_ns=90 * S)
    forged = Endpoint("host-b", "mlx5_0", 1, "10.0.0.3")  # host-c's address, in a table that says host-b
    assert not r.offer(encode("host-b", S, "x", _ends(forged, [(0x20, 0x10)]))[1])
    assert not r.offer(encode("host-z", S, "x", _ends(C, [(1, 2)]))[1])  # not in the topology at all
    assert r.malformed == 1 and r.ignored == 1 and r.directory(2 * S) is None
    storage = Endpoint("host-b", "mlx5_9", 1, "10.0.9.2")  # a NIC the topology does not list: left out
    assert r.offer(encode("host-b", S, "b", {**_ends(B, [(0x20, 0x10)]), **_ends(B2, [(0x30, 0x11)]),
                                             **_ends(storage, [(0x40, 0x12)])})[1])
    d = r.directory(2 * S)
    assert d is not None and d.peer(A, 0x10, 0x20) == B and d.peer(A, 0x11, 0x30) == B2
    assert d.peer(A, 0x12, 0x40) is None and r.unknown_ports == 1


def test_a_table_stamped_in_the_future_cannot_pin_the_host() -> None:
    """A forged table stamped a year ahead would win over every real one (older by its stamp) until it expired, so
    its time is clamped to the agent's clock plus ``max_ahead_ns``, so the real tables take over within that."""
    r = RemoteEnds(local_hosts=["host-a"], addresses=ADDRESSES, max_age_ns=90 * S, max_ahead_ns=5 * S)
    assert r.directory(100 * S) is None  # the agent's clock: 100 s
    year = 365 * 24 * 3600 * S
    assert r.offer(encode("host-b", 100 * S + year, "forger", _ends(B, [(0x66, 0x10)]))[1])
    assert r.seen() == {"host-b": 105 * S}  # clamped
    assert not r.offer(encode("host-b", 101 * S, "b", _ends(B, [(0x20, 0x10)]))[1])  # within the clamp: not yet
    assert r.directory(106 * S) is not None
    assert r.offer(encode("host-b", 106 * S, "b", _ends(B, [(0x20, 0x10)]))[1])  # the real table takes over
    d = r.directory(106 * S)
    assert d is not None and d.peer(A, 0x10, 0x20) == B and d.peer(A, 0x10, 0x66) is None


def test_a_table_offered_before_the_agents_first_window_is_clamped_at_that_window() -> None:
    r = RemoteEnds(local_hosts=["host-a"], max_age_ns=90 * S, max_ahead_ns=5 * S)
    assert r.offer(encode("host-b", 10**18 * 9, "forger", _ends(B, [(0x66, 0x10)]))[1])
    r.directory(100 * S)
    assert r.seen() == {"host-b": 105 * S}
