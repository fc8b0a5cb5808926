"""Fixtures of the gNMI collector tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flowtracer.collectors.gnmi import native_loader


@pytest.fixture(params=["native", "numpy"])
def kernels(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test once on the compiled hot loops and once on numpy (``native_loader.native``).

    The compiled run fails, not skips, when the extension is missing: the install builds it
    (Makefile, CI), and a silently skipped run would hide a broken build.
    """
    if request.param == "native":
        if native_loader.DISABLED:
            pytest.skip("FLOWTRACER_NATIVE=0 turns the compiled loops off")
        assert native_loader.native is not None, (
            "flowtracer.collectors.gnmi.native is not built: `pip install -e .` needs a C compiler (gcc)")
    else:
        monkeypatch.setattr(native_loader, "native", None)
    yield request.param
