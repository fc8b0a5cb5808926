"""What a slow node group costs a synchronous job, and what the job would do with every node fast (pure).

A ring collective moves as fast as its slowest edge, and a training step waits for its slowest GPU, so one
node group with slower NICs or older GPUs sets the pace of every node of the job. The model splits a measured
iteration (s) into communication and the rest:

- **communication** = bytes per iteration of a NIC (RoCEv2 frames, as the agents measured them) x 8 /
  the slowest NIC rate of the job's hosts (bit/s; a host outside every group runs at ``line_rate_bps``):
  the ring is NIC-bound, not fabric-bound;
- **compute** = the measured iteration time - communication (GPU compute, kernel launches, op latency);
- **all nodes fast** (the counterfactual): compute / the largest compute scale of the job's hosts, plus the
  same bytes at ``line_rate_bps``.

Assumptions (docs/whatif.md, Heterogeneous jobs): compute and communication do not overlap, the fabric is not
the bottleneck (no collision slows the ring below the slowest NIC), and the bytes per iteration do not depend
on the speeds (true of ring collectives). The FIM effect: the job's flows would move ``speedup`` times the
bytes in the same time while every other flow moves what it did; :func:`scale_job` rescales a recording so,
and the ECMP replay gives both FIMs. A job alone on the fabric has the same FIM either way (FIM is
scale-invariant); it changes when other traffic shares the ECMP groups.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.speeds import parse_speed
from flowtracer.whatif.fabric import ReplayFabric
from flowtracer.whatif.iterations import HostProgress, HostSample, job_iteration_s, progress
from flowtracer.whatif.record import Window
from flowtracer.whatif.replay import replay_all
from flowtracer.whatif.strategies import parse_strategy

REST = "rest"
"""Name of the job's hosts outside every node group."""


class NodeGroupError(ValueError):
    """A node group given on the command line is not valid; ``str()`` names it in one line."""


@dataclass(frozen=True)
class NodeGroup:
    """Hosts with slower NICs (``nic_rate_bps``, None: line rate) and/or GPUs (``compute_scale``: compute
    takes this many times as long as on the fastest nodes)."""

    name: str
    hosts: tuple[str, ...]
    nic_rate_bps: float | None = None
    compute_scale: float = 1.0


def parse_node_group(text: str) -> NodeGroup:
    """``HOST[,HOST...]:RATE[:xSCALE]`` (e.g. ``host13,host14:200G`` or ``host13:400G:x1.5``) -> NodeGroup."""
    parts = text.split(":")
    hosts = tuple(h for h in parts[0].split(",") if h)
    if not hosts or len(parts) > 3:
        raise NodeGroupError(f"--node-group {text!r}: give HOST[,HOST...]:RATE[:xSCALE], e.g. host13,host14:200G")
    rate: float | None = None
    scale = 1.0
    try:
        if len(parts) > 1 and parts[1]:
            rate = float(parse_speed(parts[1]))
        if len(parts) > 2:
            if not parts[2].startswith("x"):
                raise ValueError(f"{parts[2]!r} is not a compute scale (examples: x1.5, x2)")
            scale = float(parts[2][1:])
            if scale <= 0:
                raise ValueError(f"compute scale must be positive, got {scale:g}")
    except ValueError as e:
        raise NodeGroupError(f"--node-group {text!r}: {e}") from None
    return NodeGroup(",".join(hosts), hosts, rate, scale)


@dataclass(frozen=True)
class SlowGroupEffect:
    """The model's split of a measured iteration and its all-nodes-fast counterfactual. Seconds, bit/s."""

    iteration_s: float
    comm_s: float
    compute_s: float
    slowest_nic_bps: float
    #: The group that sets the NIC pace and the one that sets the compute pace ("" = none: line rate / scale 1).
    nic_bottleneck: str
    compute_bottleneck: str
    all_fast_iteration_s: float
    all_fast_comm_s: float
    all_fast_compute_s: float

    @property
    def slowdown(self) -> float:
        """How many times longer an iteration takes than with every node fast."""
        return self.iteration_s / self.all_fast_iteration_s

    def to_dict(self) -> dict[str, Any]:
        return {"iteration_s": self.iteration_s, "comm_s": self.comm_s, "compute_s": self.compute_s,
                "slowest_nic_bps": self.slowest_nic_bps, "nic_bottleneck": self.nic_bottleneck,
                "compute_bottleneck": self.compute_bottleneck, "all_fast_iteration_s": self.all_fast_iteration_s,
                "all_fast_comm_s": self.all_fast_comm_s, "all_fast_compute_s": self.all_fast_compute_s,
                "slowdown": self.slowdown}


def slow_group_effect(iteration_s: float, bytes_per_iteration: float, job_hosts: Collection[str],
                      groups: Sequence[NodeGroup], line_rate_bps: float) -> SlowGroupEffect:
    """The model (module docstring) for a job on ``job_hosts`` whose iteration was measured at ``iteration_s``
    with ``bytes_per_iteration`` frame bytes per NIC. Raises ValueError for a non-positive time or rate."""
    if iteration_s <= 0 or line_rate_bps <= 0 or bytes_per_iteration < 0:
        raise ValueError("iteration time and line rate must be positive, bytes per iteration not negative")
    nic, nic_by = float(line_rate_bps), ""
    scale, scale_by = 1.0, ""
    for g in groups:
        if not set(g.hosts) & set(job_hosts):
            continue
        if g.nic_rate_bps is not None and g.nic_rate_bps < nic:
            nic, nic_by = g.nic_rate_bps, g.name
        if g.compute_scale > scale:
            scale, scale_by = g.compute_scale, g.name
    comm = bytes_per_iteration * 8 / nic
    compute = max(0.0, iteration_s - comm)
    fast_comm = bytes_per_iteration * 8 / line_rate_bps
    fast_compute = compute / scale
    return SlowGroupEffect(iteration_s, comm, compute, nic, nic_by, scale_by, fast_comm + fast_compute, fast_comm,
                           fast_compute)


def scale_job(windows: Sequence[Window], comm_ids: Collection[str], factor: float) -> list[Window]:
    """The windows with every flow of the communicators ``comm_ids`` moving ``factor`` times its bytes (the job
    iterating ``factor`` times as fast); other flows unchanged."""
    return [replace(w, flows=tuple(replace(f, bytes=round(f.bytes * factor)) if f.comm_id in comm_ids else f
                                   for f in w.flows)) for w in windows]


def fim_effect(windows: Sequence[Window], fabric: Fabric, comm_ids: Collection[str],
               speedup: float) -> tuple[float, float]:
    """(fabric FIM of the windows as recorded, with the job ``speedup`` times as fast), both by the ECMP replay
    on the healthy fabric (the replay reproduces the processor's measured FIM: docs/reproduction.md)."""
    rf, ecmp = ReplayFabric(fabric), parse_strategy("ecmp")
    [as_recorded] = replay_all(windows, [rf], [ecmp], with_time=False)
    [all_fast] = replay_all(scale_job(windows, comm_ids, speedup), [rf], [ecmp], with_time=False)
    return as_recorded.fim, all_fast.fim


def job_report(samples: Iterable[HostSample], wins: Sequence[Window], fabric: Fabric, groups: Sequence[NodeGroup],
               ops_per_iteration: int = 1, from_ns: int = 0, to_ns: int | None = None,
               job_hosts: Sequence[str] | None = None) -> dict[str, Any]:
    """The job over its node groups, from what the agents measured in [from_ns, to_ns] (``samples``, and
    ``wins`` for the FIM): per group its hosts, speeds (a group that does not cap its NICs: the line rate),
    iteration time, tx rate, bytes per iteration and how busy its NICs are at their own rate; the model's
    all-nodes-fast counterfactual; the ECMP-replay FIM as recorded and with every node fast. ``job_hosts``
    None: the hosts of the communicator most hosts ran."""
    prog = progress(samples, ops_per_iteration, from_ns, to_ns)
    if job_hosts is None:
        comms = [p.comm_id for p in prog.values()]
        main = max(set(comms), key=comms.count) if comms else ""
        job_hosts = [h for h, p in prog.items() if p.comm_id == main]
    prog = {h: p for h, p in prog.items() if h in job_hosts}
    nic_speed = {h.name: h.nics[0].speed for h in fabric.topology.hosts if h.nics}
    line = float(min((nic_speed[h] for h in job_hosts if h in nic_speed), default=0))
    iteration = job_iteration_s(list(prog.values()))
    grouped = {h for g in groups for h in g.hosts}
    rows = [_group(g.name, list(g.hosts), g.nic_rate_bps or line, g.compute_scale, prog, True) for g in groups]
    rows.append(_group(REST, [h for h in job_hosts if h not in grouped], line, 1.0, prog, False))
    per_iter = [p.bytes_per_iteration for p in prog.values() if p.bytes_per_iteration is not None]
    out: dict[str, Any] = {"hosts": list(job_hosts), "hosts_measured": len(prog), "line_rate_bps": line,
                           "ops_per_iteration": ops_per_iteration, "iteration_s": _r(iteration), "groups": rows,
                           "model": None, "fim": {"replay_as_recorded": None, "replay_all_fast": None}}
    if not iteration or not per_iter or line <= 0:
        return out
    effect = slow_group_effect(iteration, statistics.median(per_iter), job_hosts, groups, line)
    out["model"] = {k: _r(v) if isinstance(v, float) else v for k, v in effect.to_dict().items()}
    if wins:
        as_is, fast = fim_effect(wins, fabric, {p.comm_id for p in prog.values()}, effect.slowdown)
        out["fim"] = {"replay_as_recorded": _r(as_is), "replay_all_fast": _r(fast)}
    return out


def _group(name: str, hosts: list[str], nic_rate: float | None, scale: float, prog: dict[str, HostProgress],
           slow: bool) -> dict[str, Any]:
    mine = [prog[h] for h in hosts if h in prog]
    per_iter = [p.bytes_per_iteration for p in mine if p.bytes_per_iteration is not None]
    tx = statistics.fmean(p.tx_bps for p in mine) if mine else None
    return {"name": name, "slow": slow, "hosts": hosts, "nic_rate_bps": nic_rate, "compute_scale": scale,
            "iteration_s": _r(job_iteration_s(mine)),
            "tx_gbps": round(tx / 1e9, 1) if tx is not None else None,
            # the share of the time its NICs are busy at their own rate: a slow group's is the highest
            "nic_busy": round(tx / nic_rate, 3) if tx is not None and nic_rate else None,
            "bytes_per_iteration": round(statistics.median(per_iter)) if per_iter else None}


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def report_lines(r: dict[str, Any]) -> list[str]:
    """The job report for a terminal: per group, the all-nodes-fast counterfactual, the FIM."""
    lines = []
    for g in r["groups"]:
        rate = "n/a" if g["nic_rate_bps"] is None else f"{g['nic_rate_bps'] / 1e9:g}G"
        hosts = ", ".join(g["hosts"]) if len(g["hosts"]) <= 4 else f"{g['hosts'][0]}..{g['hosts'][-1]}"
        busy = "n/a" if g["nic_busy"] is None else f"{g['nic_busy']:.0%}"
        per_iter = "n/a" if g["bytes_per_iteration"] is None else f"{g['bytes_per_iteration'] / 1e9:.2f} GB"
        lines.append(f"{'SLOW group' if g['slow'] else 'other hosts'} {hosts} ({len(g['hosts'])}): NIC {rate}, "
                     f"compute x{g['compute_scale']:g}; iteration {_ms(g['iteration_s'])}, tx "
                     f"{'n/a' if g['tx_gbps'] is None else g['tx_gbps']} Gbit/s per host (NIC busy {busy}), "
                     f"{per_iter} per iteration")
    m = r["model"]
    if m:
        by = " and ".join(x for x in (m["nic_bottleneck"] and f"NICs of {m['nic_bottleneck']}",
                                      m["compute_bottleneck"] and f"GPUs of {m['compute_bottleneck']}") if x)
        lines.append(f"all nodes fast (what-if model): iteration {_ms(m['all_fast_iteration_s'])} "
                     f"(communication {_ms(m['all_fast_comm_s'])} + compute {_ms(m['all_fast_compute_s'])}); "
                     f"the slow group makes it {m['slowdown']:.2f}x as long" + (f" ({by})" if by else ""))
    fm = r["fim"]
    if fm["replay_as_recorded"] is not None:
        lines.append(f"fabric FIM (ECMP replay): as recorded {fm['replay_as_recorded']:.3f}, all nodes fast "
                     f"{fm['replay_all_fast']:.3f}")
    return lines


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:.1f} ms"
