"""The dashboard's incident list (stream/dashboard/incident_feed.py): newest snapshot per incident, open first,
closed ones for a while; odd records are counted. The feed's Kafka side runs in test_diagnose_service.py."""

from __future__ import annotations

from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.dashboard.incident_feed import IncidentBoard

S = 1_000_000_000
T0 = 1_800_000_000 * S


def _snap(id_: str, k: int, state: str, start_k: int) -> bytes:
    return analytics_pb2.Incident(
        schema_version=1, window_end_ns=T0 + k * S, id=id_, kind=id_.split("/")[0], state=state,
        start_ns=T0 + start_k * S, detected_ns=T0 + (start_k + 1) * S, end_ns=T0 + k * S if state == "closed" else 0,
        suspects=[analytics_pb2.Suspect(component="cable:a~b", score=1.5, evidence=["capacity_loss a>b"])],
        flows=["h1:mlx5_0>h2:mlx5_0"], hosts=["h1", "h2"], jobs=["4711"]).SerializeToString()


def test_the_board_keeps_the_newest_snapshot_lists_open_first_and_forgets_old_closed_ones() -> None:
    board = IncidentBoard(closed_keep_ns=60 * S)
    board.add(_snap("degraded_link/cable:a~b/1", 5, "open", 1))
    board.add(_snap("degraded_link/cable:a~b/1", 4, "open", 1))  # an older snapshot read late changes nothing
    board.add(_snap("failed_link/cable:c~d/2", 9, "closed", 2))
    board.add(_snap("persistent_imbalance/group:g/3", 3, "open", 3))
    board.add(b"\xff\xff")
    assert board.undecodable == 1
    now = board.json(T0 + 10 * S)
    assert [(i["kind"], i["state"]) for i in now] == [
        ("persistent_imbalance", "open"), ("degraded_link", "open"), ("failed_link", "closed")]
    deg = now[1]
    assert deg["snapshot_ms"] == (T0 + 5 * S) // 1_000_000 and deg["end_ms"] is None and deg["flow_count"] == 1
    assert deg["jobs"] == ["4711"]
    assert deg["suspects"] == [{"component": "cable:a~b", "score": 1.5, "evidence": ["capacity_loss a>b"]}]
    assert [i["state"] for i in board.json(T0 + 70 * S)] == ["open", "open"]  # the closed one aged out


def test_50k_forged_ids_leave_the_board_bounded_the_drops_counted_and_the_real_incident_listed() -> None:
    from flowtracer.stream.diagnosis.snapshots import MAX_INCIDENTS

    board = IncidentBoard()
    board.add(_snap("degraded_link/cable:a~b/1", 60_000, "open", 1))
    for n in range(50_000):
        board.add(_snap(f"agent_missing/agent:forged{n}/{n}", n, "open", n))
    assert len(board.snapshots.newest) <= MAX_INCIDENTS  # before: all 50,001 kept
    assert board.snapshots.dropped == 50_001 - len(board.snapshots.newest)
    listed = board.json(T0 + 60_000 * S, top=MAX_INCIDENTS)
    assert "degraded_link/cable:a~b/1" in {i["id"] for i in listed}
