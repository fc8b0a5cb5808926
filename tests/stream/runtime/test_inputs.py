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
