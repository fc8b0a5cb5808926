"""The fabric stage's outputs do not depend on the order its partitions' group FIMs arrive in."""

from __future__ import annotations

import random

import pytest

from flowtracer.schemas.v1 import analytics_pb2, internal_pb2
from flowtracer.stream.stages.fabric import FabricStage

S = 1_000_000_000
P = 8


def _batches(rng: random.Random) -> list[internal_pb2.GroupFimBatch]:
    """One window's GroupFimBatch of every partition, with random group FIMs and byte totals."""
    out = []
    for p in range(P):
        groups = [analytics_pb2.FimSample(group=f"leaf{p}-{g}", basis=analytics_pb2.LOAD_BASIS_MEASURED, members=4,
                                          window_end_ns=S, fim=rng.random(), fim_flows=rng.random(), cv=rng.random(),
                                          max_mean_ratio=1 + rng.random(), total_bytes=rng.randrange(1, 1 << 40))
                  for g in range(3)]
        out.append(internal_pb2.GroupFimBatch(schema_version=1, window_end_ns=S, source_partition=p,
                                              source_partitions=P, groups=groups))
    return out


def _fabric_samples(batches: list[internal_pb2.GroupFimBatch]) -> list[bytes]:
    stage = FabricStage(S, 3 * S, rolling_hops=10, senders=frozenset(range(P)))
    for b in batches:
        stage.add(b, None, now_ns=S)
    return [f.SerializeToString() for f in stage.finalize(now_ns=S).fims]


def test_fabric_fim_is_the_same_whatever_order_the_partitions_arrive_in() -> None:
    # Two workers interleave the partitions differently from one; a float sum in arrival order would differ in
    # the last bits (seen in bench/bench_catchup.py). Eight orders of the same batches: one result, bit for bit.
    rng = random.Random(3)
    batches = _batches(rng)
    results = set()
    for _ in range(8):
        rng.shuffle(batches)
        [sample] = _fabric_samples(batches)
        results.add(sample)
    assert len(results) == 1


def test_a_fabric_window_whose_computation_raises_is_dead_lettered_and_the_next_is_computed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fabric stage has the same boundary as the flows and links stages: a window that trips a bug costs that
    window (its GroupFimBatches become DeadLetters naming the stage and the error), never the worker."""
    import flowtracer.stream.stages.fabric as fabric_mod

    real, calls = fabric_mod.fabric_fim, []

    def once(*a: object) -> float:
        calls.append(1)
        if len(calls) == 1:
            raise OverflowError("math range error")
        return real(*a)

    monkeypatch.setattr(fabric_mod, "fabric_fim", once)
    stage = FabricStage(S, 3 * S, rolling_hops=10, senders=frozenset(range(P)))
    for end in (S, 2 * S):
        for b in _batches(random.Random(end)):
            b.window_end_ns = end
            stage.add(b, object(), now_ns=end)
    out = stage.finalize(now_ns=2 * S)
    assert out.windows == 2 and len(out.tokens) == 2 * P  # both windows released for acking
    assert len(out.dead_letters) == P and all(d.window_end_ns == S and "OverflowError" in d.reason
                                              for d in out.dead_letters)
    assert {f.window_end_ns for f in out.fims} == {2 * S}  # the next window as usual
