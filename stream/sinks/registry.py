"""The sink registry: names come from the sink classes themselves; ``make_sink`` builds the configured one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from flowtracer.plumbing.config_yaml import format_validation_error
from flowtracer.stream.sinks.base import Sink
from flowtracer.stream.sinks.file import FileSink
from flowtracer.stream.sinks.influx import InfluxSink
from flowtracer.stream.sinks.null import NullSink

SINKS: dict[str, type[Sink]] = {cls.name: cls for cls in (NullSink, InfluxSink, FileSink)}
"""Sink classes by :attr:`Sink.name`, e.g. ``SINKS["influx"]``."""


def make_sink(name: str, config: Mapping[str, Any]) -> Sink:
    """``SINKS[name]`` built from *config*; ValueError naming the field that is wrong."""
    if name not in SINKS:
        raise ValueError(f"sink {name!r}: unknown (one of {', '.join(sorted(SINKS))})")
    cls = SINKS[name]
    try:
        return cls(cls.Config.model_validate(dict(config)))
    except ValidationError as e:
        raise ValueError(format_validation_error(e, "sink", root=name)) from None
