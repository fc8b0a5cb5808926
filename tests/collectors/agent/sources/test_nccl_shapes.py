"""Shapes of lines the NCCL reader does not understand: one shape per format, whatever hosts, numbers and addresses
fill it in; each new shape logged once, at a bounded rate; a bounded number of shapes."""

from __future__ import annotations

import logging
import random

import pytest

from flowtracer.collectors.agent.sources.nccl_log import NcclLog
from flowtracer.collectors.agent.sources.nccl_shapes import OTHER_SHAPE, ShapeCounter, merge_counts, shape_of

# A QP line of a format no NCCL printed (qpnum), as many hosts, processes and QPs would print it.
FUTURE = "{host}:{pid}:{tid} [{dev}] NCCL INFO NET/IB: NCCL Dev {d} IbDev {d} Port 1 qpnum {q} mtu 5 GID 3 ({g}) " \
         "fifoRkey={k:#x} fifoLkey={k:#x}"


def future_line(rng: random.Random) -> str:
    return FUTURE.format(host=rng.choice(["node01", "gpu-a17", "dgx-h100-042"]), pid=rng.randrange(1, 4_000_000),
                         tid=rng.randrange(1, 4_000_000), dev=rng.randrange(8), d=rng.randrange(16),
                         q=rng.randrange(1 << 24), g=f"0/{rng.randrange(1 << 63):X}", k=rng.randrange(1 << 32))


def test_one_unknown_format_is_one_shape_however_it_is_filled_in() -> None:
    rng = random.Random(7)
    log = NcclLog()
    log.feed([future_line(rng) for _ in range(500)])
    assert log.unknown == log.malformed == 500
    assert log.shapes.counts == {
        "qp|NET/IB: NCCL Dev # IbDev # Port # qpnum # mtu # GID # (#/#) fifoRkey=<hex> fifoLkey=<hex>": 500}


def test_masks() -> None:
    assert shape_of("line", "gpu-a17:4242:77 [3] NCCL INFO comm 0x7f00aa001000 from 10.0.0.7 gid 1064A8C0FFFF0000") \
        == "line|<nccl> NCCL INFO comm <hex> from <ip> gid #"
    assert len(shape_of("channel", "x" * 1000)) == 160


def test_each_new_shape_is_logged_once_and_at_most_a_burst_at_a_time(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    counter = ShapeCounter(log_burst=2, log_every_s=10.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING)
    for i in range(5):
        for _ in range(3):
            counter.add(f"qp|shape {'x' * i}", f"line {i}", f"f.log:{i}")
    assert len(caplog.records) == 2 and counter.held_back == 3  # 5 new shapes, burst of 2
    now[0] = 10.0  # one more may be logged; it names those held back
    counter.add("qp|shape 6", "line 6", "f.log:6")
    assert len(caplog.records) == 3 and "3 more new shapes were not logged" in caplog.records[-1].getMessage()
    assert "f.log:6" in caplog.records[-1].getMessage() and counter.held_back == 0
    assert sum(counter.counts.values()) == 16 and all(n == 3 for s, n in counter.counts.items() if s != "qp|shape 6")


def test_shapes_are_bounded() -> None:
    counter = ShapeCounter(max_shapes=3)
    for i in range(10):
        counter.add(f"qp|{i}", "", "")
    assert len(counter.counts) == 4 and counter.counts[OTHER_SHAPE] == 7


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_shapes and log_burst must be at least 1"):
        ShapeCounter(max_shapes=0)


def test_a_shape_keeps_its_label_across_windows_so_the_agents_counter_never_counts_it_twice() -> None:
    """The agent exports the hosts' merged counts as one counter: once a shape has a label of its own it keeps it,
    whatever order the hosts are merged in later, and the labels stay bounded."""
    a, b = ShapeCounter(), ShapeCounter()
    for s in ("s1", "s2"):
        a.add(s, s, "a.log:1")
    b.add("s3", "s3", "b.log:1")
    labelled: set[str] = set()
    first = merge_counts([a, b], max_shapes=3, labelled=labelled)
    assert first == {"s1": 1, "s2": 1, OTHER_SHAPE: 1} and labelled == {"s1", "s2"}
    b.add("s3", "s3", "b.log:2")
    a.add("s2", "s2", "a.log:2")
    later = merge_counts([b, a], max_shapes=3, labelled=labelled)  # b first: without the kept set s3 took a label
    assert later == {OTHER_SHAPE: 2, "s1": 1, "s2": 2} and labelled == {"s1", "s2"}
    assert all(later[k] >= first[k] for k in first)  # a cumulative counter only goes up
