"""Helpers of the pipeline tests: run until a window's path loads are out; read a topic back."""

from __future__ import annotations

import time

from kafka import KafkaConsumer

from flowtracer.demo.local_pipeline import LocalPipeline
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2


def until_window(pipeline: LocalPipeline, end_ns: int, timeout_s: float) -> None:
    """Run until the processor has put out path loads of the window ending at ``end_ns`` (ns)."""
    consumer = KafkaConsumer(topics.PATH_LOADS.name, bootstrap_servers=pipeline.bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for ms in consumer.poll(timeout_ms=1000).values():
                if any(analytics_pb2.PathLoad.FromString(m.value).window_end_ns >= end_ns for m in ms):
                    return
            pipeline.check()
        raise AssertionError(f"no path loads of the window ending {end_ns} within {timeout_s} s")
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of ``topic`` from the beginning, until 4 s bring nothing new."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=4000, enable_auto_commit=False)
    try:
        return [(m.key, m.value) for m in consumer]
    finally:
        consumer.close()
