"""Sizing a processor deployment from its busiest partition: input messages per partition, cores, workers (pure).

A partition is read by one worker and a worker is one Python process, so no partition may need more than one
core, whatever the average says; and murmur2 spreads keys unevenly. This module counts, for a fabric and a
partition count P, the input messages per second of every partition, per input topic, from the wire contract
(``flowtracer.schemas.topics``) and the processor's own fan-out, then turns a measured CPU cost per message into
cores and workers. It lives in the runtime because what it models is the runtime's: which stage of which
partition reads what, and how Faust hands partitions to workers. It imports only ``schemas``.

Messages per window (one hop), by topic:

- **counters**: one CounterBatch per switch, keyed by the switch name (the gNMI collectors);
- **switch congestion** (opt-in: the collectors' ``congestion: true``): one CongestionBatch per switch, same key;
- **flows**: one FlowBatch per host and per leaf the host has NICs on, keyed by the leaf, sent every window
  even when empty (``collectors/agent/host_pipeline.py``: one batch per leaf of the host's inventory). A
  rail-optimized host with 8 NICs on 8 rails sends 8; a host cabled to one leaf sends 1;
- **path traces** (opt-in: the agents' ``tracing.enabled``): not per window; keyed by flow id but produced to
  the source leaf's partition (``topics.trace_partition``). Given as traces per NIC per second: in the steady
  state the QPs per NIC over the agents' ``tracing.refresh`` (10 min by default); new jobs trace in bursts that
  the probe budget caps (50 probes/s per host);
- **attributions**: every partition with a flows stage (any counters, flows or path-trace key: counters feed
  it the leaves' next hops) sends one AttributionBatch to every one of the P partitions each window
  (``stream/stages/flows.py``: one batch per destination partition, empty or not), so each partition reads
  one per active partition: P^2 records in all when every partition is active;
- **group FIM**: every partition with a links stage (any counters or congestion key, or any attribution
  received) sends one GroupFimBatch each window to the group-FIM topic's only partition, which the fabric
  stage reads (``stream/stages/links.py``).

Workers. Faust assigns each group of co-partitioned topics by count, not load: at most ceil(P / W)
partitions per worker, sticky across rebalances, blind to how busy each is
(``faust/assignor/copartitioned_assignor.py``, ``CopartitionedAssignor.max_capacity``). The one-partition
group-FIM topic is a group of its own (``faust/assignor/partition_assignor.py``,
``_get_copartitioned_groups``: topics grouped by partition count), so it may land on any worker. The worker
count that keeps every worker within its budget whatever the assignment is therefore the smallest W for which
the ceil(P / W) busiest partitions plus the fabric stage fit; a balanced assignment could do with
ceil(total / budget) workers, and the truth lies between the two.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from flowtracer.fabric.topology import Topology
from flowtracer.schemas.topics import partition_for, trace_partition

WORKER_BUDGET_CORES = 0.75
"""Cores a worker is planned to keep busy: the rest is headroom for rebalances, catching up and bursts (the
one-worker catch-up in docs/benchmarks.md ran 0.94 of a core busy)."""
PROCESS_CORES = 1.0
"""What one Python process can give: a partition needing more cannot be read in time by any worker."""


@dataclass(frozen=True)
class PartitionRates:
    """Input messages per second of one partition, per input topic."""

    partition: int
    counters: float
    congestion: float
    flows: float
    traces: float
    attributions: float

    @property
    def total(self) -> float:
        """All input messages per second of this partition."""
        return self.counters + self.congestion + self.flows + self.traces + self.attributions


@dataclass(frozen=True)
class Load:
    """Input messages per second of a processor deployment: every partition's, and the fabric stage's."""

    partitions: tuple[PartitionRates, ...]
    group_fim: float
    """Messages per second into the group-FIM topic's only partition (the fabric stage)."""

    def busiest(self) -> PartitionRates:
        """The partition with the most input messages per second (the lowest number among equals)."""
        return max(self.partitions, key=lambda p: (p.total, -p.partition))

    @property
    def total(self) -> float:
        """All input messages per second of the deployment, the group FIMs included."""
        return sum(p.total for p in self.partitions) + self.group_fim


@dataclass(frozen=True)
class Sizing:
    """What a load costs at a CPU cost per message."""

    cost_ms: float
    """CPU ms per input message in a running worker."""
    busiest_cores: float
    """Cores the busiest partition needs."""
    fabric_cores: float
    """Cores the fabric stage (the group-FIM partition) needs."""
    total_cores: float
    """Cores of the whole deployment: cost x all input messages per second."""
    workers: int | None
    """Fewest workers that keep every worker within the budget whatever partitions Faust gives it; None when
    even one partition per worker does not."""
    workers_balanced: int
    """Fewest workers if the load were spread evenly: ceil(total cores / budget), a lower bound."""
    budget_cores: float

    @property
    def feasible(self) -> bool:
        """The busiest partition fits one Python process."""
        return self.busiest_cores <= PROCESS_CORES

    @property
    def within_budget(self) -> bool:
        """The busiest partition fits a worker's budget (with the fabric stage when they share a worker)."""
        return self.workers is not None


def flow_batches_per_leaf(topology: Topology) -> Counter[str]:
    """FlowBatches each leaf's key gets per window: the hosts with at least one NIC on that leaf."""
    out: Counter[str] = Counter()
    for host in topology.hosts:
        out.update({nic.leaf.split(":", 1)[0] for nic in host.nics})
    return out


def nics_per_leaf(topology: Topology) -> Counter[str]:
    """NICs attached to each leaf (the source leaf of their flows' path traces)."""
    return Counter(nic.leaf.split(":", 1)[0] for host in topology.hosts for nic in host.nics)


def partition_load(topology: Topology, partitions: int, hop_s: float = 1.0, congestion: bool = False,
                   traces_per_nic_s: float = 0.0) -> Load:
    """Input messages per second of each of ``partitions`` partitions for ``topology`` at a ``hop_s`` window.

    ``congestion``: the collectors send switch congestion too. ``traces_per_nic_s``: path traces per NIC per
    second (0: tracing off, the default).
    """
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    if hop_s <= 0:
        raise ValueError(f"hop_s must be positive, got {hop_s}")
    if traces_per_nic_s < 0:
        raise ValueError(f"traces_per_nic_s must not be negative, got {traces_per_nic_s}")
    counters = [0] * partitions  # messages per window
    flows = [0] * partitions
    traces = [0.0] * partitions  # messages per second
    for s in topology.switches:
        counters[partition_for(s.name, partitions)] += 1
    for leaf, n in flow_batches_per_leaf(topology).items():
        flows[partition_for(leaf, partitions)] += n
    if traces_per_nic_s:
        for leaf, n in nics_per_leaf(topology).items():
            traces[trace_partition(leaf, partitions)] += n * traces_per_nic_s
    flows_stages = sum(1 for p in range(partitions) if counters[p] or flows[p] or traces[p])
    # Attributions reach every partition as soon as one flows stage exists, and each then has a links stage.
    links_stages = partitions if flows_stages else sum(1 for c in counters if c)
    rates = tuple(PartitionRates(
        partition=p, counters=counters[p] / hop_s, congestion=counters[p] / hop_s if congestion else 0.0,
        flows=flows[p] / hop_s, traces=traces[p], attributions=flows_stages / hop_s) for p in range(partitions))
    return Load(partitions=rates, group_fim=links_stages / hop_s)


def workers_for(partition_cores: Sequence[float], fabric_cores: float,
                budget: float = WORKER_BUDGET_CORES) -> int | None:
    """Fewest workers such that any count-balanced assignment keeps each worker within ``budget`` cores.

    A worker may get the ceil(P / W) busiest partitions and the fabric stage too (module docstring). None when
    even one partition per worker exceeds the budget.
    """
    ranked = sorted(partition_cores, reverse=True)
    n = len(ranked)
    for w in range(1, n + 1):
        if sum(ranked[:math.ceil(n / w)]) + fabric_cores <= budget:
            return w
    return None


def size(load: Load, cost_ms: float, budget: float = WORKER_BUDGET_CORES) -> Sizing:
    """Cores and workers for ``load`` at ``cost_ms`` CPU ms per input message (every topic's messages alike:
    an upper bound for attributions and group FIMs, which are small and produce nothing of their own)."""
    if cost_ms <= 0:
        raise ValueError(f"cost_ms must be positive, got {cost_ms}")
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    per_core = cost_ms / 1000.0  # core-seconds per message
    cores = [p.total * per_core for p in load.partitions]
    fabric = load.group_fim * per_core
    total = load.total * per_core
    return Sizing(cost_ms=cost_ms, busiest_cores=load.busiest().total * per_core, fabric_cores=fabric,
                  total_cores=total, workers=workers_for(cores, fabric, budget),
                  workers_balanced=max(1, math.ceil(total / budget)), budget_cores=budget)
