"""``flowtracer diagnose``'s configuration: one validated model, defaults in the model.

Filled from a YAML file, ``FLOWTRACER_DIAGNOSE_*`` variables and the command's flags, in that order
(:mod:`flowtracer.plumbing.component_config`); ``deploy/config/diagnose.yaml`` is the commented sample. Durations
(``*_s``) are seconds or a duration such as ``500ms``. The service's own runtime settings
(:class:`~flowtracer.stream.diagnosis.service.DiagnoseConfig`) are built from it with the topology loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from flowtracer.plumbing.component_config import Bootstrap
from flowtracer.plumbing.durations import Duration
from flowtracer.plumbing.kafka_security import KafkaSecurity
from flowtracer.stream.runtime.config import InfluxSettings, LineProtocolSettings


class DiagnoseSettings(BaseModel):
    """Everything ``flowtracer diagnose`` can be told. No secrets: the InfluxDB token comes from ``token_file`` or
    the environment, Kafka passwords from ``kafka_security``'s files or variables."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topology: Path
    #: Kafka bootstrap servers, host:port[,host:port].
    kafka: Bootstrap
    #: TLS / SASL towards the brokers (docs/operations.md, Security); ``--kafka-config`` replaces it.
    kafka_security: KafkaSecurity = KafkaSecurity()
    #: The processor's window hop, seconds (its ``hop_s``).
    hop_s: Duration = Field(1.0, ge=0.001)
    #: A window without a fabric FIM sample is diagnosed this long after its first record reached the service, s.
    grace_s: Duration = Field(10.0, ge=0)
    #: Read the output topics from now on (latest) or replay what they hold (earliest).
    start: Literal["latest", "earliest"] = "latest"
    #: How long to wait for the output topics to exist before giving up (exit 1), s.
    topic_wait_s: Duration = Field(30.0, ge=0)
    influx: InfluxSettings = InfluxSettings()
    line_protocol: LineProtocolSettings = LineProtocolSettings()
    #: Prometheus /metrics port on 127.0.0.1; 0 = off.
    metrics_port: int = Field(0, ge=0, le=65535)
