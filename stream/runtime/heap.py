"""The worker's garbage-collector settings (stdlib ``gc``): set once, when the process is about to serve.

A window of a 4,096-NIC fabric makes some 100,000 container objects (protobuf outputs and attribution shares, flow
observations, their tuples and lists) that die with the window, freed by reference counting. With CPython's default
thresholds (700 allocations per young collection) they set off about 300 collections per window, and each full one
re-scans everything the process holds for good: the topology, the fabric's indexes, Faust, aiokafka and every
imported module. Measured with ``bench/bench_processor.py`` at 4,096 NICs: 0.34 s of collector time per window of
1.3 s (docs/benchmarks.md, issue 30). Two settings take it out:

* ``gc.freeze()`` once the long-lived state is built moves it to the permanent generation, which no collection
  scans (it is still freed by reference counting; only reference cycles among frozen objects would never be
  collected, and start-up state lives for the process anyway);
* a young threshold of ``YOUNG_THRESHOLD`` allocations: a collection every few windows instead of hundreds per window.
  Objects in reference cycles are still collected, later, and what a window leaves is bounded by this many objects.

See https://docs.python.org/3/library/gc.html#gc.freeze and #gc.set_threshold.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000
"""Allocations (net of deallocations) of tracked objects between young collections (CPython's default: 700)."""
OLDER_THRESHOLDS = (20, 100)
"""Young collections per middle one, middle ones per full one (defaults 10, 10): full collections stay rare."""


def settle_heap() -> None:
    """Freeze what the process holds now (its start-up state) and space collections out (module docstring).

    Call once, when the long-lived state is built: the worker process calls it when its first batch arrives (Faust,
    its tables and the producer are up; ``run_worker``). Calling it again freezes whatever is alive then too, so it
    is not for a loop."""
    gc.collect()  # garbage of the start-up is freed, not frozen
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
