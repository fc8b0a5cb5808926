"""Golden cases: recorded SubscribeResponses (cases/<behaviour>/responses.json) replayed by a real
in-process gNMI server to a real TargetSession; the CounterBatches must equal expected.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gnmi_replay import ReplayServer
from gnmi_session_util import LoopThread, collect, compact, fast_gnmi, run_session, stop_session
from waiting import wait_for

from flowtracer.collectors.gnmi.config import Target
from flowtracer.collectors.gnmi.session import TargetSession
from flowtracer.schemas.v1.counters_pb2 import CounterBatch

CASES = sorted(p for p in (Path(__file__).parent / "cases").iterdir() if (p / "responses.json").is_file())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden_case(case: Path) -> None:
    spec = json.loads((case / "responses.json").read_text())
    expected = json.loads((case / "expected.json").read_text())
    batches: list[CounterBatch] = []
    lt = LoopThread()
    with ReplayServer(spec["sessions"]) as srv:
        target = Target(name="sw1", address="127.0.0.1", port=srv.port, **spec["target"])
        session = TargetSession(target, fast_gnmi(1.0, liveness_timeout=0.0, batch_grace=0.5), collector_id="golden",
                                emit=collect(batches))
        fut = run_session(session, lt)
        try:
            wait_for(lambda: len(batches) >= len(expected), 10, f"{len(expected)} batches")
        finally:
            stop_session(session, fut, lt)
            lt.close()
    got = [compact(b) for b in batches]
    assert got == expected, spec["description"]
    assert all(b.switch == "sw1" and b.collector_id == "golden" and b.schema_version == 1 for b in batches)
    assert srv.connections == len(spec["sessions"])
