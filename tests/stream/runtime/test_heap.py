"""The worker's collector settings: start-up state frozen out of every collection, young collections spaced out."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from flowtracer.stream.runtime.heap import OLDER_THRESHOLDS, YOUNG_THRESHOLD, settle_heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """The test process's collector as it was: thresholds back, frozen objects back in the generations."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class StartupState:
    """Stands for the fabric and the stages' tables: container objects alive when the worker settles."""


def test_settle_freezes_what_is_alive_and_spaces_collections(restored_gc: None) -> None:
    state = [StartupState() for _ in range(100)]
    assert any(o is state for o in gc.get_objects())  # tracked in a generation: full collections scan it
    settle_heap()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    assert gc.get_freeze_count() >= len(state)
    assert not any(o is state for o in gc.get_objects())  # in the permanent generation: no collection scans it
    later = [StartupState()]  # made after settling: collected as usual
    assert any(o is later for o in gc.get_objects())


def test_cycles_made_after_settling_are_still_collected(restored_gc: None) -> None:
    settle_heap()
    node = StartupState()
    node.self = node  # type: ignore[attr-defined]  # a reference cycle: reference counting cannot free it
    gone = weakref.ref(node)
    del node
    assert gone() is not None
    gc.collect()
    assert gone() is None
