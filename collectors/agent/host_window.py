"""What one host's pipeline takes and gives per window: the sample a source read, its knobs, and the
serialized batches and counts it returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from flowtracer.collectors.agent.sources.log_tail import LogChunk
from flowtracer.collectors.agent.sources.rdma_json import QpCounter, QpRecord
from flowtracer.collectors.agent.sources.sysfs import SysfsView


@dataclass(slots=True)
class HostSample:
    """What a source read from one host at one instant.

    ``qps`` is None when the QP view is unavailable (sysfs-only mode); ``counters`` None when
    ``rdma statistic qp`` is unavailable. ``malformed`` counts input records skipped while reading.
    """

    host: str
    taken_ns: int
    qps: list[QpRecord] | None
    counters: list[QpCounter] | None
    sysfs: SysfsView
    nccl_lines: list[str] = field(default_factory=list)
    malformed: int = 0
    #: Port counters read just before the QP snapshot (``sysfs`` is read just after); None when
    #: both come from one instant (the simulator's snapshots).
    sysfs_before: SysfsView | None = None
    #: Per-priority PFC counters of each port's netdev (``ethtool_stats.pfc_stats``: priority -> {index into
    #: PFC_STATS: value}) by (device, port); empty when not read (``ethtool_pfc`` off, or ethtool failed).
    pfc: dict[tuple[str, int], dict[int, dict[int, int]]] = field(default_factory=dict)
    #: Scheduler job of each QP-owning pid that has one (``sources.proc_jobs``); the others get
    #: ``PipelineConfig.job_id``.
    jobs: dict[int, str] = field(default_factory=dict)
    #: NCCL log lines with their file and line numbers (what sources that follow files give; fed after
    #: ``nccl_lines``), history first (``log_tail.LogChunk``).
    nccl_chunks: list[LogChunk] = field(default_factory=list)


@dataclass(slots=True)
class WindowStats:
    """Counts of one host window, for the agent's self-metrics."""

    flows: int = 0
    exact: int = 0
    estimated: int = 0
    unresolved_dst: int = 0
    malformed: int = 0


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Per-host knobs (see ``config.AgentConfig`` for their documentation)."""

    agent_id: str
    default_mtu: int = 4096
    frame_overhead: int = 62
    initial_psn: int | None = None
    dscp: int = 0
    #: Job id of flows whose process names none (``HostSample.jobs``).
    job_id: str = ""
    #: Zone of the NCCL log's stamps (``AgentConfig.nccl_log_timezone``); None = the agent's local zone.
    nccl_zone: str | None = None


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """One serialized ``FlowBatch`` (``value``) and the fields its Kafka key comes from."""

    leaf: str
    host: str
    sequence: int
    value: bytes

