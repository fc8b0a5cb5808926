"""The ``none`` sink: no store, every write durable at once (the processor's Kafka outputs only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from flowtracer.stream.sinks.base import Rejected


class NullSinkConfig(BaseModel):
    """Nothing to configure."""

    model_config = ConfigDict(extra="forbid")


class NullSink:
    """No store: every write is durable at once (Kafka outputs only)."""

    name: ClassVar[str] = "none"
    Config: ClassVar[type[BaseModel]] = NullSinkConfig

    def __init__(self, config: NullSinkConfig | None = None) -> None:
        self.config = config or NullSinkConfig()

    def write(self, lines: Sequence[str]) -> int:
        return 0

    def durable(self, ticket: int) -> bool:
        return True

    def raise_if_failed(self) -> None:
        return None

    def take_rejected(self) -> list[Rejected]:
        return []

    def close(self, timeout: float = 10.0) -> None:
        return None
