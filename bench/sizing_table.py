"""Print docs/operations.md's sizing table: partitions, workers and cores per fabric size, from the busiest partition.

Not a benchmark: nothing is measured here. For rail-optimized fabrics like bench_catchup.py's (``--nics-per-host``
NICs per host on as many rails, ``--hosts-per-leaf`` hosts per leaf, a spine per ``--leaves-per-spine`` leaves)
it generates each topology (``fabric/topology_generate.py``), counts every partition's input messages per
second for each partition count (``flowtracer.stream.runtime.sizing``: murmur2 of the real switch and leaf
names) and prices them at each CPU cost per message given: the running worker's measured cost
(docs/benchmarks.md, "Catch-up") and the goal of issue #30 until that is measured.

    .venv/bin/python bench/sizing_table.py                                  # the table in docs/operations.md
    .venv/bin/python bench/sizing_table.py --cost 0.43=measured --partitions 32 64
    .venv/bin/python bench/sizing_table.py --hop 2 --congestion --traces-per-nic-s 0.0067
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.runtime.sizing import PROCESS_CORES, WORKER_BUDGET_CORES, Load, Sizing, partition_load, size


@dataclass(frozen=True)
class Cost:
    """A CPU cost per input message (ms) and where it comes from."""

    ms: float
    label: str


def parse_cost(text: str) -> Cost:
    """``2.47`` or ``2.47=measured``."""
    ms, _, label = text.partition("=")
    try:
        value = float(ms)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--cost {text!r}: want MS or MS=LABEL, e.g. 2.47=measured") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"--cost {text!r}: the cost per message must be positive")
    return Cost(value, label or f"{value:g} ms")


def fabric(nics: int, nics_per_host: int, hosts_per_leaf: int, leaves_per_spine: int) -> FabricSpec:
    """The rail-optimized fabric of ``nics`` NICs (every count rounded up to whole hosts, leaves and spines)."""
    hosts = -(-nics // nics_per_host)
    leaves = nics_per_host * -(-hosts // hosts_per_leaf)  # whole leaves on every rail
    return FabricSpec(hosts=hosts, nics_per_host=nics_per_host, rails=nics_per_host, leaves=leaves,
                      spines=max(1, leaves // leaves_per_spine), name=f"sizing-{nics}")


def cores_cell(s: Sizing) -> str:
    """The busiest partition's cores, marked when it does not fit a worker's budget or a process."""
    text = f"{s.busiest_cores:.2f}"
    if not s.feasible:
        return f"**{text} infeasible**"
    if s.busiest_cores > s.budget_cores:
        return f"{text} (over {s.budget_cores:g})"
    return text


def workers_cell(s: Sizing, partitions: int) -> str:
    """Workers if the load spread evenly / whatever Faust assigns; '-' where no count keeps the budget."""
    if not s.feasible or s.workers_balanced > partitions:  # a partition has one reader: W <= P
        return "-"
    return f"{s.workers_balanced} / {s.workers if s.workers is not None else '-'}"


def row(spec: FabricSpec, partitions: int, load: Load, costs: list[Cost]) -> str:
    """One markdown row: the fabric, P, the messages, then per cost the busiest partition's cores, the total
    cores and the workers."""
    b = load.busiest()
    parts = [f"{b.flows:,.0f} + {b.counters + b.congestion:,.0f} + {b.attributions:,.0f}"]
    if b.traces:
        parts.append(f"{b.traces:,.1f} traces")
    cells = [f"{spec.hosts * spec.nics_per_host:,} ({spec.hosts:,}; {spec.leaves:,} + {spec.spines:,})",
             str(partitions), f"{load.total:,.0f}", f"{b.total:,.0f} = {' + '.join(parts)}", f"{load.group_fim:,.0f}"]
    for c in costs:
        s = size(load, c.ms)
        cells += [cores_cell(s), f"{s.total_cores:.1f}", workers_cell(s, partitions)]
    return "| " + " | ".join(cells) + " |"


def table(specs: list[FabricSpec], partitions: list[int], costs: list[Cost], hop_s: float, congestion: bool,
          traces_per_nic_s: float) -> str:
    """The whole markdown table, one row per fabric and partition count."""
    head = ["NICs (hosts; leaves + spines)", "P", "input msgs/s", "busiest partition msgs/s = flows + switch "
            "batches + attributions", "group FIM msgs/s"]
    for c in costs:
        head += [f"busiest cores at {c.ms:g} ms ({c.label})", "cores", "workers: balanced / any assignment"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for spec in specs:
        topology = generate(spec)
        for p in partitions:
            load = partition_load(topology, p, hop_s=hop_s, congestion=congestion, traces_per_nic_s=traces_per_nic_s)
            lines.append(row(spec, p, load, costs))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nics", type=int, nargs="+", default=[4096, 16384, 32768])
    ap.add_argument("--nics-per-host", type=int, default=8, help="NICs per host, one per rail")
    ap.add_argument("--hosts-per-leaf", type=int, default=32)
    ap.add_argument("--leaves-per-spine", type=int, default=4)
    ap.add_argument("--partitions", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument("--cost", type=parse_cost, nargs="+", default=[Cost(2.47, "measured"), Cost(0.25, "target")],
                    help="CPU ms per input message, MS or MS=LABEL (default: 2.47=measured 0.25=target)")
    ap.add_argument("--hop", type=float, default=1.0, help="window (hop) in seconds")
    ap.add_argument("--congestion", action="store_true", help="the collectors send switch congestion too")
    ap.add_argument("--traces-per-nic-s", type=float, default=0.0,
                    help="path traces per NIC per second (0: tracing off; steady state: QPs per NIC / 600 s)")
    a = ap.parse_args(argv)
    for name in ("nics", "partitions"):
        if min(getattr(a, name)) < 1:
            ap.error(f"--{name} must be at least 1")
    if min(a.nics_per_host, a.hosts_per_leaf, a.leaves_per_spine) < 1 or a.hop <= 0 or a.traces_per_nic_s < 0:
        ap.error("--nics-per-host, --hosts-per-leaf, --leaves-per-spine and --hop must be positive, "
                 "--traces-per-nic-s not negative")
    specs = [fabric(n, a.nics_per_host, a.hosts_per_leaf, a.leaves_per_spine) for n in a.nics]
    print(table(specs, a.partitions, a.cost, a.hop, a.congestion, a.traces_per_nic_s))
    print(f"\nhop {a.hop:g} s; a worker's budget {WORKER_BUDGET_CORES:g} core, a partition over "
          f"{PROCESS_CORES:g} core is infeasible (one Python process reads it)"
          + ("; switch congestion on" if a.congestion else "")
          + (f"; {a.traces_per_nic_s:g} path traces per NIC per s" if a.traces_per_nic_s else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
