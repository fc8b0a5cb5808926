"""A training job's iteration time as the host agents measured it, from their FlowBatches (pure).

The agents tag every QP of an NCCL communicator with the communicator's last enqueued collective and its
``opCount`` (NCCL's per-communicator counter of collectives, parsed from the COLL lines of the NCCL log), and
report each RDMA port's transmitted bytes per window. Over a span of windows:

- **ops**: opCount of the last window minus opCount of the first, for one communicator on one host;
- **iteration time** (s) = span seconds / ops x ops per iteration (a job property: its collectives per
  training step, 1 for a loop of one all-reduce);
- **bytes per iteration** = the port's tx bytes (RoCEv2 frames) in the windows after the first up to the last,
  divided by the iterations in that span.

The opCount is sampled once per window, so a span of k ops is known to +-1 op: over ~100 ops the iteration
time is within ~1-2%. Nothing here reads the simulator.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from flowtracer.schemas.v1 import flows_pb2


@dataclass(frozen=True, slots=True)
class HostSample:
    """One agent window of one host: when it ended (ns), its ports' tx bytes (RoCEv2 frames), and the
    highest opCount per communicator id its tagged QPs carried."""

    host: str
    end_ns: int
    tx_bytes: int
    op_counts: dict[str, int] = field(default_factory=dict)


def host_sample(batch: flows_pb2.FlowBatch) -> HostSample:
    """The sample of one FlowBatch (a host with NICs on two leaves sends two batches: merge them by
    :func:`progress`, which sums bytes and takes the highest opCount)."""
    ops: dict[str, int] = {}
    for f in batch.flows:
        if f.HasField("nccl") and f.nccl.collective and f.nccl.comm_id:
            ops[f.nccl.comm_id] = max(ops.get(f.nccl.comm_id, 0), f.nccl.op_count)
    return HostSample(batch.host, batch.window_end_ns, sum(p.tx_bytes for p in batch.ports), ops)


@dataclass(frozen=True)
class HostProgress:
    """What one host's agent says about the job on it over a span (see the module docstring)."""

    host: str
    comm_id: str
    ops: int
    seconds: float
    #: Seconds per iteration (None: no op completed in the span).
    iteration_s: float | None
    #: The host's RDMA ports' tx bytes per iteration, RoCEv2 frames (None: no iteration).
    bytes_per_iteration: float | None
    #: Mean tx rate of the host's ports over the span, bit/s.
    tx_bps: float


def progress(samples: Iterable[HostSample], ops_per_iteration: int = 1, from_ns: int = 0,
             to_ns: int | None = None) -> dict[str, HostProgress]:
    """Per host, its progress over the windows ending in [from_ns, to_ns], on the communicator whose opCount
    advanced most there (the busiest job on the host). Hosts with fewer than two tagged windows are left out."""
    by_host: dict[str, dict[int, tuple[int, dict[str, int]]]] = {}
    for s in samples:
        if s.end_ns < from_ns or (to_ns is not None and s.end_ns > to_ns):
            continue
        windows = by_host.setdefault(s.host, {})
        tx, ops = windows.get(s.end_ns, (0, {}))
        merged = dict(ops)
        for comm, n in s.op_counts.items():
            merged[comm] = max(merged.get(comm, 0), n)
        windows[s.end_ns] = (tx + s.tx_bytes, merged)
    out = {}
    for host, windows in sorted(by_host.items()):
        best = _busiest(windows)
        if best is None:
            continue
        comm, first, last = best
        ops = windows[last][1][comm] - windows[first][1][comm]
        seconds = (last - first) / 1e9
        tx = sum(b for end, (b, _) in windows.items() if first < end <= last)
        iterations = ops / ops_per_iteration
        out[host] = HostProgress(host, comm, ops, seconds, seconds / iterations if ops > 0 else None,
                                 tx / iterations if ops > 0 else None, tx * 8 / seconds)
    return out


def _busiest(windows: dict[int, tuple[int, dict[str, int]]]) -> tuple[str, int, int] | None:
    """(communicator, first window end, last window end) of the communicator with the largest opCount advance."""
    best: tuple[int, str, int, int] | None = None
    for comm in {c for _, ops in windows.values() for c in ops}:
        ends = sorted(e for e, (_, ops) in windows.items() if comm in ops)
        if len(ends) < 2:
            continue
        advance = windows[ends[-1]][1][comm] - windows[ends[0]][1][comm]
        if best is None or advance > best[0]:
            best = (advance, comm, ends[0], ends[-1])
    return None if best is None else best[1:]


def job_iteration_s(hosts: Sequence[HostProgress]) -> float | None:
    """The job's iteration time: the median of its hosts' (a synchronous job's hosts agree to +-1 op)."""
    xs = sorted(h.iteration_s for h in hosts if h.iteration_s is not None)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2
