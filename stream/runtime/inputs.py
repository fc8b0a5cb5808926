"""Decode and check records from the input topics; anything unusable becomes a ``BadRecord`` with a reason."""

from __future__ import annotations

from google.protobuf.message import DecodeError, Message

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import counters_pb2, flows_pb2, internal_pb2

_TYPES: dict[str, type[Message]] = {
    topics.COUNTERS.name: counters_pb2.CounterBatch,
    topics.FLOWS.name: flows_pb2.FlowBatch,
    topics.ATTRIBUTIONS.name: internal_pb2.AttributionBatch,
    topics.GROUP_FIM.name: internal_pb2.GroupFimBatch,
}


class BadRecord(ValueError):
    """A record that goes to the dead-letter topic; ``str()`` says what was wrong, for a person."""


def decode(topic: str, value: bytes | None) -> Message:
    """The record's message, checked: known schema_version, identity fields set, sane timestamps."""
    cls = _TYPES.get(topic)
    if cls is None:
        raise BadRecord(f"no decoder for topic {topic!r}")
    if not value:
        raise BadRecord(f"empty value: expected a {cls.__name__}")
    msg = cls()
    try:
        msg.ParseFromString(value)
    except DecodeError as e:
        raise BadRecord(f"cannot decode {cls.__name__}: {e}") from None
    version = msg.schema_version  # type: ignore[attr-defined]
    if version != topics.SCHEMA_VERSION:
        raise BadRecord(f"unknown schema_version {version} in {cls.__name__} (this processor reads "
                        f"{topics.SCHEMA_VERSION})")
    if isinstance(msg, counters_pb2.CounterBatch):
        if not msg.switch or msg.timestamp_ns <= 0:
            raise BadRecord("CounterBatch without switch or timestamp_ns")
    elif isinstance(msg, flows_pb2.FlowBatch):
        if not msg.host or not msg.leaf or msg.window_end_ns <= msg.window_start_ns:
            raise BadRecord("FlowBatch without host, leaf or a window with end after start")
    elif isinstance(msg, (internal_pb2.AttributionBatch, internal_pb2.GroupFimBatch)) and msg.window_end_ns <= 0:
        raise BadRecord(f"{cls.__name__} without window_end_ns")
    return msg
