"""Fixtures of the gNMI collector tests."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from flowtracer.collectors.gnmi.counters import native_loader


@pytest.fixture
def native() -> ModuleType:
    """The compiled hot loops. Fails, not skips, when the extension is missing: the install builds it
    (Makefile, CI), and a silently skipped run would hide a broken build."""
    if native_loader.DISABLED:
        pytest.skip("FLOWTRACER_NATIVE=0 turns the compiled loops off")
    assert native_loader.native is not None, (
        "flowtracer.collectors.gnmi.counters.native is not built: `pip install -e .` needs a C compiler (gcc)")
    return native_loader.native


@pytest.fixture(params=["native", "numpy"])
def kernels(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test once on the compiled hot loops and once on numpy (``native_loader.native``)."""
    if request.param == "native":
        request.getfixturevalue("native")
    else:
        monkeypatch.setattr(native_loader, "native", None)
    yield request.param
