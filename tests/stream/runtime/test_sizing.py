"""Input messages per partition, cores and workers, on fabrics small enough to count by hand."""

from __future__ import annotations

import pytest

from flowtracer.fabric.topology import Topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.topics import partition_for
from flowtracer.stream.runtime.sizing import (
    PartitionRates,
    flow_batches_per_leaf,
    nics_per_leaf,
    partition_load,
    size,
    workers_for,
)


@pytest.fixture(scope="module")
def plain() -> Topology:
    """4 hosts of 1 NIC: host1-2 on leaf01, host3-4 on leaf02; 2 spines."""
    return generate(FabricSpec(hosts=4, leaves=2, spines=2, name="plain4"))


@pytest.fixture(scope="module")
def rails() -> Topology:
    """4 hosts of 2 NICs on 2 rails: NIC 0 of host1-2 on leaf01, of host3-4 on leaf02; NIC 1 of host1-2 on
    leaf03, of host3-4 on leaf04; 2 spines."""
    return generate(FabricSpec(hosts=4, nics_per_host=2, rails=2, leaves=4, spines=2, name="rails4"))


def rates(p: int, counters: float, flows: float, attributions: float, congestion: float = 0.0,
          traces: float = 0.0) -> PartitionRates:
    return PartitionRates(partition=p, counters=counters, congestion=congestion, flows=flows, traces=traces,
                          attributions=attributions)


def test_a_host_sends_one_flow_batch_per_leaf_it_has_nics_on(plain: Topology, rails: Topology) -> None:
    assert flow_batches_per_leaf(plain) == {"leaf01": 2, "leaf02": 2}
    assert flow_batches_per_leaf(rails) == {"leaf01": 2, "leaf02": 2, "leaf03": 2, "leaf04": 2}
    # Two NICs of a host on one leaf are one batch, not two.
    two_nics = generate(FabricSpec(hosts=4, nics_per_host=2, leaves=2, spines=2, name="plain4x2"))
    assert flow_batches_per_leaf(two_nics) == {"leaf01": 2, "leaf02": 2}
    assert nics_per_leaf(two_nics) == {"leaf01": 4, "leaf02": 4}


def test_one_partition_reads_everything(plain: Topology) -> None:
    load = partition_load(plain, 1)
    # 4 switches, 4 hosts x 1 leaf, 1 attribution from the one flows stage; the group FIM of its links stage.
    assert load.partitions == (rates(0, counters=4, flows=4, attributions=1),)
    assert load.group_fim == 1
    assert load.total == 10


def test_a_longer_hop_divides_every_rate(plain: Topology) -> None:
    load = partition_load(plain, 1, hop_s=2.0)
    assert load.partitions == (rates(0, counters=2, flows=2, attributions=0.5),)
    assert load.group_fim == 0.5


def test_three_partitions_of_a_rail_fabric(rails: Topology) -> None:
    # murmur2 (Kafka's default partitioner) at P = 3: written out so that a change of the rule shows here.
    where = {"leaf01": 1, "leaf02": 0, "leaf03": 1, "leaf04": 2, "spine01": 1, "spine02": 0}
    assert {name: partition_for(name, 3) for name in where} == where
    load = partition_load(rails, 3)
    # p0: leaf02 + spine02; p1: leaf01, leaf03 + spine01; p2: leaf04. Every leaf has 2 hosts; all 3 partitions
    # have a flows stage, so each reads 3 attributions and sends 1 group FIM.
    assert load.partitions == (
        rates(0, counters=2, flows=2, attributions=3),
        rates(1, counters=3, flows=4, attributions=3),
        rates(2, counters=1, flows=2, attributions=3),
    )
    assert load.busiest().partition == 1
    assert load.busiest().total == 10
    assert load.group_fim == 3
    assert load.total == 7 + 10 + 6 + 3


def test_empty_partitions_still_read_attributions(plain: Topology) -> None:
    where = {"leaf01": 4, "leaf02": 4, "spine01": 4, "spine02": 6}
    assert {name: partition_for(name, 8) for name in where} == where
    load = partition_load(plain, 8)
    by_p = {r.partition: r for r in load.partitions}
    assert by_p[4] == rates(4, counters=3, flows=4, attributions=2)
    assert by_p[6] == rates(6, counters=1, flows=0, attributions=2)  # spines' counters make a flows stage too
    # The other six have no key, yet each reads one attribution from each of the 2 flows stages.
    assert all(by_p[p] == rates(p, counters=0, flows=0, attributions=2) for p in (0, 1, 2, 3, 5, 7))
    assert load.group_fim == 8  # every partition has a links stage
    assert load.total == 4 + 4 + 8 * 2 + 8


def test_congestion_and_traces_land_with_their_switch_and_source_leaf(rails: Topology) -> None:
    load = partition_load(rails, 3, congestion=True, traces_per_nic_s=0.5)
    # Each leaf has 2 NICs (one per host on it): 1 trace/s per leaf; p1 holds two leaves.
    assert load.partitions == (
        rates(0, counters=2, congestion=2, flows=2, traces=1.0, attributions=3),
        rates(1, counters=3, congestion=3, flows=4, traces=2.0, attributions=3),
        rates(2, counters=1, congestion=1, flows=2, traces=1.0, attributions=3),
    )


def test_bad_arguments_are_named(plain: Topology) -> None:
    with pytest.raises(ValueError, match="partitions must be at least 1, got 0"):
        partition_load(plain, 0)
    with pytest.raises(ValueError, match="hop_s must be positive"):
        partition_load(plain, 1, hop_s=0)
    with pytest.raises(ValueError, match="traces_per_nic_s must not be negative"):
        partition_load(plain, 1, traces_per_nic_s=-1)
    with pytest.raises(ValueError, match="cost_ms must be positive"):
        size(partition_load(plain, 1), 0)


def test_workers_cover_the_busiest_partitions_a_worker_may_get() -> None:
    cores = (0.5, 0.3, 0.2, 0.1)
    # W=1: all 4 (1.1); W=2 and W=3: up to 2 each, worst 0.5+0.3 (+0.05 fabric) = 0.85; W=4: 0.5+0.05.
    assert workers_for(cores, 0.05, budget=0.75) == 4
    assert workers_for(cores, 0.05, budget=1.0) == 2
    assert workers_for(cores, 0.0, budget=2.0) == 1
    assert workers_for(cores, 0.3, budget=0.75) is None  # the busiest with the fabric stage does not fit


def test_size_prices_every_message_at_the_cost(rails: Topology) -> None:
    load = partition_load(rails, 3)  # partitions of 7, 10 and 6 msgs/s, 3 group FIMs/s: 26
    s = size(load, cost_ms=50.0)  # 0.05 core-s per message
    assert s.busiest_cores == pytest.approx(0.5)
    assert s.fabric_cores == pytest.approx(0.15)
    assert s.total_cores == pytest.approx(1.3)
    assert s.workers_balanced == 2  # ceil(1.3 / 0.75)
    assert s.workers == 3  # any two partitions with the fabric stage (0.5 + 0.35 + 0.15) exceed 0.75
    assert s.feasible and s.within_budget
    s = size(load, cost_ms=110.0)  # busiest 1.1 cores
    assert not s.feasible and s.workers is None
    s = size(load, cost_ms=80.0)  # busiest 0.8: one process could, a worker's budget cannot
    assert s.feasible and not s.within_budget
