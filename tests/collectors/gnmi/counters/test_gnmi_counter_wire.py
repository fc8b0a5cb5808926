"""counter_wire encodes repeated InterfaceCounters byte for byte as protobuf serializes them,
including varint edges (0, 127, 128, 2^63, 2^64 - 1), empty Counters, absent and dropped counters."""

from __future__ import annotations

import random

import numpy as np

from flowtracer.collectors.gnmi.counters.assembly import _IF_FIELDS
from flowtracer.collectors.gnmi.counters.columns import _IF_TAGS
from flowtracer.collectors.gnmi.counters.wire import FixedBytes, counter_cells, repeated_messages, scalar_field
from flowtracer.schemas.v1.counters_pb2 import CounterBatch, InterfaceCounters

EDGES = (0, 1, 127, 128, 300, 2**14, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1)


def test_interfaces_encode_like_protobuf() -> None:
    rng = random.Random(3)
    for _ in range(40):
        rows, cols = rng.randint(1, 6), len(_IF_TAGS)

        def pick() -> int:
            return rng.choice(EDGES) if rng.random() < 0.5 else rng.randrange(2**rng.randint(1, 64))

        value = [[pick() for _ in range(cols)] for _ in range(rows)]
        delta = [[pick() for _ in range(cols)] for _ in range(rows)]
        status = [[rng.randrange(5) for _ in range(cols)] for _ in range(rows)]
        present = [[rng.random() < 0.8 for _ in range(cols)] for _ in range(rows)]
        interval = [rng.choice((0, 1, 10**9, 2**40)) for _ in range(rows)]
        names = [f"Ethernet{rng.randrange(1000)}" for _ in range(rows)]
        want = CounterBatch(switch="s")
        for r in range(rows):
            if not any(present[r]):
                continue
            ic = want.interfaces.add(name=names[r], oper_status=1, interval_ns=interval[r], last_clear_ns=-5)
            for j in range(cols):
                if present[r][j]:
                    c = getattr(ic, _IF_FIELDS[j])
                    c.value = value[r][j]
                    if delta[r][j]:
                        c.delta = delta[r][j]
                    if status[r][j]:
                        c.status = status[r][j]  # type: ignore[assignment]
        pre = FixedBytes([InterfaceCounters(name=n, oper_status=1).SerializeToString() for n in names])
        mid = FixedBytes([InterfaceCounters(last_clear_ns=-5).SerializeToString()] * rows)
        p = np.array(present)
        cb, ck, clen = counter_cells(_IF_TAGS, np.array(value, np.uint64), np.array(delta, np.uint64),
                                     np.array(status), p)
        ib, ik, ilen = scalar_field(0x20, np.array(interval, np.uint64))
        got = repeated_messages(0x42, p.any(axis=1), [(pre.bytes, pre.keep), (ib, ik), (mid.bytes, mid.keep), (cb, ck)],
                                pre.lens + ilen + mid.lens + clen)
        assert CounterBatch(switch="s").SerializeToString() + got == want.SerializeToString()
