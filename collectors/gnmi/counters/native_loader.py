"""Which implementation of the collector's hot loops runs: the compiled ``native`` extension or numpy.

``native`` is the extension module (collectors/gnmi/counters/native.pyx), or None when it was not built (no
C compiler at install time) or ``FLOWTRACER_NATIVE=0`` is set. ``layout`` and
``columns`` read ``native_loader.native`` at call time, so tests can run either.
"""

from __future__ import annotations

import os
from types import ModuleType

#: FLOWTRACER_NATIVE=0: numpy even where the extension is built (to compare, or to rule it out).
DISABLED = os.environ.get("FLOWTRACER_NATIVE", "1").strip() == "0"


def load() -> ModuleType | None:
    """The compiled module, or None (numpy is used)."""
    if DISABLED:
        return None
    try:
        from flowtracer.collectors.gnmi.counters import native as mod  # type: ignore[attr-defined]
    except ImportError:
        return None
    return mod


native: ModuleType | None = load()


def describe() -> str:
    """One line for the start-up log: which loops run."""
    if native is not None:
        return "compiled (Cython) hot loops"
    if DISABLED:
        return "numpy hot loops (FLOWTRACER_NATIVE=0)"
    return "numpy hot loops (the compiled extension is not built: reinstall with a C compiler for ~2x)"
