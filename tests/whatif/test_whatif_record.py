"""Recordings: FlowBatches to per-window flows, the export file format, time ranges."""

from __future__ import annotations

import io

import pytest
from test_whatif_strategies import S, fabric

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, flows_pb2
from flowtracer.whatif.record import (
    Recording,
    RecordingError,
    parse_export,
    parse_instant,
    parse_span,
    windows,
    write_export,
)


def batch(host: str, end: int, flows: list[flows_pb2.Flow], seq: int = 1) -> flows_pb2.FlowBatch:
    leaf = "leaf1" if host in ("h1", "h2") else "leaf2"
    return flows_pb2.FlowBatch(schema_version=1, host=host, leaf=leaf, window_start_ns=end - S, window_end_ns=end,
                               agent_id="a", sequence=seq, flows=flows)


def qp(lqpn: int, dst_ip: str, tx: int, channel: int | None = None, src_ip: str = "10.0.0.1") -> flows_pb2.Flow:
    f = flows_pb2.Flow(rdma_device="mlx5_0", port=1, lqpn=lqpn, rqpn=lqpn + 100, src_ip=src_ip, dst_ip=dst_ip,
                       udp_src_port=50000 + lqpn, udp_dst_port=4791, tx_bytes=tx, qp_generation=7)
    if channel is not None:
        f.nccl.comm_id, f.nccl.channel, f.nccl.peer_rank = "0xabc", channel, 1
    else:
        f.nccl.comm_id, f.nccl.peer_rank, f.nccl.channel = "0xabc", -1, -1
    return f


def test_batches_become_named_flows_per_window() -> None:
    rec = Recording(flow_batches=[
        batch("h1", S, [qp(1, "10.0.0.3", 100, channel=0), qp(2, "10.0.0.4", 0), qp(3, "10.9.9.9", 7)]),
        batch("h1", S, [qp(1, "10.0.0.3", 150, channel=0)], seq=2),  # the same window delivered again: replaces
        batch("h2", S, [qp(4, "10.0.0.3", 50, src_ip="10.0.0.2")]),
        batch("h1", 2 * S, [qp(1, "10.0.0.3", 200, channel=0)]),
    ])
    wins, lost = windows(rec, fabric())
    assert [(w.start_ns, w.end_ns) for w in wins] == [(0, S), (S, 2 * S)]
    first = {f.flow_id: f for f in wins[0].flows}
    assert set(first) == {"h1:mlx5_0/1/7", "h2:mlx5_0/4/7"}  # idle QP left out; the redelivery replaced the batch
    f = first["h1:mlx5_0/1/7"]
    assert (f.src_nic, f.dst_nic, f.bytes, f.channel, f.comm_id) == ("h1:mlx5_0", "h3:mlx5_0", 150, 0, "0xabc")
    assert f.coupling == "0xabc/ch0"
    assert first["h2:mlx5_0/4/7"].coupling == "h2:mlx5_0/4/7"  # a QP that is not a ring sender stands alone
    assert (lost.flows, lost.bytes) == (0, 0)


def test_unknown_nics_are_counted_not_dropped_silently() -> None:
    rec = Recording(flow_batches=[batch("h1", S, [qp(3, "10.9.9.9", 7)])])
    wins, lost = windows(rec, fabric())
    assert (lost.flows, lost.bytes) == (1, 7)
    assert wins[0].flows == ()


def test_export_round_trip_keeps_every_record() -> None:
    rec = Recording(flow_batches=[batch("h1", S, [qp(1, "10.0.0.3", 2**40, channel=3)])],
                    link_loads=[analytics_pb2.LinkLoad(schema_version=1, window_end_ns=S, link="x", measured_bytes=5)],
                    path_loads=[analytics_pb2.PathLoad(schema_version=1, window_end_ns=S, path_id="p", bytes=9)],
                    fims=[analytics_pb2.FimSample(schema_version=1, window_end_ns=S, group="fabric", fim=0.25)],
                    source="kafka://k:9092")
    buf = io.StringIO()
    n = write_export(rec, buf, 0, S)
    assert n == 5
    back = parse_export(io.StringIO(buf.getvalue()), "rec.jsonl")
    assert back.flow_batches == rec.flow_batches
    assert back.link_loads == rec.link_loads and back.path_loads == rec.path_loads and back.fims == rec.fims
    assert back.source == "kafka://k:9092"
    assert back.counts()[topics.FLOWS.name] == 1


@pytest.mark.parametrize(("text", "message"), [
    ("", "rec.jsonl: empty file"),
    ('{"format": "other", "version": 1}\n', "rec.jsonl:1: not a flowtracer-recording file"),
    ('{"format": "flowtracer-recording", "version": 2}\n', "rec.jsonl:1: flowtracer-recording version 2 is not"),
    ('{"format": "flowtracer-recording", "version": 1}\n{"topic": "x", "record": {}}\n',
     "rec.jsonl:2: unknown topic 'x'"),
    ('{"format": "flowtracer-recording", "version": 1}\n{oops\n', "rec.jsonl:2: not JSON"),
    ('{"format": "flowtracer-recording", "version": 1}\n'
     '{"topic": "flowtracer.flows.v1", "record": {"schema_version": 1, "hots": "h1"}}\n',
     "rec.jsonl:2: bad FlowBatch"),
    ('{"format": "flowtracer-recording", "version": 1}\n'
     '{"topic": "flowtracer.fim.v1", "record": {"schema_version": 3}}\n', "rec.jsonl:2: FimSample has schema_version 3"),
])
def test_bad_export_files_name_file_line_and_problem(text: str, message: str) -> None:
    with pytest.raises(RecordingError) as e:
        parse_export(io.StringIO(text), "rec.jsonl")
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_select_keeps_windows_ending_in_the_range() -> None:
    rec = Recording(flow_batches=[batch("h1", e * S, []) for e in (1, 2, 3, 4)])
    assert [b.window_end_ns for b in rec.select(S, 3 * S).flow_batches] == [2 * S, 3 * S]
    assert rec.window_ends() == [S, 2 * S, 3 * S, 4 * S]


def test_time_arguments() -> None:
    assert parse_instant("2026-11-22T15:00:00Z") == 1_795_359_600 * S
    assert parse_instant("2026-11-22T15:00:00") == 1_795_359_600 * S  # no zone: UTC
    assert parse_instant("1795359600") == 1_795_359_600 * S
    assert parse_instant("1795359600000000000") == 1_795_359_600 * S
    assert parse_span("90s") == 90 * S and parse_span("5m") == 300 * S and parse_span("500ms") == S // 2
    with pytest.raises(ValueError, match="not a time"):
        parse_instant("yesterday")
    with pytest.raises(ValueError, match="not a duration"):
        parse_span("5 parsecs")
