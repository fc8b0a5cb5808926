"""The 16-host fabric discovery tests run against: generated, edited, written and served by the simulator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from flowtracer.fabric.topology import load_topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.main import cli
from flowtracer.sim.fabric.workload import Workload
from flowtracer.sim.runner import RunnerOptions, SimRunner

SIM_LOGGER = " flowtracer.sim."
"""The simulator runs in the tests' process: its log lines (an engine behind real time on a busy machine) reach the
stderr a command's logging writes to, but are not the command's output."""


def run(*args: str) -> tuple[int, str, str]:
    """``flowtracer *args`` in this process: exit code, stdout, and stderr without the simulator's log lines."""
    r = CliRunner().invoke(cli, list(args))
    err = "".join(line for line in r.stderr.splitlines(keepends=True) if SIM_LOGGER not in line)
    return r.exit_code, r.stdout, err


@contextmanager
def served_fabric(d: Path, edit: Callable[[dict[str, Any]], None], host_views: bool = False
                  ) -> Iterator[tuple[Path, dict[str, Any], SimRunner]]:
    """The generated 16-host fabric ``ft16`` after ``edit``, written to ``d/generated.yaml`` and served: yields
    that file, the ready description and the runner (stopped on exit)."""
    data = yaml.safe_load(generate(FabricSpec(hosts=16, leaves=4, spines=2, name="ft16")).to_yaml())
    edit(data)
    generated = d / "generated.yaml"
    generated.write_text(yaml.safe_dump(data))
    opts = RunnerOptions(tick_s=0.25, gnmi_ports="free", ground_truth=False, host_views=host_views,
                         trace_responder=False)
    runner = SimRunner(load_topology(generated), Workload(), d / "sim", opts)
    try:
        yield generated, runner.start(), runner
    finally:
        runner.stop()
