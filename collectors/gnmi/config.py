"""The gNMI collector's configuration: one validated model, defaults in the model.

Targets come from the topology file (every switch with a ``gnmi`` endpoint) and/or the
collector YAML's ``targets`` list; a YAML target with the name of a topology switch overrides
the fields it sets. Durations are durations (``250ms``, ``1s``, ``2m``, or a number of seconds).
Secrets are never inline: usernames may be, passwords come from ``password_env`` or
``password_file`` and live as ``SecretStr`` (redacted in logs and reprs). Errors name the field
and the line: ``collector.yaml:12: gnmi.subscriptions[2].sample_interval: ...``.

Loaded from the YAML, ``FLOWTRACER_COLLECTOR_*`` variables and ``flowtracer collect``'s flags, in that order
(:mod:`flowtracer.plumbing.component_config`); ``deploy/config/collector.yaml`` has every field with its default.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.collectors.gnmi.sharding import parse_shard
from flowtracer.fabric.platform_profiles import DEFAULT_PLATFORM, check_platform, load_profile
from flowtracer.fabric.topology import Topology
from flowtracer.plumbing.component_config import Bootstrap, Override, load_component, parse_component
from flowtracer.plumbing.config_yaml import describe_error, fmt_loc
from flowtracer.plumbing.durations import Duration
from flowtracer.plumbing.durations import parse_duration as parse_duration  # re-exported: part of this module's API
from flowtracer.plumbing.kafka_security import KafkaSecurity
from flowtracer.plumbing.target_security import Credentials as SharedCredentials
from flowtracer.plumbing.target_security import SecretError, TlsConfig
from flowtracer.schemas.topics import COUNTERS, SWITCH_CONGESTION


class ConfigError(ValueError):
    """A collector config is unreadable or invalid; ``str()`` names file, line and field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Mode(StrEnum):
    SAMPLE = "sample"
    ON_CHANGE = "on_change"
    TARGET_DEFINED = "target_defined"


class TargetMode(StrEnum):
    """How a target is read: one STREAM Subscribe (each subscription's own ``mode``), or the collector drives
    the interval: POLL (one Subscribe, a Poll every ``interval``), ONCE (a new Subscribe ONCE every
    ``interval``, for boxes that stream nothing) or GET (a GetRequest every ``interval``)."""

    STREAM = "stream"
    POLL = "poll"
    ONCE = "once"
    GET = "get"


class Encoding(StrEnum):
    PROTO = "proto"
    JSON_IETF = "json_ietf"
    JSON = "json"


class Subscription(_Model):
    """One gNMI subscription. ``sample_interval`` applies to SAMPLE (and TARGET_DEFINED)."""

    name: str
    path: str
    mode: Mode = Mode.SAMPLE
    sample_interval: Duration = 1.0
    heartbeat_interval: Duration = 0.0
    suppress_redundant: bool = False

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        parse_path(v)
        return v

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> Any:
        return v.lower().replace("-", "_") if isinstance(v, str) else v

    @property
    def sample_interval_ns(self) -> int:
        return round(self.sample_interval * 1e9)

    @property
    def heartbeat_interval_ns(self) -> int:
        return round(self.heartbeat_interval * 1e9)


_NI = "/network-instances/network-instance[name=default]/afts"
DEFAULT_SUBSCRIPTIONS: tuple[Subscription, ...] = (
    # State first: a switch's initial sync then names every next hop before its counters arrive.
    Subscription(name="oper-status", path="/interfaces/interface[name=*]/state/oper-status", mode=Mode.ON_CHANGE),
    Subscription(name="last-change", path="/interfaces/interface[name=*]/state/last-change", mode=Mode.ON_CHANGE),
    Subscription(name="port-speed", path="/interfaces/interface[name=*]/ethernet/state/port-speed",
                 mode=Mode.ON_CHANGE),
    Subscription(name="next-hop-ip", path=f"{_NI}/next-hops/next-hop[index=*]/state/ip-address",
                 mode=Mode.ON_CHANGE),
    Subscription(name="next-hop-interface", path=f"{_NI}/next-hops/next-hop[index=*]/interface-ref/state/interface",
                 mode=Mode.ON_CHANGE),
    Subscription(name="next-hop-groups",
                 path=f"{_NI}/next-hop-groups/next-hop-group[id=*]/next-hops/next-hop[index=*]/state",
                 mode=Mode.ON_CHANGE),
    Subscription(name="interface-counters", path="/interfaces/interface[name=*]/state/counters"),
    Subscription(name="next-hop-counters", path=f"{_NI}/next-hops/next-hop[index=*]/state/counters"),
    Subscription(name="aft-counters", path=f"{_NI}/counters/next-hops/next-hop[index=*]/state"),
)
"""Interface counters and both next-hop counter trees at 1 s SAMPLE; state ON_CHANGE."""

CONGESTION_SUBSCRIPTIONS: tuple[Subscription, ...] = (
    Subscription(name="queue-counters",
                 path="/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state"),
    Subscription(name="pfc-counters", path="/qos/interfaces/interface[interface-id=*]/pfc/statistics"),
)
"""What ``gnmi.congestion: true`` adds (SAMPLE every ``gnmi.congestion_interval``): egress-queue counters and
watermark (openconfig-qos) and per-priority PFC pause frames (SR Linux's layout); docs/congestion-counters.md says
which platform has which."""


class Tls(TlsConfig):
    """The shared TLS model (``plumbing/target_security.py``), with the PEM files checked when the config loads."""

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _exists(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_file():
            raise ValueError(f"no such file: {v}")
        return v


class Credentials(SharedCredentials):
    """The shared credential references (``plumbing/target_security.py``), with the password file checked on load."""

    @field_validator("password_file")
    @classmethod
    def _exists(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_file():
            raise ValueError(f"no such file: {v}")
        return v

    def resolve(self) -> tuple[str, SecretStr] | None:
        """As the shared model, with a missing secret raised as this config's ConfigError."""
        try:
            return super().resolve()
        except SecretError as e:
            raise ConfigError(str(e)) from None


class Target(_Model):
    """One switch to subscribe to."""

    name: str
    address: str
    port: int = Field(57400, ge=1, le=65535)
    tls: Tls = Tls()
    credentials: Credentials = Credentials()
    #: 32 for devices whose counters wrap at 2^32 (deltas are then corrected modulo 2^32).
    counter_bits: int = 64
    #: Only these subscriptions (by name); empty = all.
    subscriptions: tuple[str, ...] = ()
    #: stream | poll | once | get (TargetMode); the subscriptions' own ``mode`` applies to STREAM only.
    mode: TargetMode = TargetMode.STREAM
    #: Seconds between two reads the collector drives (poll, once, get); unused for stream.
    interval: Duration = 1.0
    #: The vendor profile (fabric/profiles/<platform>.yaml) that says where this switch keeps its counters.
    platform: str = DEFAULT_PLATFORM
    #: Seconds a connect (TLS + Capabilities) or a discovery call may take for this target (gnmic's ``timeout``);
    #: None = ``gnmi.connect_timeout`` (collector) or ``--timeout`` (discovery).
    timeout: Duration | None = None
    #: How DB paths are requested from a profile with ``db_target_namespace`` (SONiC): ``origin``
    #: (``sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet*``) or ``target`` (prefix target ``COUNTERS_DB``, path
    #: ``COUNTERS/Ethernet*``: the older telemetry container, which has no sonic-db origin; one DB per Subscribe).
    addressing: Literal["origin", "target"] = "origin"

    @field_validator("addressing")
    @classmethod
    def _addressing(cls, v: str, info: Any) -> str:
        platform = info.data.get("platform", DEFAULT_PLATFORM)
        if v == "target" and load_profile(platform).db_target is None:
            raise ValueError(f"target addressing is for DB paths (platform sonic), not platform {platform!r}")
        return v

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ValueError("must be > 0")
        return v

    @field_validator("platform")
    @classmethod
    def _platform(cls, v: str) -> str:
        load_profile(check_platform(v))  # a broken profile file fails here, naming file, line and key
        return v

    @field_validator("counter_bits")
    @classmethod
    def _bits(cls, v: int) -> int:
        if v not in (32, 64):
            raise ValueError("must be 32 or 64")
        return v

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v

    @field_validator("interval")
    @classmethod
    def _interval(cls, v: float, info: Any) -> float:
        mode = info.data.get("mode", TargetMode.STREAM)
        if mode is not TargetMode.STREAM and v <= 0:
            raise ValueError(f"mode {mode.value} needs an interval > 0")
        return v

    @property
    def polled(self) -> bool:
        """True when the collector drives the interval (poll, once, get)."""
        return self.mode is not TargetMode.STREAM

    @property
    def interval_ns(self) -> int:
        return round(self.interval * 1e9)


class TargetOverride(_Model):
    """A ``targets`` entry: a full target, or fields that override a topology switch's."""

    name: str
    address: str | None = None
    port: int | None = Field(None, ge=1, le=65535)
    tls: Tls | None = None
    credentials: Credentials | None = None
    counter_bits: int | None = None
    subscriptions: tuple[str, ...] | None = None
    mode: TargetMode | None = None
    interval: Duration | None = None
    platform: str | None = None
    timeout: Duration | None = None
    addressing: Literal["origin", "target"] | None = None

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v


class Backoff(_Model):
    """Reconnect delays: exponential with jitter from ``base`` to ``cap``; the attempt count
    resets after ``reset_after`` of healthy streaming. Configuration-class errors (bad
    credentials, TLS verification, unsupported paths) wait ``slow_retry`` instead."""

    base: Duration = 1.0
    cap: Duration = 60.0
    reset_after: Duration = 60.0
    slow_retry: Duration = 300.0


class Gnmi(_Model):
    """Subscription and session settings shared by all targets."""

    encoding: Encoding = Encoding.PROTO
    origin: str = ""
    updates_only: bool = False
    subscriptions: tuple[Subscription, ...] = DEFAULT_SUBSCRIPTIONS
    #: Also subscribe to the congestion leaves (CONGESTION_SUBSCRIPTIONS) and publish CongestionBatches. Off by
    #: default: with 8 queues a port has more queue leaves than interface counters (docs/congestion-counters.md).
    congestion: bool = False
    #: Sample interval of the congestion subscriptions.
    congestion_interval: Duration = 1.0
    connect_timeout: Duration = 10.0
    #: No message for this long = stalled stream (cancel, reconnect). 0 = max(heartbeat
    #: intervals, 3 x the shortest sample interval), at least 2 s.
    liveness_timeout: Duration = 0.0
    #: Sessions connecting (TLS + Capabilities + Subscribe) at the same time, at most.
    max_concurrent_connects: int = Field(32, ge=1)
    #: Initial connects are spread evenly over this long.
    start_spread: Duration = 2.0
    #: An open batch is emitted this long after its first notification if nothing newer came.
    batch_grace: Duration = 0.1
    #: A delta spanning more than this many sample intervals is flagged GAP.
    gap_factor: float = Field(1.5, gt=1.0)
    #: gRPC keepalive ping interval; 5 min = what gRPC servers accept by default without data
    #: (shorter intervals on quiet streams earn GOAWAY too_many_pings). Stalls are caught by
    #: ``liveness_timeout`` instead.
    keepalive_time: Duration = 300.0
    keepalive_timeout: Duration = 20.0
    backoff: Backoff = Backoff()
    #: Send gNMI username/password over plaintext gRPC (``tls.enabled: false``): refused unless set, then
    #: warned once per target. Labs only: anyone on the path reads the switch's password.
    allow_insecure_credentials: bool = False
    #: Cap for one gRPC message from a switch, bytes.
    max_receive_message_bytes: int = Field(64 * 1024 * 1024, ge=1024)

    @field_validator("subscriptions")
    @classmethod
    def _subs(cls, v: tuple[Subscription, ...]) -> tuple[Subscription, ...]:
        if not v:
            raise ValueError("at least one subscription is needed")
        names = {s.name for s in v}
        if clash := sorted(names & {s.name for s in CONGESTION_SUBSCRIPTIONS}):
            raise ValueError(f"subscription name(s) {', '.join(clash)} are reserved for gnmi.congestion")
        seen: set[str] = set()
        for i, s in enumerate(v):
            if s.name in seen:
                raise ValueError(f"subscription {i}: name {s.name!r} is used twice")
            seen.add(s.name)
            if s.mode is Mode.SAMPLE and s.sample_interval <= 0:
                raise ValueError(f"subscription {s.name!r}: SAMPLE needs a sample_interval > 0")
        return v

    @property
    def all_subscriptions(self) -> tuple[Subscription, ...]:
        """``subscriptions``, plus CONGESTION_SUBSCRIPTIONS when ``congestion`` is on: what targets get."""
        if not self.congestion:
            return self.subscriptions
        return self.subscriptions + tuple(s.model_copy(update={"sample_interval": self.congestion_interval})
                                          for s in CONGESTION_SUBSCRIPTIONS)

    def liveness_s(self) -> float:
        """The stalled-stream timeout in seconds (0 = none: only ON_CHANGE without heartbeat)."""
        if self.liveness_timeout > 0:
            return self.liveness_timeout
        samples = [s.sample_interval for s in self.all_subscriptions if s.mode is not Mode.ON_CHANGE]
        beats = [s.heartbeat_interval for s in self.all_subscriptions if s.heartbeat_interval > 0]
        if not samples and not beats:
            return 0.0
        return max(2.0, 3 * min(samples) if samples else 0.0, max(beats) * 1.5 if beats else 0.0)

    def interval_ns(self, family: str) -> int:
        """Shortest sample interval (ns) of the SAMPLE subscriptions under ``family``
        ("/interfaces", "/network-instances" or "/qos"); 0 when none samples it."""
        ivs = [s.sample_interval_ns for s in self.all_subscriptions
               if s.mode is Mode.SAMPLE and family in s.path]
        return min(ivs) if ivs else 0


class Kafka(_Model):
    """Where batches go. ``idempotence``: auto = kafka-python's detection (Kafka >= 0.11),
    false for Tansu (it claims the API but does not implement it reliably)."""

    bootstrap: Bootstrap = "127.0.0.1:9092"
    topic: str = COUNTERS.name
    #: Where CongestionBatches go (only produced when the switches send queue or PFC leaves).
    congestion_topic: str = SWITCH_CONGESTION.name
    acks: str = "all"
    linger: Duration = 0.02
    idempotence: bool | None = None
    max_buffer: int = Field(100_000, ge=1)
    max_buffer_bytes: int = Field(256 * 1024 * 1024, ge=1024)
    #: Bytes kafka-python fills per partition before sending (its ``batch_size``). Its default,
    #: 16 KiB, is smaller than one CounterBatch (~28 KB for 64 ports), so every record went alone
    #: in its own record batch: ~35% more producer CPU. One filling batch per partition at most
    #: (8 partitions: 4 MiB); below the broker's default message.max.bytes (1 MiB).
    batch_size: int = Field(512 * 1024, ge=0, le=1_000_000)
    #: Seconds ``close`` waits for the buffer to drain on shutdown.
    close_timeout: Duration = 10.0
    #: TLS / SASL towards the brokers (docs/operations.md, Security); ``--kafka-config`` replaces it.
    security: KafkaSecurity = KafkaSecurity()


class Shard(_Model):
    """This process is shard ``index`` of ``count``: it collects the targets that rendezvous
    hashing assigns to it; N processes with indexes 0..N-1 cover every target exactly once."""

    index: int = Field(0, ge=0)
    count: int = Field(1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        # ``--shard 1/2``, ``FLOWTRACER_COLLECTOR_SHARD=1/2`` or ``shard: 1/2`` in the YAML
        return dict(zip(("index", "count"), parse_shard(v), strict=True)) if isinstance(v, str) else v

    @field_validator("count")
    @classmethod
    def _count(cls, v: int, info: Any) -> int:
        idx = info.data.get("index", 0)
        if idx >= v:
            raise ValueError(f"shard index {idx} is not below the shard count {v}")
        return v


class Metrics(_Model):
    """Prometheus /metrics and /healthz; port 0 = off."""

    port: int = Field(0, ge=0, le=65535)
    host: str = "127.0.0.1"


class CollectorConfig(_Model):
    """The whole collector configuration (YAML root)."""

    #: Topology file: every switch with a ``gnmi`` endpoint is a target (``--topology``).
    topology: Path | None = None
    collector_id: str = Field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    kafka: Kafka = Kafka()
    gnmi: Gnmi = Gnmi()
    targets: tuple[TargetOverride, ...] = ()
    #: TLS and credentials for topology switches that do not set their own.
    tls: Tls | None = None
    credentials: Credentials | None = None
    shard: Shard = Shard()
    metrics: Metrics = Metrics()


def load_config(path: Path | None, flags: Sequence[Override] = (), *,
                environ: Mapping[str, str] | None = None) -> CollectorConfig:
    """The YAML file (None: none), then ``FLOWTRACER_COLLECTOR_*`` variables, then *flags*; ConfigError per problem."""
    return load_component(CollectorConfig, "collector", path, flags, environ=environ, error=ConfigError)


def parse_config(text: str, source: str = "<config>") -> CollectorConfig:
    """A collector config from YAML text alone (no environment, no flags)."""
    return parse_component(CollectorConfig, "collector", text, source, ConfigError)


def _target_error(i: int, name: str, e: ValidationError) -> ConfigError:
    """One line naming the ``targets`` entry, the target and the field."""
    loc, msg = describe_error(e.errors()[0], enum_choices=False)
    return ConfigError(f"targets[{i}] ({name}).{fmt_loc(loc)}: {msg}")


def resolve_targets(cfg: CollectorConfig, topology: Topology | None) -> list[Target]:
    """Topology switches with a gNMI endpoint, overridden/extended by ``cfg.targets``.

    Raises ConfigError for a YAML target that is neither a topology switch nor complete.
    """
    base: dict[str, Target] = {}
    if topology is not None:
        d = topology.defaults
        for sw in topology.switches:
            if sw.gnmi is None:
                continue
            tls_src = sw.gnmi.tls if "tls" in sw.gnmi.model_fields_set else (cfg.tls or d.tls)
            cred_src = (sw.gnmi.credentials if "credentials" in sw.gnmi.model_fields_set
                        else (cfg.credentials or d.credentials))
            port = sw.gnmi.port if "port" in sw.gnmi.model_fields_set else d.gnmi_port
            base[sw.name] = Target(
                name=sw.name, address=sw.gnmi.address, port=port, platform=sw.gnmi.platform,
                tls=Tls.model_validate(tls_src.model_dump()),
                credentials=Credentials.model_validate(cred_src.model_dump()))
    for i, o in enumerate(cfg.targets):
        fields = {k: getattr(o, k) for k in o.model_fields_set if getattr(o, k) is not None}
        if o.name in base:
            try:
                base[o.name] = Target.model_validate({**base[o.name].model_dump(), **fields})
            except ValidationError as e:
                raise _target_error(i, o.name, e) from None
        else:
            if o.address is None:
                raise ConfigError(f"targets[{i}]: {o.name!r} is not a topology switch, so it needs an address")
            fields.setdefault("tls", cfg.tls or Tls())
            fields.setdefault("credentials", cfg.credentials or Credentials())
            try:
                base[o.name] = Target(**fields)
            except ValidationError as e:
                raise _target_error(i, o.name, e) from None
    names = {s.name for s in cfg.gnmi.all_subscriptions}
    for t in base.values():
        unknown = [s for s in t.subscriptions if s not in names]
        if unknown:
            raise ConfigError(f"target {t.name}: unknown subscription(s) {unknown}; known: {sorted(names)}")
    return sorted(base.values(), key=lambda t: t.name)


def credentials_in_clear(target: Target) -> bool:
    """Whether connecting to ``target`` sends a username and password over plaintext gRPC (SecretError when its
    credentials cannot be resolved)."""
    return not target.tls.enabled and target.credentials.resolve() is not None


def check_transport_security(cfg: CollectorConfig, targets: list[Target]) -> list[str]:
    """Refuse credentials over plaintext (ConfigError naming the target) unless
    ``gnmi.allow_insecure_credentials``; return the warnings to log once each (plaintext credentials
    allowed, ``skip_verify``)."""
    warnings = []
    for t in targets:
        if t.tls.enabled and t.tls.skip_verify:
            warnings.append(f"target {t.name}: tls.skip_verify: the switch's certificate is not verified "
                            "(anyone on the path can pose as it); labs only")
        if not credentials_in_clear(t):
            continue
        if not cfg.gnmi.allow_insecure_credentials:
            raise ConfigError(f"target {t.name}: credentials would cross the network in clear (tls.enabled is "
                              "false); enable TLS, or set gnmi.allow_insecure_credentials: true in a lab")
        warnings.append(f"target {t.name}: username/password sent over plaintext gRPC "
                        "(gnmi.allow_insecure_credentials)")
    return warnings
