"""The dashboard's per-job collectives: newest window per collective, over the hosts that logged it."""

from __future__ import annotations

import pytest

from flowtracer.schemas.v1 import flows_pb2
from flowtracer.stream.dashboard import collectives_view
from flowtracer.stream.dashboard.collectives_view import CollectivesView

S = 1_000_000_000


def _p(end_s: int, host: str, calls: int, timed_ns: int = 0, bus: float = 0.0, count: int = 1024,
       job: str = "ring") -> flows_pb2.CollectiveProfile:
    return flows_pb2.CollectiveProfile(schema_version=1, window_end_ns=end_s * S, host=host, job_id=job,
                                       comm_id="0xa", operation="AllReduce", datatype=9, count=count,
                                       call_bytes=2 * count, nranks=4, calls=calls, timed_ns=timed_ns,
                                       bus_bw_bytes_per_s=bus)


def test_the_newest_window_wins_and_hosts_are_merged_with_a_time_weighted_bandwidth() -> None:
    v = CollectivesView()
    v.observe([_p(1, "h1", 9, S, 10.0), _p(2, "h1", 7, S // 2, 4.0), _p(2, "h2", 8, S // 2, 8.0),
               _p(1, "h3", 99), _p(2, "h1", 3, count=8, job="other")])
    rows = v.json(current_from_ns=0)
    assert [(r["job"], r["count"], r["calls"], r["hosts"]) for r in rows] == \
        [("other", 8, 3, ["h1"]), ("ring", 1024, 8, ["h1", "h2"])]
    assert rows[0]["bus_bw_bytes_per_s"] is None  # untimed
    assert rows[1]["bus_bw_bytes_per_s"] == pytest.approx(6.0) and rows[1]["call_bytes"] == 2048
    assert v.json(current_from_ns=2 * S) == []  # nothing newer than the cut


def test_remembered_collectives_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collectives_view, "MAX_KEYS", 3)
    v = CollectivesView()
    v.observe([_p(1, "h1", 1, count=c) for c in range(1, 6)])
    assert [r["count"] for r in v.json(0)] == [3, 4, 5]
