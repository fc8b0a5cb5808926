"""What the simulated cluster runs: training jobs, background flows, slow nodes and scheduled faults.

A workload is a small YAML or JSON file, or one of the named presets (``PRESETS``) built from a few
options. Sizes are bytes or strings such as "1GiB", "256MiB", "64MB"; durations are seconds or
strings such as "50ms", "2s", "100us"; rates are bit/s or strings such as "200G".

Example::

    seed: 7
    jobs:
      - name: llm
        hosts: all                # "all", a count (the first N hosts) or a list of host names
        nics_per_node: all        # NIC k of each host is rank k's NIC (rail k)
        channels: 2               # NCCL channels (rings) per NIC pair
        qps_per_connection: 1     # NCCL_IB_QPS_PER_CONNECTION
        compute_gap: 50ms         # GPU compute between communication bursts
        ops:
          - {collective: allreduce, algorithm: ring, size: 1GiB}
          - {collective: alltoall, size: 256MiB, count: 2}
    node_groups:                  # heterogeneity: slower NICs or older GPUs
      - {hosts: [host03], nic_rate: 200G, compute_scale: 1.5}
    background:                   # e.g. storage or checkpoint traffic, steady rate per flow
      - {flows: 2, rate: 20G}
    faults:
      - {at: 10s, link_down: "leaf01:Ethernet5"}
      - {at: 20s, link_up: "leaf01:Ethernet5"}
      - {at: 12s, degrade: "spine01:Ethernet2", capacity: 0.5}
      - {at: 30s, reboot: spine02, down_for: 3s}
      - {at: 40s, nic_stall: "host05:mlx5_0"}     # the NIC stops draining: a PFC pause storm
      - {at: 45s, nic_resume: "host05:mlx5_0"}
      - {at: 50s, nh_withdraw: "leaf02:Ethernet5"}  # the next hop leaves leaf02's ECMP groups, the cable stays up
      - {at: 55s, nh_restore: "leaf02:Ethernet5"}
      - {at: 60s, nh_weight: "leaf03:Ethernet5", weight: 2}   # the AFT weight; the model hashes 2:1 with it
      - {at: 65s, gnmi_silent: spine01}    # its gNMI server keeps its sessions but sends nothing; it forwards
      - {at: 70s, gnmi_resume: spine01}
      - {at: 65s, agent_stop: host02}      # the host's view stops updating; the host forwards
      - {at: 70s, agent_resume: host02}
    flows:                        # explicit steady flows (incast, collisions), one QP each
      - {src: "host01:mlx5_0", dst: "host05:mlx5_0", rate: 400G}   # job: "42" names its scheduler job
    congestion:                   # the RoCE congestion model (docs/congestion.md); absent = off
      pfc: true                   # false: tail drops instead of pauses
      kmin: 150KB

``WorkloadError`` names the file and the field of any problem in one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from flowtracer.fabric.speeds import parse_speed
from flowtracer.plumbing import durations
from flowtracer.plumbing.config_yaml import format_validation_error, read_text
from flowtracer.sim.fabric.collectives import Algorithm, Collective


class WorkloadError(ValueError):
    """A workload file or preset is invalid; ``str()`` is one line naming the place and the problem."""


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B?\s*$", re.IGNORECASE)


def parse_size(value: object) -> int:
    """Bytes from an int or "1GiB" (binary), "64MB"/"64M" (decimal), "4096"."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size must not be negative, got {value}")
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m:
            exp = " KMGT".index(m.group(2).upper() or " ")
            base = 1024 if m.group(3) else 1000
            return int(float(m.group(1)) * base**exp)
    raise ValueError(f"{value!r} is not a size (examples: 1GiB, 256MiB, 64MB, 4096)")


def parse_duration(value: object) -> float:
    """Seconds from a number or "50ms", "2s", "100us", "1.5m"."""
    return durations.parse_duration(value, hint="examples: 50ms, 2s, 100us",
                                    negative="duration must not be negative, got {value}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _duration(v: Any) -> Any:
    return None if v is None else parse_duration(v)


class Op(_Model):
    """One collective call, repeated ``count`` times back to back (e.g. gradient buckets)."""

    collective: Collective
    algorithm: Algorithm = Algorithm.RING
    #: Per-rank buffer in bytes (all-reduce buffer; all-gather output; reduce-scatter input;
    #: all-to-all send buffer; send/recv message).
    size: int = Field(1 << 30, ge=0)
    count: int = Field(1, ge=1)
    #: Element type, for the COLL log lines (count = size / element size).
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        return parse_size(v)

    @model_validator(mode="after")
    def _tree_only_allreduce(self) -> Op:
        if self.algorithm is Algorithm.TREE and self.collective is not Collective.ALLREDUCE:
            raise ValueError("algorithm 'tree' exists only for allreduce")
        return self


class Job(_Model):
    """A training job: one NCCL communicator over its ranks, iterating compute then ``ops``."""

    name: str = "job"
    hosts: Literal["all"] | int | tuple[str, ...] = "all"
    nics_per_node: Literal["all"] | int = "all"
    channels: int = Field(2, ge=1, le=64)
    qps_per_connection: int = Field(1, ge=1, le=128)
    #: Seconds of GPU compute before each burst of ops (scaled by the slowest node's compute_scale).
    compute_gap: float = Field(0.05, ge=0)
    #: Seconds after simulation start when the communicator is created.
    start: float = Field(0.0, ge=0)
    #: Stop after this many iterations (None: run until the simulation ends).
    iterations: int | None = Field(None, ge=1)
    #: Destroy and re-create the communicator (new QPs) after this many seconds, at an iteration end.
    recreate_every: float | None = Field(None, gt=0)
    #: Fixed cost of every op in seconds (kernel launch, protocol handshakes); also bounds how many
    #: events a tiny op can cause.
    op_latency: float = Field(20e-6, ge=1e-6)
    ops: tuple[Op, ...] = (Op(collective=Collective.ALLREDUCE),)

    @field_validator("compute_gap", "start", "op_latency", "recreate_every", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> Any:
        return _duration(v)

    @field_validator("ops")
    @classmethod
    def _ops(cls, v: tuple[Op, ...]) -> tuple[Op, ...]:
        if not v:
            raise ValueError("a job needs at least one op")
        return v


class NodeGroup(_Model):
    """Hosts that are slower: NICs capped below line rate and/or GPUs that compute longer."""

    hosts: tuple[str, ...]
    #: Most a NIC of these hosts sends or receives, bit/s (e.g. PCIe-limited); None = line rate.
    nic_rate: int | None = None
    #: Compute time multiplier (1.5 = an older GPU generation takes 50% longer).
    compute_scale: float = Field(1.0, gt=0)

    @field_validator("nic_rate", mode="before")
    @classmethod
    def _rate(cls, v: Any) -> Any:
        return None if v is None else parse_speed(v)


class Background(_Model):
    """Steady flows between random NIC pairs (storage, checkpoints), one QP each."""

    flows: int = Field(1, ge=1)
    #: Rate each flow asks for, bit/s (it gets less when its links are full).
    rate: int = 10_000_000_000
    hosts: Literal["all"] | tuple[str, ...] = "all"
    seed: int = 0

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, v: Any) -> Any:
        return parse_speed(v)


class SteadyFlow(_Model):
    """One QP sending from ``src`` to ``dst`` (``host:rdma_device``) for ever at up to ``rate`` bit/s of
    payload (None: as much as max-min fairness gives). ``job``: the scheduler's job the sending process runs in
    ("" none: a process outside any job, as an ``ib_write_bw`` started from a shell is)."""

    src: str
    dst: str
    rate: int | None = None
    job: str = ""

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, v: Any) -> Any:
        return None if v is None else parse_speed(v)


class Congestion(_Model):
    """The RoCE congestion model's settings (docs/congestion.md); sizes in bytes, times in seconds."""

    #: PFC on RoCE's priority: pauses instead of drops (False: tail drops at ``buffer``).
    pfc: bool = True
    kmin: int = 150_000
    kmax: int = 1_500_000
    pmax: float = Field(0.1, gt=0, le=1)
    xoff: int = 3_000_000
    buffer: int = 3_000_000
    cnp_interval: float = Field(50e-6, gt=0)
    rate_ai: int = 40_000_000
    rate_timer: float = Field(55e-6, gt=0)
    recovery: float = Field(275e-6, ge=0)
    ack_timeout: float = Field(4.096e-6 * 2**20, gt=0)
    rtt: float = Field(10e-6, ge=0)

    @field_validator("kmin", "kmax", "xoff", "buffer", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        return parse_size(v)

    @field_validator("cnp_interval", "rate_timer", "recovery", "ack_timeout", "rtt", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> Any:
        return _duration(v)

    @field_validator("rate_ai", mode="before")
    @classmethod
    def _rate(cls, v: Any) -> Any:
        return parse_speed(v)

    @model_validator(mode="after")
    def _order(self) -> Congestion:
        if not 0 < self.kmin < self.kmax:
            raise ValueError("need 0 < kmin < kmax")
        if self.pfc and self.xoff <= self.kmax:
            raise ValueError("xoff must be above kmax (ECN must act before PFC)")
        return self


FAULT_KINDS = ("link_down", "link_up", "degrade", "restore", "reboot", "nic_stall", "nic_resume", "nh_withdraw",
               "nh_restore", "nh_weight", "gnmi_silent", "gnmi_resume", "agent_stop", "agent_resume")


class Fault(_Model):
    """One scheduled fault; exactly one of link_down, link_up, degrade, restore, reboot, nic_stall, nic_resume,
    nh_withdraw, nh_restore, nh_weight (a switch's next hop ``switch:port``: withdrawn from its ECMP groups, back, or
    its AFT ``weight`` set; see faults.py), gnmi_silent, gnmi_resume (a switch's gNMI server stops / resumes
    sending while the switch forwards), agent_stop, agent_resume (a host's reporting stops / resumes while the host
    forwards).

    Links are named by one end, ``switch:port`` (or ``host:rdma_device`` for a host cable); a NIC
    that stops draining its receive queue (``nic_stall``, a pause storm's origin) by ``host:rdma_device``.
    """

    at: float
    link_down: str | None = None
    link_up: str | None = None
    degrade: str | None = None
    #: For degrade: fraction of the link's capacity left, in (0, 1].
    capacity: float = Field(0.5, gt=0, le=1)
    restore: str | None = None
    reboot: str | None = None
    #: For reboot: seconds the switch is unavailable.
    down_for: float = 2.0
    nic_stall: str | None = None
    nic_resume: str | None = None
    nh_withdraw: str | None = None
    nh_restore: str | None = None
    nh_weight: str | None = None
    #: For nh_weight: the next hop's AFT weight in its groups (1 = plain ECMP again).
    weight: int = Field(1, ge=1)
    gnmi_silent: str | None = None
    gnmi_resume: str | None = None
    agent_stop: str | None = None
    agent_resume: str | None = None

    @field_validator("at", "down_for", mode="before")
    @classmethod
    def _durations(cls, v: Any) -> Any:
        return _duration(v)

    @model_validator(mode="after")
    def _one(self) -> Fault:
        kinds = [k for k in FAULT_KINDS if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError(f"give exactly one of {', '.join(FAULT_KINDS)}")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in FAULT_KINDS if getattr(self, k))

    @property
    def target(self) -> str:
        return str(getattr(self, self.kind))


class Workload(_Model):
    """Everything the engine runs. ``mtu``: RoCE path MTU (payload bytes per packet)."""

    seed: int = 1
    mtu: Literal[256, 512, 1024, 2048, 4096] = 4096
    jobs: tuple[Job, ...] = ()
    node_groups: tuple[NodeGroup, ...] = ()
    background: tuple[Background, ...] = ()
    flows: tuple[SteadyFlow, ...] = ()
    faults: tuple[Fault, ...] = ()
    #: The RoCE congestion model; None (the default) leaves the traffic exactly as without it.
    congestion: Congestion | None = None


# ---------------------------------------------------------------------------------------------
# Presets: the named workloads `flowtracer sim --workload NAME` accepts.

PRESETS: dict[str, tuple[Collective, Algorithm]] = {
    "ring-allreduce": (Collective.ALLREDUCE, Algorithm.RING),
    "tree-allreduce": (Collective.ALLREDUCE, Algorithm.TREE),
    "allgather": (Collective.ALLGATHER, Algorithm.RING),
    "reducescatter": (Collective.REDUCESCATTER, Algorithm.RING),
    "alltoall": (Collective.ALLTOALL, Algorithm.RING),
    "pipeline": (Collective.SENDRECV, Algorithm.RING),
}


def preset(name: str, **options: Any) -> Workload:
    """A one-job workload running one collective in a loop; options are Job fields plus ``size``,
    ``count``, ``seed``, ``mtu``, ``background_flows``, ``background_rate``."""
    if name not in PRESETS:
        raise WorkloadError(f"unknown workload preset {name!r}; known: {', '.join(PRESETS)}")
    collective, algorithm = PRESETS[name]
    opts = {k: v for k, v in options.items() if v is not None}
    op = {"collective": collective, "algorithm": algorithm}
    for key in ("size", "count", "dtype"):
        if key in opts:
            op[key] = opts.pop(key)
    top: dict[str, Any] = {}
    for key in ("seed", "mtu"):
        if key in opts:
            top[key] = opts.pop(key)
    bg_flows, bg_rate = opts.pop("background_flows", 0), opts.pop("background_rate", None)
    if bg_flows:
        top["background"] = [{"flows": bg_flows, **({"rate": bg_rate} if bg_rate is not None else {})}]
    data = {**top, "jobs": [{"name": name, **opts, "ops": [op]}]}
    return validate_workload(data, f"preset {name!r}")


def load_workload(path: str | Path) -> Workload:
    """Read a workload YAML/JSON file; raise ``WorkloadError`` naming the place of any problem."""
    p = Path(path)
    text = read_text(p, WorkloadError)
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        raise WorkloadError(f"{p}: syntax error: {str(e).splitlines()[0]}") from None
    return validate_workload(data if data is not None else {}, str(p))


def validate_workload(data: object, source: str) -> Workload:
    """Validate parsed workload data; errors name ``source`` and the field."""
    if not isinstance(data, dict):
        raise WorkloadError(f"{source}: expected a mapping with 'jobs' (and optionally node_groups, background, "
                            "faults)")
    try:
        return Workload.model_validate(data)
    except ValidationError as e:
        raise WorkloadError(format_validation_error(e, source, enum_choices=False, root="workload")) from None
