"""Every resolver against the simulator's fluid model (ring all-reduce, all-to-all, a mix with background
flows; 2- and 4-member groups): ``trace`` within 5% per path, and no resolver claims a collision from a
split placement. docs/stream.md has the full table (``python tests/stream/resolvers/fluid.py``)."""

from __future__ import annotations

import pytest
from fluid import WORKLOADS, score, windows


@pytest.mark.parametrize("spines", [2, 4], ids=["2-member", "4-member"])
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_trace_is_exact_and_no_collision_rests_on_a_split(workload: str, spines: int) -> None:
    fabric, data = windows(workload, spines, ticks=25)
    assert sum(len(obs) for _, obs, _, _ in data) > 0
    scores = {r: score(r, fabric, data, warmup=5) for r in ("hash", "infer", "trace")}
    trace = scores["trace"]
    assert max(trace.errors) < 0.05 and trace.on_true / trace.total > 0.99
    assert trace.false_collisions == 0 and trace.true_collisions == trace.truth_collisions
    for name, s in scores.items():
        assert s.split_flows_in_collisions == 0, name
