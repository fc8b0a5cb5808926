"""Kernel data plane tests need root and network namespaces: skip with the reason otherwise."""

from __future__ import annotations

import pytest

from flowtracer.sim.kernel.netns import missing_capability

_MISSING = missing_capability()

needs_netns = pytest.mark.skipif(_MISSING is not None, reason=f"kernel data plane unavailable: {_MISSING}")
