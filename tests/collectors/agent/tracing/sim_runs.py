"""A SimRunner on the fluid model for tracing tests: started, its ready JSON written, stopped."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from flowtracer.fabric.topology import Topology
from flowtracer.sim.fabric.workload import Workload
from flowtracer.sim.runner import RunnerOptions, SimRunner


@contextmanager
def running_sim(topo: Topology, wl: Workload, out: Path,
                ready_when: Callable[[SimRunner], bool]) -> Iterator[tuple[SimRunner, Path]]:
    """The runner (real gNMI servers and trace responder) and its ready JSON, once ``ready_when`` holds."""
    runner = SimRunner(topo, wl, out, RunnerOptions(tick_s=0.1, gnmi_ports="free", ground_truth=False,
                                                     host_views=False))
    ready = runner.start()
    try:
        (out / "ready.json").write_text(json.dumps(ready))
        assert runner.engine is not None
        while not ready_when(runner):
            runner.wait(0.1)
        yield runner, out / "ready.json"
    finally:
        runner.stop()
