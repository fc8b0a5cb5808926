"""Counter samples -> deltas: the table of what a collector must say, and where gnmic/Telegraf-style
naive deltas (``cur - prev`` stored as unsigned) go wrong; each on the per-counter oracle and on the
production rule (``column_deltas.DeltaState``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from delta_oracle import Delta, DeltaTracker, naive_delta

from flowtracer.collectors.gnmi.counters.column_deltas import (
    BASELINE,
    GAP,
    OK,
    RESET,
    STATUS_NAMES,
    WRAPPED,
    DeltaState,
)

S = 1_000_000_000  # 1 s in ns
T0 = 1_767_225_600 * S
U32 = 2**32


class Production:
    """The production rule (one-counter rows of a ``DeltaState``) behind the oracle's ``update``."""

    def __init__(self, counter_bits: int = 64, expected_interval_ns: int = 0, gap_factor: float = 1.5) -> None:
        self.state = DeltaState(1, counter_bits, expected_interval_ns, gap_factor)

    def clear(self) -> None:
        self.state.clear()

    def update(self, key: object, value: int, timestamp_ns: int, last_clear_ns: int = 0, ident: object = None,
               max_rate: float = 0.0) -> Delta | None:
        rows = self.state.rows([key], [ident])
        r = self.state.update(rows, np.array([[value]], np.uint64), np.ones((1, 1), bool), timestamp_ns,
                              np.array([[last_clear_ns]], np.int64), np.array([[max_rate]], np.float64))
        if not r.kept[0, 0]:
            return None
        return Delta(value, int(r.delta[0, 0]), int(r.status[0, 0]), int(r.interval_ns[0]))


@pytest.fixture(params=["oracle", "production"])
def tracker(request: pytest.FixtureRequest) -> type[DeltaTracker] | type[Production]:
    """The per-counter oracle, or the production rule in its clothes."""
    return DeltaTracker if request.param == "oracle" else Production

# (name, counter_bits, [(value, timestamp offset in s, last_clear_ns)], expected [(delta, status) | None])
CASES = [
    ("first sample is a baseline", 64, [(500, 0, 0)], [(0, BASELINE)]),
    ("steady increase", 64, [(500, 0, 0), (800, 1, 0), (800, 2, 0)], [(0, BASELINE), (300, OK), (0, OK)]),
    ("decrease is a reset, never negative", 64, [(10_000, 0, 0), (50, 1, 0), (150, 2, 0)],
     [(0, BASELINE), (0, RESET), (100, OK)]),
    ("clear confirmed by last-clear although the counter grew past its old value", 64,
     [(1_000, 0, T0 - 100 * S), (5_000, 1, T0 + S // 2), (5_600, 2, T0 + S // 2)],
     [(0, BASELINE), (0, RESET), (600, OK)]),
    ("clear reported late does not reset twice", 64,
     [(9_000, 0, T0 - 100 * S), (40, 1, T0 - 100 * S), (90, 2, T0 + S // 2)],
     [(0, BASELINE), (0, RESET), (50, OK)]),
    ("last-clear learnt later (was unknown) is not a reset", 64,
     [(100, 0, 0), (200, 1, T0 - 100 * S)], [(0, BASELINE), (100, OK)]),
    ("counter32 wrap is corrected", 32, [(U32 - 100, 0, 0), (50, 1, 0)], [(0, BASELINE), (150, WRAPPED)]),
    ("counter32 decrease with a confirmed clear is a reset", 32,
     [(U32 - 100, 0, T0 - 100 * S), (50, 1, T0 + S // 2)], [(0, BASELINE), (0, RESET)]),
    ("64-bit counters do not wrap: a decrease is a reset", 64, [(U32 - 100, 0, 0), (50, 1, 0)],
     [(0, BASELINE), (0, RESET)]),
    ("duplicate timestamp dropped", 64, [(100, 0, 0), (100, 0, 0), (300, 1, 0)], [(0, BASELINE), None, (200, OK)]),
    ("out of order dropped", 64, [(100, 0, 0), (300, 2, 0), (200, 1, 0), (400, 3, 0)],
     [(0, BASELINE), (200, GAP), None, (100, OK)]),
    ("gap flagged, delta still exact", 64, [(100, 0, 0), (700, 3, 0)], [(0, BASELINE), (600, GAP)]),
]


@pytest.mark.parametrize(("name", "bits", "samples", "expected"), CASES, ids=[c[0] for c in CASES])
def test_delta_table(tracker: type[DeltaTracker] | type[Production], name: str, bits: int, samples: list[tuple[int, int, int]],
                     expected: list[tuple[int, int] | None]) -> None:
    tr = tracker(bits, expected_interval_ns=S, gap_factor=1.5)
    got = []
    for value, t, clear in samples:
        d = tr.update("k", value, T0 + t * S, clear)
        got.append(None if d is None else (d.delta, d.status))
    assert [(x[0], STATUS_NAMES[x[1]]) if x else None for x in got] == \
        [(x[0], STATUS_NAMES[x[1]]) if x else None for x in expected]


def test_implausible_wrap_is_a_reset(tracker: type[DeltaTracker] | type[Production]) -> None:
    """A 32-bit 'wrap' that would need more than line rate is a reset (e.g. a reboot we missed)."""
    tr = tracker(32, expected_interval_ns=S)
    tr.update("k", 1_000, T0)
    d = tr.update("k", 10, T0 + S, max_rate=100 / S)  # at most 100 units per second
    assert d is not None and (d.delta, d.status) == (0, RESET)


def test_identity_change_is_a_new_baseline(tracker: type[DeltaTracker] | type[Production]) -> None:
    tr = tracker()
    tr.update("nh", 5_000, T0, ident=7)
    d = tr.update("nh", 6_000, T0 + S, ident=12)  # same egress and IP, re-created under a new index
    assert d is not None and d.status == BASELINE and d.delta == 0


def test_clear_forgets_everything(tracker: type[DeltaTracker] | type[Production]) -> None:
    tr = tracker()
    tr.update("a", 1, T0)
    tr.clear()
    d = tr.update("a", 2, T0 + S)
    assert d is not None and d.status == BASELINE


def test_naive_deltas_are_wrong_where_ours_are_right(tracker: type[DeltaTracker] | type[Production]) -> None:
    """The counter-reset story on one interface: 3 samples, a clear between the 2nd and the 3rd
    after which the counter grew past its old value, then a reboot (counter restarts at 0).

    gnmic and Telegraf export absolute values; their consumers' ``non_negative_derivative`` /
    unsigned ``cur - prev`` gives a spike of ~2^64 on the reboot and silently under-counts the
    clear. Ours: exact where knowable, flagged where not, never negative, never a spike.
    """
    clear_old, clear_new = T0 - 3600 * S, T0 + 2 * S + S // 2
    samples = [  # (value, t, last_clear): truth is in the comment
        (1_000_000, 0, clear_old),
        (1_500_000, 1, clear_old),   # +500_000
        (1_700_000, 2, clear_old),   # +200_000
        (1_900_000, 3, clear_new),   # cleared at 2.5 s, then 1_900_000 counted since: truth >= 1_900_000
        (120, 4, clear_new),         # reboot, restarted at 0: truth unknown (>= 120)
        (400, 5, clear_new),         # +280
    ]
    naive = [naive_delta(a[0], b[0]) for a, b in itertools.pairwise(samples)]
    assert naive[2] == 200_000  # under-counts: at least 1_900_000 bytes went through
    assert naive[3] > 2**63  # the spike a dashboard shows as 16 EiB/s
    tr = tracker(64, expected_interval_ns=S)
    ours = [tr.update("in-octets", v, T0 + t * S, c) for v, t, c in samples]
    assert all(d is not None for d in ours)
    assert [(d.delta, STATUS_NAMES[d.status]) for d in ours if d is not None] == [
        (0, "baseline"), (500_000, "ok"), (200_000, "ok"), (0, "reset"), (0, "reset"), (280, "ok")]
    assert all(0 <= d.delta < 2**40 for d in ours if d is not None)
