"""Bad input is named precisely; good input decodes."""

import pytest

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import counters_pb2, flows_pb2
from flowtracer.stream.runtime.inputs import BadRecord, decode


def test_good_records_decode() -> None:
    cb = counters_pb2.CounterBatch(schema_version=1, switch="leaf01", timestamp_ns=5)
    assert decode(topics.COUNTERS.name, cb.SerializeToString()) == cb


@pytest.mark.parametrize(("topic", "value", "reason"), [
    (topics.COUNTERS.name, b"\xff\xff\xff", "cannot decode CounterBatch"),
    (topics.COUNTERS.name, b"", "empty value: expected a CounterBatch"),
    (topics.COUNTERS.name, counters_pb2.CounterBatch(schema_version=7, switch="x", timestamp_ns=1).SerializeToString(),
     "unknown schema_version 7 in CounterBatch"),
    (topics.FLOWS.name, flows_pb2.FlowBatch(schema_version=1, host="h").SerializeToString(),
     "FlowBatch without host, leaf"),
    ("some.topic", b"x", "no decoder for topic 'some.topic'"),
])
def test_bad_records_are_named(topic: str, value: bytes, reason: str) -> None:
    with pytest.raises(BadRecord, match=reason):
        decode(topic, value)


def test_path_traces_decode_tombstones_and_bad_ones_are_named() -> None:
    from flowtracer.schemas.v1 import traces_pb2
    from flowtracer.stream.runtime.inputs import decode_trace

    t = traces_pb2.PathTrace(schema_version=1, flow_id="h:mlx5_0/5/1", src_nic="h:mlx5_0", finished_ns=7)
    assert decode_trace(b"h:mlx5_0/5/1", t.SerializeToString()) == ("h:mlx5_0/5/1", t)
    assert decode_trace(b"h:mlx5_0/5/1", None) == ("h:mlx5_0/5/1", None)  # tombstone: the flow ended
    with pytest.raises(BadRecord, match="tombstone without a key"):
        decode_trace(None, None)
    with pytest.raises(BadRecord, match="under key 'other'"):
        decode_trace(b"other", t.SerializeToString())
    with pytest.raises(BadRecord, match="PathTrace without flow_id"):
        decode_trace(b"x", traces_pb2.PathTrace(schema_version=1, flow_id="x").SerializeToString())
    with pytest.raises(BadRecord, match="cannot decode PathTrace"):
        decode_trace(b"x", b"\xff\xff\xff")
