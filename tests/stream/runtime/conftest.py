"""A Processor on a fabric small enough to check by hand, as the runtime tests drive it."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.processor import Processor

PARTITIONS = 2


@pytest.fixture
def proc(tmp_path: Path) -> Processor:
    """4 hosts on 2 leaves under 2 spines, the hash resolver, ``PARTITIONS`` partitions; topology in ``tmp_path``."""
    fabric = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2, name="small4")))
    topo = tmp_path / "fabric.yaml"
    topo.write_text(fabric.topology.to_yaml())
    cfg = ProcessorConfig(topology=topo, kafka="127.0.0.1:9", partitions=PARTITIONS, data_dir=tmp_path)
    return Processor(cfg, fabric, RESOLVERS["hash"])
