"""The host agent's configuration: one validated model, defaults in the model, durations as durations.

Load from a YAML file (``deploy/config/agent.yaml`` is the commented sample), ``FLOWTRACER_AGENT_*`` variables
and CLI flags, in that order (:mod:`flowtracer.plumbing.component_config`); a bad value fails fast naming the
place and the field. Nothing here is secret.
"""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flowtracer.collectors.agent.sources.nccl_line import nccl_zone
from flowtracer.plumbing import durations
from flowtracer.plumbing.component_config import Override, load_component
from flowtracer.plumbing.kafka_security import KafkaSecurity
from flowtracer.schemas.topics import FLOWS, QP_ENDS

_DURATION_HINT = "e.g. 1s, 500ms, 2m"


class ConfigError(ValueError):
    """A configuration value is invalid; ``str()`` names the field and the problem."""


def parse_duration(v: Any) -> timedelta:
    """``1``, ``1.5``, ``"500ms"``, ``"2s"``, ``"1m"`` or a timedelta -> timedelta (bare numbers are seconds)."""
    if isinstance(v, timedelta):
        return v
    if isinstance(v, bool):
        raise ValueError(f"{v!r} is not a duration ({_DURATION_HINT})")
    return timedelta(seconds=durations.parse_duration(
        v, hint=_DURATION_HINT, units=("ns", "us", "ms", "s", "m", "h"), negative=None))


def _short_hostname() -> str:
    return socket.gethostname().split(".", 1)[0]


class TracingConfig(BaseModel):
    """``tracing:``: hop-by-hop traces of each flow's own 5-tuple (docs/tracing.md)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    #: Off by default: probing sends UDP packets with small TTLs into the production fabric and makes
    #: every switch on the way answer with ICMP (CoPP-limited); an operator turns it on knowingly.
    enabled: bool = False
    #: Probe budget of this agent: probes per second, and how many may be saved up.
    probes_per_second: float = Field(50.0, gt=0, le=100_000)
    burst: int = Field(20, ge=1, le=100_000)
    #: Highest TTL probed (a leaf-spine path is 3 switches; 5-stage Clos 5).
    max_ttl: int = Field(8, ge=1, le=64)
    #: Wait for one probe's answer, and extra probes per TTL after a lost answer.
    timeout: timedelta = timedelta(seconds=1)
    retries: int = Field(2, ge=0, le=10)
    #: Re-trace a complete trace this old.
    refresh: timedelta = timedelta(minutes=10)
    #: A flow not seen in any window this long has ended (its trace gets a tombstone).
    expire: timedelta = timedelta(seconds=60)
    #: Traces in progress at once (each holds one socket on the kernel transport).
    max_concurrent: int = Field(64, ge=1, le=10_000)
    #: kernel: UDP sockets on this host; sim: the simulator's trace responder (source sim).
    transport: str = "kernel"
    #: roce: probes carry a BTH with the flow's destination QP (switches hashing on it place them like the flow)
    #: and stop at the destination leaf; udp: plain UDP probes of the 5-tuple. The kernel transport always sends
    #: plain UDP (docs/tracing.md, "RoCE-formed probes").
    probe_form: str = "roce"
    #: Host name -> network namespace (name under /run/netns, or a path) its probe sockets are made in
    #: (the simulator's kernel data plane); hosts not listed probe from the agent's own namespace.
    netns: dict[str, str] = {}

    @field_validator("timeout", "refresh", "expire", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> timedelta:
        return parse_duration(v)

    @field_validator("timeout", "refresh", "expire")
    @classmethod
    def _positive(cls, v: timedelta) -> timedelta:
        if v.total_seconds() <= 0:
            raise ValueError("must be positive")
        return v

    @field_validator("transport")
    @classmethod
    def _transport(cls, v: str) -> str:
        if v not in ("kernel", "sim"):
            raise ValueError(f"must be kernel or sim, not {v!r}")
        return v

    @field_validator("probe_form")
    @classmethod
    def _probe_form(cls, v: str) -> str:
        if v not in ("roce", "udp"):
            raise ValueError(f"must be roce or udp, not {v!r}")
        return v


class AgentConfig(BaseModel):
    """Everything ``flowtracer agent`` can be told. See docs/agent.md for each field."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    #: Flow source: "linux" (rdma tool + sysfs), "nccl-log" (linux + NCCL log tags), "sim".
    source: str = "linux"
    #: Kafka bootstrap "host:port[,host:port]"; None prints batches as JSON lines on stdout.
    kafka: str | None = None
    topic: str = FLOWS.name
    #: Idempotent producer: None = kafka-python decides from the broker; false for Tansu.
    kafka_idempotence: bool | None = None
    #: TLS / SASL towards the brokers (docs/operations.md, Security); ``--kafka-config`` replaces it.
    kafka_security: KafkaSecurity = KafkaSecurity()
    #: This host's record-signing key (hex, 32 bytes; ``flowtracer-host-keys``): every record sent (flows,
    #: path traces, QP ends) is signed as ``host``, and a processor given the master key refuses records a
    #: host sends for another (docs/operations.md, Record identity). One host per agent: not for source sim.
    host_key_file: Path | None = None
    #: Window length; windows are aligned to multiples of it since the Unix epoch.
    interval: timedelta = timedelta(seconds=1)
    #: Identifies this agent process in every FlowBatch.
    agent_id: str = Field(default_factory=lambda: f"{_short_hostname()}:{os.getpid()}")
    #: Host name as in the topology (linux sources); default: the short hostname.
    host: str = Field(default_factory=_short_hostname)
    topology: Path | None = None
    #: The rdma program and any prefix (e.g. ["nsenter", "-t", "1", "-n", "rdma"]).
    rdma_command: list[str] = ["rdma"]
    rdma_timeout: timedelta = timedelta(seconds=5)
    #: Also read per-QP counters (rdma statistic qp show); off = always PSN estimates.
    qp_counters: bool = True
    sysfs_root: Path = Path("/sys/class/infiniband")
    #: Port totals only (no rdma tool needed, no flows).
    sysfs_only: bool = False
    #: Read each RDMA port's netdev PFC counters with ``ethtool -S`` every window (one process per netdev and
    #: window; mlx5 names, docs/congestion-counters.md). The hw_counters congestion counters are read anyway.
    ethtool_pfc: bool = False
    #: The ethtool program and any prefix (e.g. ["nsenter", "-t", "1", "-n", "ethtool"]).
    ethtool_command: list[str] = ["ethtool"]
    #: How often the GID tables are re-read (they change only when addresses change).
    gid_refresh: timedelta = timedelta(seconds=60)
    #: NCCL_DEBUG=INFO log file(s), a glob (e.g. /var/log/nccl/*.log); required by source nccl-log.
    nccl_log: str | None = None
    #: Time zone the NCCL log's ``[YYYY-MM-DD HH:MM:SS]`` stamps are in (NCCL writes local time of its host): an
    #: IANA name such as "Europe/Zurich" or "UTC"; None = this agent's local zone.
    nccl_log_timezone: str | None = None
    #: The ready JSON `flowtracer sim` printed (source sim).
    sim_endpoints: Path | None = None
    #: Path MTU in bytes used for PSN estimates when the netdev MTU cannot be read.
    default_mtu: int = Field(4096, ge=256, le=4096)
    #: Header bytes per packet the PSN estimate adds to the MTU (RoCEv2/IPv4 frame: 62).
    frame_overhead_bytes: int = Field(62, ge=0, le=256)
    #: PSN every new QP starts at, if the deployment fixes one, to count a new QP's first window
    #: from PSNs; None (default; verbs picks random PSNs) = that window is a baseline.
    initial_psn: int | None = Field(None, ge=0, le=0xFFFFFF)
    #: DSCP reported when the NCCL log does not give NCCL_IB_TC.
    dscp: int = Field(0, ge=0, le=63)
    #: Scheduler job id of flows whose process names none in its cgroup or environment (default: $SLURM_JOB_ID).
    job_id: str = Field(default_factory=lambda: os.environ.get("SLURM_JOB_ID", ""))
    #: Where the QP-owning processes' cgroup and environ are read (linux sources; e.g. /host/proc when the
    #: agent runs in a container with the host's /proc mounted there). The sim source reads <host view>/proc.
    proc_root: Path = Path("/proc")
    #: Exchange QP ends with the other agents over Kafka (flowtracer.qp-ends.v1) to find each
    #: QP's remote address (dst_ip). None = on for the linux and nccl-log sources with Kafka (one
    #: agent per host sees no remote QP otherwise), off for sim (one process reads every host).
    peer_exchange: bool | None = None
    #: The exchange topic (one per fabric when fabrics share a Kafka cluster).
    peer_topic: str = QP_ENDS.name
    #: Republish an unchanged QP table at least this often (new agents learn it within this).
    peer_refresh: timedelta = timedelta(seconds=30)
    #: How long a window may wait for the other agents' tables of the same boundary when QPs
    #: appeared whose peer is unknown (so a new connection's first window has its dst_ip too);
    #: at most half the interval.
    peer_wait: timedelta = timedelta(milliseconds=300)
    #: Forget another host's QP table this old (its agent stopped; QP numbers get reused).
    peer_max_age: timedelta = timedelta(seconds=90)
    #: Self-metrics HTTP port (/metrics, /healthz); 0 = off.
    metrics_port: int = Field(0, ge=-1, le=65535)
    #: Records buffered while Kafka is unreachable (oldest dropped beyond).
    max_buffer: int = Field(100_000, ge=1)
    #: Stop after this many windows (0 = run until interrupted).
    max_windows: int = Field(0, ge=0)
    #: Path tracing of each flow's own 5-tuple (docs/tracing.md).
    tracing: TracingConfig = Field(default_factory=TracingConfig)

    @field_validator("interval", "rdma_timeout", "gid_refresh", "peer_refresh", "peer_max_age", "peer_wait",
                     mode="before")
    @classmethod
    def _duration(cls, v: Any) -> timedelta:
        return parse_duration(v)

    @field_validator("interval")
    @classmethod
    def _interval(cls, v: timedelta) -> timedelta:
        ns = round(v.total_seconds() * 1e9)
        if ns < 10_000_000:
            raise ValueError("must be at least 10ms")
        if 1_000_000_000 % ns and ns % 1_000_000_000:
            raise ValueError("must divide a second or be a whole number of seconds, so windows align across hosts")
        return v

    @field_validator("nccl_log_timezone")
    @classmethod
    def _zone(cls, v: str | None) -> str | None:
        nccl_zone(v)
        return v

    @field_validator("rdma_command", "ethtool_command", mode="before")
    @classmethod
    def _command_words(cls, v: Any) -> Any:
        # A flag or variable gives the command as one string, the way a shell would split it.
        return shlex.split(v) if isinstance(v, str) else v

    @field_validator("rdma_command", "ethtool_command")
    @classmethod
    def _command(cls, v: list[str]) -> list[str]:
        if not v or not v[0]:
            raise ValueError("must name a program")
        return v

    @model_validator(mode="after")
    def _one_host_signs(self) -> AgentConfig:
        if self.host_key_file is not None and self.source == "sim":
            raise ValueError("host_key_file signs as one host; source sim reads many (leave it unset)")
        return self

    @property
    def interval_ns(self) -> int:
        return round(self.interval.total_seconds() * 1e9)

    @property
    def exchanges_peers(self) -> bool:
        """Whether this agent exchanges QP ends (``peer_exchange``, resolved; needs Kafka)."""
        if self.kafka is None:
            return False
        return self.peer_exchange if self.peer_exchange is not None else self.source != "sim"


def load_config(path: Path | None = None, flags: Sequence[Override] = (), *,
                environ: Mapping[str, str] | None = None) -> AgentConfig:
    """An ``AgentConfig`` from a YAML file (optional), then ``FLOWTRACER_AGENT_*`` variables, then *flags*
    (:mod:`flowtracer.plumbing.component_config`); ``ConfigError`` names the place and the field of each problem."""
    return load_component(AgentConfig, "agent", path, flags, environ=environ, error=ConfigError)
