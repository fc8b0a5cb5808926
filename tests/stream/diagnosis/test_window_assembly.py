"""The one rule for when a window of the processor's outputs may be diagnosed (stream/diagnosis/assembly.py)."""

from __future__ import annotations

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, flows_pb2
from flowtracer.stream.diagnosis.assembly import WindowAssembler

S = 1_000_000_000
T0 = 1_800_000_000 * S
LINK = "leaf01:Ethernet1>spine01:Ethernet1"


def _load(a: WindowAssembler, k: int, now_s: float) -> None:
    ll = analytics_pb2.LinkLoad(schema_version=1, window_end_ns=T0 + k * S, link=LINK, src_node="leaf01",
                                dst_node="spine01", speed_bps=100 * 10**9, measured_valid=True, measured_bytes=10**9)
    a.add(topics.LINK_LOADS.name, ll.SerializeToString(), round(now_s * S))


def _fabric_fim(a: WindowAssembler, k: int, now_s: float) -> None:
    f = analytics_pb2.FimSample(schema_version=1, window_end_ns=T0 + k * S, group="fabric",
                                basis=analytics_pb2.LOAD_BASIS_ATTRIBUTED, fim=0.2)
    a.add(topics.FIM.name, f.SerializeToString(), round(now_s * S))


def _ends(out: list) -> list[tuple[int, str]]:
    return [((v.end_ns - T0) // S, how) for v, how in out]


def test_a_window_is_complete_when_its_fabric_fim_arrives_and_not_before() -> None:
    a = WindowAssembler(S, 10 * S)
    _load(a, 1, 0)
    _load(a, 2, 1)
    assert a.complete(2 * S) == []
    _fabric_fim(a, 1, 2)
    out = a.complete(2 * S)
    assert _ends(out) == [(1, "fim")] and out[0][0].links[LINK].measured_bytes == 10**9
    assert a.complete(3 * S) == []  # window 2 waits for its own sample


def test_a_later_fabric_sample_completes_the_older_windows_in_order() -> None:
    a = WindowAssembler(S, 10 * S)
    for k in (1, 2, 3):
        _load(a, k, k)
    _fabric_fim(a, 3, 4)  # windows 1 and 2 had none (no group carried bytes): the fabric stage goes in order
    assert _ends(a.complete(4 * S)) == [(1, "fim"), (2, "fim"), (3, "fim")]


def test_while_the_reader_is_behind_a_later_fabric_sample_completes_nothing() -> None:
    """A restarted reader fetched the fim topic up to window 9 before the link loads of window 6 (each
    topic-partition is fetched on its own): while records wait unread, nothing is handed out, not even by the
    grace; once read up, the windows complete with their own link loads."""
    a = WindowAssembler(S, 10 * S)
    _load(a, 5, 0)
    for k in range(5, 10):
        _fabric_fim(a, k, 0)
    assert a.complete(20 * S, behind=True) == []
    for k in range(6, 10):
        _load(a, k, 21)
    out = a.complete(21 * S)
    assert _ends(out) == [(k, "fim") for k in range(5, 10)] and all(LINK in v.links for v, _ in out)
    assert a.late_records == 0
    # a partition that never catches up delays the diagnosis by BEHIND_GRACES graces, never stops it
    _load(a, 10, 30)
    assert a.complete(69 * S, behind=True) == []
    assert _ends(a.complete(70 * S, behind=True)) == [(10, "grace")]


def test_without_fabric_samples_the_grace_completes_a_window_counted_from_its_first_record() -> None:
    a = WindowAssembler(S, 10 * S)
    _load(a, 1, 0)
    _load(a, 2, 5)
    assert a.complete(9 * S) == []
    assert _ends(a.complete(10 * S)) == [(1, "grace")]
    assert _ends(a.complete(15 * S)) == [(2, "grace")]


def test_late_records_are_counted_and_dropped_and_empty_windows_are_not_handed_out() -> None:
    a = WindowAssembler(S, 10 * S)
    _load(a, 2, 0)
    pl = analytics_pb2.PathLoad(schema_version=1, window_end_ns=T0 + 3 * S, path_id="p", links=[LINK], bytes=5)
    a.add(topics.PATH_LOADS.name, pl.SerializeToString(), 0)  # window 3: a path load, no link load
    _fabric_fim(a, 3, 1)
    assert _ends(a.complete(S)) == [(2, "fim")]  # 3 measured nothing: nothing to diagnose
    _load(a, 2, 2)
    _load(a, 1, 2)
    assert a.late_records == 2 and a.pending == {}
    a.add(topics.LINK_LOADS.name, b"\xff\xff", 0)
    assert a.undecodable == 1


def test_final_hands_out_everything_pending() -> None:
    a = WindowAssembler(S, 10 * S)
    _load(a, 1, 0)
    _load(a, 2, 0)
    assert _ends(a.complete(0, final=True)) == [(1, "final"), (2, "final")]


def test_collective_profiles_with_calls_join_their_window_under_their_job() -> None:
    a = WindowAssembler(S, 10 * S)
    for job, calls in (("ring", 3), ("ring", 0), ("", 2), ("other", 1)):
        cp = flows_pb2.CollectiveProfile(schema_version=1, window_end_ns=T0 + S, job_id=job, comm_id="0xa",
                                         operation="AllReduce" if calls != 1 else "Send", calls=calls)
        a.add(topics.COLLECTIVE_PROFILE.name, cp.SerializeToString(), 0)
    _load(a, 1, 0)
    [(view, _)] = a.complete(0, final=True)
    assert view.collectives == {"ring": {"ring/0xa/AllReduce"}, "other": {"other/0xa/Send"}}


def test_a_path_load_keeps_its_untrusted_bytes() -> None:
    a = WindowAssembler(S, 10 * S)
    _load(a, 1, 0)
    pl = analytics_pb2.PathLoad(schema_version=1, window_end_ns=T0 + S, path_id="p", links=[LINK], src_host="h1",
                                src_nic="mlx5_0", dst_host="h2", dst_nic="mlx5_0", bytes=5, untrusted_bytes=3)
    a.add(topics.PATH_LOADS.name, pl.SerializeToString(), 0)
    _fabric_fim(a, 1, 1)
    [(view, _how)] = a.complete(S)
    assert [(p.src_nic, p.bytes, p.untrusted_bytes) for p in view.paths] == [("h1:mlx5_0", 5, 3)]
