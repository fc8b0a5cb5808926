"""NCCL patterns: trees as NCCL builds them, per-rank volumes as NCCL moves them."""

from __future__ import annotations

import pytest

from flowtracer.sim.fabric.collectives import Algorithm, Collective, btree, dtree_parents, op_sets


def test_btree_matches_nccl_illustration_for_14_ranks() -> None:
    # src/graph/trees.cc: 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; 2 -> 1, 3; 6 -> 5, 7; 10 -> 9, 11
    parent = {r: btree(14, r)[0] for r in range(14)}
    assert parent == {0: -1, 8: 0, 4: 8, 12: 8, 2: 4, 6: 4, 10: 12, 13: 12, 1: 2, 3: 2, 5: 6, 7: 6, 9: 10, 11: 10}
    assert btree(14, 0) == (-1, -1, 8)
    assert btree(14, 12) == (8, 10, 13)


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 13, 16])
def test_dtree_gives_two_spanning_trees_with_distinct_roots(n: int) -> None:
    for parents in dtree_parents(n):
        assert parents.count(-1) == 1
        for r in range(n):  # every rank reaches the root
            seen, x = set(), r
            while parents[x] != -1:
                assert x not in seen
                seen.add(x)
                x = parents[x]
    t0, t1 = dtree_parents(n)
    if n > 2:
        assert t0.index(-1) != t1.index(-1)


def sent_per_nic(collective: Collective, algorithm: Algorithm, size: int, nodes: int, rails: int, channels: int,
                 qps: int) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for s in op_sets(collective, algorithm, size, nodes, rails, channels, qps):
        for c in s.conns:
            out[(c.src_node, c.rail)] = out.get((c.src_node, c.rail), 0) + s.bytes_per_qp * qps
    return out


S = 3 * 2**26  # divisible by everything below, so the volumes are exact


@pytest.mark.parametrize(("nodes", "rails", "channels", "qps"), [(4, 1, 2, 1), (3, 2, 1, 2), (8, 4, 2, 2)])
def test_ring_allreduce_sends_2_n_minus_1_over_n_of_the_buffer(nodes: int, rails: int, channels: int,
                                                               qps: int) -> None:
    n = nodes * rails
    per_nic = sent_per_nic(Collective.ALLREDUCE, Algorithm.RING, S, nodes, rails, channels, qps)
    assert len(per_nic) == nodes * rails
    # A node sends what each of its ranks sends in an n-rank ring; its NICs split it evenly.
    for v in per_nic.values():
        assert v == pytest.approx(2 * (n - 1) / n * S / rails, abs=channels * qps)


@pytest.mark.parametrize("collective", [Collective.ALLGATHER, Collective.REDUCESCATTER])
def test_allgather_and_reducescatter_send_n_minus_1_over_n(collective: Collective) -> None:
    per_nic = sent_per_nic(collective, Algorithm.RING, S, 4, 1, 2, 1)
    assert set(per_nic.values()) == {3 * S // 4}


def test_alltoall_sends_one_nth_to_each_peer() -> None:
    nodes, rails = 4, 2
    n = nodes * rails
    sets = op_sets(Collective.ALLTOALL, Algorithm.RING, S, nodes, rails, 1, 1)
    pair_bytes: dict[tuple[int, int, int], int] = {}
    for s in sets:
        (c,) = s.conns
        pair_bytes[(c.src_node, c.dst_node, c.rail)] = s.bytes_per_qp
    # NIC k of node a carries what the node's `rails` GPUs send to GPU k of node b: rails * S/n.
    assert set(pair_bytes.values()) == {rails * S // n}
    assert len(pair_bytes) == nodes * (nodes - 1) * rails


def test_tree_allreduce_moves_half_per_tree_both_ways() -> None:
    sets = op_sets(Collective.ALLREDUCE, Algorithm.TREE, S, 4, 1, 1, 1)
    assert len(sets) == 2  # one coupled set per tree
    for s in sets:
        assert s.bytes_per_qp == S // 2
        edges = {(c.src_node, c.dst_node) for c in s.conns}
        assert len(edges) == 2 * 3 and all((b, a) in edges for a, b in edges)


def test_pipeline_sends_forward_and_back_between_neighbours_only() -> None:
    sets = op_sets(Collective.SENDRECV, Algorithm.RING, S, 3, 1, 1, 1)
    assert sorted((s.conns[0].src_node, s.conns[0].dst_node) for s in sets) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert {s.bytes_per_qp for s in sets} == {S}


def test_single_node_job_puts_nothing_on_the_network() -> None:
    assert op_sets(Collective.ALLREDUCE, Algorithm.RING, S, 1, 8, 2, 1) == []
