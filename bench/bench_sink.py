"""Throughput of the InfluxDB sink against the raw influxdb-client limit, in the same run.

One command (a VictoriaMetrics is started and stopped by the script)::

    .venv/bin/python bench/bench_sink.py [--points 200000] [--repeat 3]

Measures, each as the best of ``--repeat`` runs:

* ``raw_pts_per_s``: influxdb-client's batching WriteApi alone (same batch size and flush
  interval, its own writer thread), from the first ``write`` until the success callbacks have
  confirmed every point: the library's limit, mostly its per-point Rx pipeline.
* ``sink_pts_per_s``: :class:`InfluxSink` from the first ``write`` until ``durable`` is true for
  the last ticket (windows of ``--window`` lines, waiting on backpressure like the processor);
  ``sink_ratio`` = sink / raw.
* ``encode_lines_per_s``: :func:`outputs.to_lines` on LinkLoad messages vs influxdb-client's
  ``Point(...).to_line_protocol()`` for the same points (``encode_ratio``).
* ``close_ms``: ``InfluxSink.close()`` with a partial batch open (flush interval 1 s).

Prints one dict; docs/benchmarks.md records the ratios.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from influxdb_client import InfluxDBClient, Point, WriteOptions, WritePrecision
from reactivex.scheduler import ThreadPoolScheduler

from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.sinks.base import SinkBackpressure
from flowtracer.stream.sinks.influx import InfluxConfig, InfluxSink
from flowtracer.stream.stages import outputs
from flowtracer.testbed.victoriametrics import VictoriaMetrics

T0 = 1_704_067_200_000_000_000  # 2024-01-01T00:00:00Z
S = 1_000_000_000
BATCH, FLUSH_MS = 5000, 1000
LINKS = 1024


def link_loads(n: int, run: int) -> list[analytics_pb2.LinkLoad]:
    """*n* LinkLoads: LINKS links per 10 s window, run *run* in its own hour (no overwrites)."""
    out = []
    for i in range(n):
        link, window = i % LINKS, i // LINKS
        end = T0 + run * 3600 * S + (window + 1) * 10 * S
        out.append(analytics_pb2.LinkLoad(
            schema_version=1, window_start_ns=end - 10 * S, window_end_ns=end,
            link=f"leaf-{link // 32:02d}:Ethernet1/{link % 32 + 1}>spine-{link % 8:02d}:Ethernet1/{link // 8 + 1}",
            src_node=f"leaf-{link // 32:02d}", dst_node=f"spine-{link % 8:02d}", measured_bytes=10_000_000 * link + i,
            measured_valid=True, attributed_bytes=9_000_000 * link, unexplained_bytes=1_000_000 * link + i,
            utilization=(i % 1000) / 1000, flow_count=i % 17, resolver="hash"))
    return out


def point_line(m: analytics_pb2.LinkLoad) -> str:
    """The same point through influxdb-client's Point (for the encoder comparison)."""
    return (Point("link_load").tag("link", m.link).tag("src_node", m.src_node).tag("dst_node", m.dst_node)
            .tag("resolver", m.resolver).field("measured_bytes", m.measured_bytes)
            .field("attributed_bytes", m.attributed_bytes).field("unexplained_bytes", m.unexplained_bytes)
            .field("utilization", m.utilization).field("flow_count", m.flow_count).field("measured_valid", 1)
            .time(m.window_end_ns, WritePrecision.NS).to_line_protocol())


def raw_rate(url: str, lines: list[str]) -> float:
    """Points/s through a bare batching WriteApi until every point is confirmed."""
    confirmed = [0]

    def ok(conf: tuple[str, str, str], data: bytes) -> None:
        confirmed[0] += data.count(b"\n") + 1

    client = InfluxDBClient(url=url, token="unused", org="bench", timeout=30_000)
    api = client.write_api(write_options=WriteOptions(batch_size=BATCH, flush_interval=FLUSH_MS,
                                                      write_scheduler=ThreadPoolScheduler(1)), success_callback=ok)
    started = time.perf_counter()
    api.write("bench", "bench", lines, WritePrecision.NS)
    while confirmed[0] < len(lines):
        time.sleep(0.0005)
    elapsed = time.perf_counter() - started
    api.close()
    client.close()
    return len(lines) / elapsed


def sink_rate(cfg: InfluxConfig, lines: list[str], window: int) -> tuple[float, int]:
    """Points/s through InfluxSink until the last ticket is durable; also the backpressure waits."""
    sink = InfluxSink(cfg)
    waits = 0
    started = time.perf_counter()
    ticket = 0
    for i in range(0, len(lines), window):
        while True:
            try:
                ticket = sink.write(lines[i:i + window])
                break
            except SinkBackpressure as e:
                waits += 1
                time.sleep(min(e.retry_after_s, 0.005))
    while not sink.durable(ticket):
        sink.raise_if_failed()
        time.sleep(0.0005)
    elapsed = time.perf_counter() - started
    sink.close()
    return len(lines) / elapsed, waits


def close_ms(cfg: InfluxConfig) -> float:
    sink = InfluxSink(cfg)
    ticket = sink.write(outputs.to_lines(link_loads(10, run=999)))
    started = time.perf_counter()
    sink.close()
    assert sink.durable(ticket)
    return (time.perf_counter() - started) * 1000


def main() -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--window", type=int, default=LINKS, help="lines per sink.write (one processor window)")
    args = ap.parse_args()
    os.environ.setdefault("FLOWTRACER_INFLUX_TOKEN", "unused-by-victoriametrics")

    msgs = link_loads(args.points, run=0)
    started = time.perf_counter()
    lines = outputs.to_lines(msgs)
    encode = len(msgs) / (time.perf_counter() - started)
    started = time.perf_counter()
    point_lines = [point_line(m) for m in msgs]
    point = len(msgs) / (time.perf_counter() - started)
    assert len(point_lines) == len(lines)

    raw, sink, waits = 0.0, 0.0, 0
    with VictoriaMetrics() as vm:
        cfg = InfluxConfig(url=vm.url, org="bench", bucket="bench", batch_size=BATCH,
                           flush_interval=FLUSH_MS / 1000, max_pending_points=max(100_000, BATCH))
        for run in range(args.repeat):  # alternate so drift hits both alike; distinct timestamps per run
            raw = max(raw, raw_rate(vm.url, outputs.to_lines(link_loads(args.points, run=2 * run + 1))))
            rate, w = sink_rate(cfg, outputs.to_lines(link_loads(args.points, run=2 * run + 2)), args.window)
            if rate > sink:
                sink, waits = rate, w
        closing = close_ms(cfg)
    result = {
        "points": args.points, "batch_size": BATCH, "raw_pts_per_s": round(raw), "sink_pts_per_s": round(sink),
        "sink_ratio": round(sink / raw, 3), "backpressure_waits": waits,
        "encode_lines_per_s": round(encode), "point_lines_per_s": round(point),
        "encode_ratio": round(encode / point, 2),
        "close_ms": round(closing, 1),
    }
    print(result)
    return result


if __name__ == "__main__":
    main()
