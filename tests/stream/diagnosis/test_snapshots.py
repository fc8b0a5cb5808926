"""stream/diagnosis/snapshots.py: the newest snapshot per incident id, at most MAX_INCIDENTS ids, exceeded here."""

from __future__ import annotations

from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.diagnosis.resume import open_incidents
from flowtracer.stream.diagnosis.snapshots import MAX_INCIDENTS, NewestSnapshots

S = 1_000_000_000
T0 = 1_800_000_000 * S


def snap(id_: str, k: int, state: str = "open") -> analytics_pb2.Incident:
    return analytics_pb2.Incident(schema_version=1, window_end_ns=T0 + k * S, id=id_, kind=id_.split("/")[0],
                                  state=state, start_ns=T0)


def test_50k_forged_ids_leave_at_most_the_limit_and_are_counted() -> None:
    board = NewestSnapshots()
    board.add(snap("degraded_link/cable:a~b/1", 100_000))  # the real one: open, newest
    board.add(snap("failed_link/cable:c~d/2", 99_999, "closed"))
    for n in range(50_000):
        board.add(snap(f"agent_missing/agent:forged{n}/{n}", n))
        assert len(board.newest) <= MAX_INCIDENTS
    assert board.dropped == 50_002 - len(board.newest)
    assert len(board.newest) > MAX_INCIDENTS * 7 // 8
    assert "degraded_link/cable:a~b/1" in board.newest, "the open incident with the newest snapshot stays"
    assert "failed_link/cable:c~d/2" not in board.newest, "closed ones go first"
    assert "agent_missing/agent:forged49999/49999" in board.newest and "agent_missing/agent:forged0/0" not in board.newest


def test_a_known_id_takes_its_newer_snapshot_and_costs_no_room() -> None:
    board = NewestSnapshots(limit=2)
    board.add(snap("a/x/1", 5))
    board.add(snap("a/x/1", 4))  # older: ignored
    board.add(snap("b/y/2", 6))
    board.add(snap("a/x/1", 7))
    assert {i: r.window_end_ns - T0 for i, r in board.newest.items()} == {"a/x/1": 7 * S, "b/y/2": 6 * S}
    assert board.dropped == 0
    board.add(snap("c/z/3", 8))
    assert set(board.newest) == {"a/x/1", "c/z/3"} and board.dropped == 1


def test_a_restarted_diagnosis_takes_over_at_most_the_limit() -> None:
    records = [snap(f"agent_missing/agent:forged{n}/{n}", n) for n in range(MAX_INCIDENTS + 100)]
    assert len(open_incidents(records)) <= MAX_INCIDENTS
