"""The processor's configuration: the fetch wait's default follows the broker."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from flowtracer.stream.runtime.config import KAFKA_FETCH_WAIT_MS, TANSU_FETCH_WAIT_MS, ProcessorConfig


def test_the_fetch_wait_is_short_on_tansu_and_fausts_elsewhere_unless_set() -> None:
    cfg = {"topology": Path("fabric.yaml"), "kafka": "127.0.0.1:9092"}
    assert ProcessorConfig(**cfg).fetch_wait_ms == KAFKA_FETCH_WAIT_MS == 1_500
    assert ProcessorConfig(**cfg, tansu=True).fetch_wait_ms == TANSU_FETCH_WAIT_MS == 100
    assert ProcessorConfig(**cfg, tansu=True, fetch_wait_ms=None).fetch_wait_ms == TANSU_FETCH_WAIT_MS
    assert ProcessorConfig(**cfg, tansu=True, fetch_wait_ms=700).fetch_wait_ms == 700
    with pytest.raises(ValidationError, match="fetch_wait_ms"):
        ProcessorConfig(**cfg, fetch_wait_ms=0)
