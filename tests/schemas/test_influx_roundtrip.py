"""The InfluxDB-line-protocol sink path against a real VictoriaMetrics: points written by
influxdb-client's batching WriteApi come back with exact values, tags and timestamps, a rewritten
point does not become a second sample, and write errors are not swallowed.

Float fields use values with at most 12 significant digits because VictoriaMetrics stores values
as decimals of about that precision (see flowtracer.testbed.victoriametrics); timestamps are whole
milliseconds because it stores ms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from influxdb_client import InfluxDBClient, Point, WriteOptions, WritePrecision

from flowtracer.embedded.tansu import free_port
from flowtracer.testbed.victoriametrics import EXTRA_FLAGS, VictoriaMetrics

ORG, BUCKET, TOKEN = "flowtracer", "flowtracer", "unused"  # VictoriaMetrics ignores all three
T0_NS = 1_704_067_200_000_000_000  # 2024-01-01T00:00:00Z: whole ms, in the past for any CI clock
MS = 1_000_000  # ns per ms


class WriteFailed(AssertionError):
    """influxdb-client reported a failed batch (its error callback fired)."""


Writer = Callable[[Sequence[Point]], None]
"""Queues points (nanosecond precision) on a batching WriteApi."""


@contextmanager
def batching_writer(url: str, batch_size: int = 5, flush_interval_ms: int = 200) -> Iterator[Writer]:
    """A batching influxdb-client WriteApi whose failures fail the caller.

    In batching mode influxdb-client writes from a background thread and only logs failed
    batches, and ``WriteApi.flush()`` is a no-op; so this collects the error callback's
    exceptions, drains the buffer with ``close()`` on exit, and raises :class:`WriteFailed` if a
    batch failed. Retries are off so a failure shows after one request, not minutes of backoff.
    It also checks that every queued point went out in a successful batch.

    *flush_interval_ms* stays short because the client's window timer thread outlives
    ``close()``: the interpreter cannot exit until the current interval has run out.
    """
    errors: list[tuple[tuple[str, str, str], BaseException]] = []
    sent_lines: list[str] = []
    queued = 0

    def on_success(conf: tuple[str, str, str], data: str | bytes) -> None:
        text = data.decode() if isinstance(data, bytes) else data
        sent_lines.extend(line for line in text.split("\n") if line)

    def on_error(conf: tuple[str, str, str], data: str | bytes, exception: BaseException) -> None:
        errors.append((conf, exception))

    client = InfluxDBClient(url=url, token=TOKEN, org=ORG, timeout=10_000)
    write_api = client.write_api(
        write_options=WriteOptions(batch_size=batch_size, flush_interval=flush_interval_ms, max_retries=0),
        success_callback=on_success,
        error_callback=on_error,
    )

    def write(points: Sequence[Point]) -> None:
        nonlocal queued
        queued += len(points)
        write_api.write(bucket=BUCKET, org=ORG, record=list(points), write_precision=WritePrecision.NS)

    try:
        yield write
    finally:
        write_api.close()  # flushes the pending batch and waits for the writer thread
        client.close()
    if errors:
        raise WriteFailed(f"{len(errors)} batch(es) failed: {errors}")
    assert len(sent_lines) == queued, f"queued {queued} points, sent {len(sent_lines)} lines"


def series_by_labels(exported: list[dict[str, Any]]) -> dict[frozenset[tuple[str, str]], list[tuple[int, Any]]]:
    """Exported series keyed by their full label set (including ``__name__``), each as a list of
    (timestamp ms, value)."""
    out: dict[frozenset[tuple[str, str]], list[tuple[int, Any]]] = {}
    for s in exported:
        labels = frozenset(s["metric"].items())
        assert labels not in out, f"series exported twice: {s['metric']}"
        out[labels] = list(zip(s["timestamps"], s["values"], strict=True))
    return out


@pytest.mark.timeout(60)
def test_batched_points_roundtrip_exactly(victoria: VictoriaMetrics, unique_id: str) -> None:
    # Two links, six windows: 12 points with 4 fields each, written in batches of 5 (3 requests).
    links = {
        "leaf-01:Ethernet1/1>spine-01:Ethernet1/1": ("leaf-01", "spine-01"),
        # Space, comma and '=' need escaping in line protocol; they must come back unchanged.
        "leaf 02,rack=7:Ethernet1/2>spine-02:Ethernet1/1": ("leaf 02,rack=7", "spine-02"),
    }
    fields: dict[str, list[int | float]] = {
        "measured_bytes": [0, 1, 9_007_199_254_740_991, 125_000_000_000, 42, 7],  # 2**53-1: float64-exact
        "unexplained_bytes": [-1_234, 0, 5, -9_000_000_000, 3, -1],
        "utilization": [0.0, 0.1, 0.4375, 0.987654321, 1.5, 0.333333333333],  # <= 12 digits
        "flow_count": [3, 0, 1, 2, 65_535, 4],
    }
    points: list[Point] = []
    expected: dict[frozenset[tuple[str, str]], list[tuple[int, Any]]] = {}
    for link, (src, dst) in links.items():
        for i in range(6):
            ts_ns = T0_NS + i * 10_000 * MS + 123 * MS  # whole ms, 10 s apart
            point = Point("link_load").tag("test_id", unique_id).tag("link", link)
            point = point.tag("src_node", src).tag("dst_node", dst).time(ts_ns, WritePrecision.NS)
            for name, values in fields.items():
                point = point.field(name, values[i])
                labels = frozenset({
                    ("__name__", f"link_load_{name}"), ("test_id", unique_id), ("link", link),
                    ("src_node", src), ("dst_node", dst),
                })
                expected.setdefault(labels, []).append((ts_ns // MS, values[i]))
            points.append(point)
    # Integer fields go out as integers ("5i"), not floats: the int/float distinction is tested.
    assert "measured_bytes=9007199254740991i" in points[2].to_line_protocol()

    with batching_writer(victoria.url, batch_size=5) as write:
        write(points[:7])
        write(points[7:])

    exported = victoria.export(f'{{test_id="{unique_id}"}}')
    assert series_by_labels(exported) == expected
    # 3 == 3.0 in Python, so also check that integer fields come back as JSON integers.
    for s in exported:
        if s["metric"]["__name__"] in ("link_load_measured_bytes", "link_load_flow_count"):
            assert all(type(v) is int for v in s["values"]), s


@pytest.mark.timeout(60)
def test_rewriting_a_point_keeps_one_sample(victoria: VictoriaMetrics, unique_id: str) -> None:
    """The sink may write a window twice (replay after a restart): same series and timestamp
    must stay one sample. Needs -dedup.minScrapeInterval=1ms (tested below)."""

    def point(window: int, value: float) -> Point:
        return (
            Point("fim").tag("test_id", unique_id).tag("group", "leaf-01:spine-01|spine-02")
            .field("fim", value).time(T0_NS + window * 10_000 * MS, WritePrecision.NS)
        )

    # Window 0: the same point twice in one batch. Window 1: again in a later request, after the
    # first copy was flushed to storage (export force-flushes), so the copies sit in different parts.
    with batching_writer(victoria.url) as write:
        write([point(0, 0.25), point(0, 0.25), point(1, 0.5)])
    assert series_by_labels(victoria.export(f'{{test_id="{unique_id}"}}')) == {
        frozenset({("__name__", "fim_fim"), ("test_id", unique_id), ("group", "leaf-01:spine-01|spine-02")}):
            [(T0_NS // MS, 0.25), (T0_NS // MS + 10_000, 0.5)],
    }
    with batching_writer(victoria.url) as write:
        write([point(1, 0.5)])
    [series] = victoria.export(f'{{test_id="{unique_id}"}}')
    assert series["timestamps"] == [T0_NS // MS, T0_NS // MS + 10_000]
    assert series["values"] == [0.25, 0.5]

    # A *different* value for the same timestamp also stays one sample, but VictoriaMetrics 1.79
    # does not promise which value survives (not last-write-wins), so only membership is checked.
    with batching_writer(victoria.url) as write:
        write([point(1, 0.75)])
    [series] = victoria.export(f'{{test_id="{unique_id}"}}')
    assert series["timestamps"] == [T0_NS // MS, T0_NS // MS + 10_000]
    assert series["values"][0] == 0.25 and series["values"][1] in (0.5, 0.75)


@pytest.mark.timeout(60)
def test_without_dedup_flag_rewrites_are_duplicated(unique_id: str) -> None:
    """Why EXTRA_FLAGS carries -dedup.minScrapeInterval=1ms: without it VictoriaMetrics keeps
    both copies of a rewritten point."""
    flags = tuple(f for f in EXTRA_FLAGS if not f.startswith("-dedup.minScrapeInterval"))
    assert flags != EXTRA_FLAGS
    with VictoriaMetrics(extra_flags=flags) as vm:
        p = Point("fim").tag("test_id", unique_id).field("fim", 0.25).time(T0_NS, WritePrecision.NS)
        with batching_writer(vm.url) as write:
            write([p, p])
        [series] = vm.export(f'{{test_id="{unique_id}"}}')
    assert series["timestamps"] == [T0_NS // MS, T0_NS // MS]


def test_write_errors_fail_the_writer() -> None:
    """The batching writer raises when a batch cannot be written (nothing listens on the port),
    instead of the client only logging it."""
    with pytest.raises(WriteFailed, match="Connection refused"), batching_writer(
        f"http://127.0.0.1:{free_port()}"
    ) as write:
        write([Point("m").field("v", 1).time(T0_NS, WritePrecision.NS)])
