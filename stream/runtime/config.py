"""The processor's configuration: one validated model, defaults in the model, durations in seconds.

``flowtracer process`` fills it from a YAML file, ``FLOWTRACER_PROCESSOR_*`` variables and its flags, in that
order (:mod:`flowtracer.plumbing.component_config`); ``deploy/config/processor.yaml`` is the commented sample.
Durations (``*_s``) are seconds or a duration such as ``500ms``.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flowtracer.plumbing.component_config import Bootstrap
from flowtracer.plumbing.durations import Duration
from flowtracer.plumbing.kafka_security import KafkaSecurity
from flowtracer.schemas.topics import DEFAULT_PARTITIONS

TANSU_FETCH_WAIT_MS = 100
"""The fetch wait on the embedded broker, ms: each internal hop's latency floor there (``fetch_wait_ms``)."""
KAFKA_FETCH_WAIT_MS = 1_500
"""The fetch wait elsewhere, ms: Faust's own (it only bounds idle polls on Apache Kafka)."""


class InfluxSettings(BaseModel):
    """``influx:``: write points to InfluxDB 2 when ``url`` is set. The token is never here: ``token_file``,
    else ``$FLOWTRACER_INFLUX_TOKEN`` / ``$INFLUX_TOKEN``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = None
    org: str = "flowtracer"
    bucket: str = "flowtracer"
    token_file: Path | None = None


class LineProtocolSettings(BaseModel):
    """``line_protocol:``: write InfluxDB line protocol to ``file`` (without InfluxDB), rotated to FILE.1, FILE.2,
    ... once it holds ``max_bytes`` bytes; ``keep`` rotated files are kept."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Path | None = None
    max_bytes: int = Field(1 << 30, ge=1)
    keep: int = Field(3, ge=0)


class ProcessorConfig(BaseModel):
    """Everything ``flowtracer process`` needs. Secrets (the InfluxDB token) are not here: the sink
    reads them from the environment or a file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topology: Path
    kafka: Bootstrap = Field(description="bootstrap servers, host:port[,host:port]")
    app_id: str = "flowtracer-processor"
    #: TLS / SASL towards the brokers (``--kafka-config``; docs/operations.md, Security).
    kafka_security: KafkaSecurity = KafkaSecurity()
    #: Partitions of the input topics (counters, flows, attributions); all must have this many.
    partitions: int = Field(DEFAULT_PARTITIONS, ge=1, le=1024)
    resolver: str = "hash"
    #: Hop of the windows in seconds: the collectors' sample interval and the agents' window.
    hop_s: Duration = Field(1.0, gt=0)
    #: Length of the rolling FIM window in seconds (a multiple of the hop).
    rolling_window_s: Duration = Field(10.0, gt=0)
    #: A window is finalized at the latest this long (wall clock) after its first record.
    grace_s: Duration = Field(3.0, gt=0)
    #: Records stamped more than this far ahead of the worker's clock go to the dead-letter topic (s).
    max_ahead_s: Duration = Field(10.0, gt=0)
    #: A flow is heavy when it fills this share of a member's capacity in a hop (collisions).
    heavy_share: float = Field(0.1, gt=0, le=1)
    #: A collision is claimed only from placements at least this confident (and whole on one member).
    collision_confidence: float = Field(0.9, ge=0, le=1)
    #: Trace resolver: how long (seconds after it finished) a path trace without ``valid_until_ns`` (an agent before
    #: that field) places its flow; stamped traces hold until their ``valid_until_ns`` (docs/tracing.md).
    trace_max_age_s: Duration = Field(1200.0, gt=0)
    #: Flows named per link in attributions and per collision.
    max_flows_per_link: int = Field(16, ge=1)
    #: Tansu compatibility (embedded broker): Faust's changelog recovery checks each partition's end offset by a
    #: fetch, since Tansu's ListOffsets(latest) is wrong for batched partitions (faust_driver.py).
    tansu: bool = False
    #: How long the broker may hold a fetch that finds no records, ms (Kafka's ``fetch.max.wait.ms``); unset:
    #: ``TANSU_FETCH_WAIT_MS`` with ``tansu``, else ``KAFKA_FETCH_WAIT_MS``. Tansu answers such a fetch only when the
    #: wait is over, so there it is the latency floor of each of the worker's three internal Kafka hops; Apache Kafka
    #: answers as soon as ``fetch_min_bytes`` arrived, so there it only bounds idle polls (docs/operations.md).
    fetch_wait_ms: int = Field(KAFKA_FETCH_WAIT_MS, ge=1, le=60_000)
    #: Consumer group session timeout in seconds; low so that a joining worker is not kept waiting.
    session_timeout_s: Duration = Field(4.0, gt=0)
    #: Port of the worker's web server (the dashboard; Faust's own views are off, runtime/web.py); 0 disables it.
    web_port: int = Field(0, ge=0, le=65535)
    #: Address the worker's web server listens on (the dashboard is for this machine: loopback). Faust's own
    #: environment settings (WEB_BIND, ...) are not read (runtime/web.py).
    web_bind: str = "127.0.0.1"
    #: Where Faust keeps its local data (table stores).
    data_dir: Path = Path(".flowtracer-processor")
    #: Prometheus /metrics port; 0 = off.
    metrics_port: int = Field(0, ge=0, le=65535)
    influx: InfluxSettings = InfluxSettings()
    line_protocol: LineProtocolSettings = LineProtocolSettings()
    #: Master key file (hex) the agents' per-host keys derive from: every flow batch and path trace must then be
    #: signed by the host it names (docs/operations.md, Record identity).
    host_key_master_file: Path | None = None

    @model_validator(mode="before")
    @classmethod
    def _fetch_wait_default(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("fetch_wait_ms") is None:
            return {**data, "fetch_wait_ms": TANSU_FETCH_WAIT_MS if data.get("tansu") else KAFKA_FETCH_WAIT_MS}
        return data

    @field_validator("resolver")
    @classmethod
    def _resolver(cls, v: str) -> str:
        from flowtracer.stream.resolvers.registry import RESOLVERS  # deferred: the resolvers load numpy and more

        if v not in RESOLVERS:
            raise ValueError(f"{v!r} is not one of: {', '.join(sorted(RESOLVERS))}")
        return v

    @field_validator("web_bind")
    @classmethod
    def _web_bind(cls, v: str) -> str:
        try:
            ipaddress.ip_address(v)
        except ValueError:
            raise ValueError(f"{v!r} is not an IP address") from None
        return v

    @model_validator(mode="after")
    def _windows(self) -> ProcessorConfig:
        hops = self.rolling_window_s / self.hop_s
        if abs(hops - round(hops)) > 1e-9:
            raise ValueError(f"rolling_window_s {self.rolling_window_s} is not a multiple of hop_s {self.hop_s}")
        return self

    @property
    def hop_ns(self) -> int:
        return round(self.hop_s * 1e9)

    @property
    def grace_ns(self) -> int:
        return round(self.grace_s * 1e9)

    @property
    def rolling_hops(self) -> int:
        return round(self.rolling_window_s / self.hop_s)
