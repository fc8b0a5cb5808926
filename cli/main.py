"""The ``flowtracer`` command: one subcommand per stage.

Exit codes: 0 success; 1 runtime failure; 2 bad input (usage, config, topology); 4 no RDMA (agent).
"""

from __future__ import annotations

import click

from flowtracer import __version__
from flowtracer.cmd_agent import agent
from flowtracer.cmd_collect import collect
from flowtracer.cmd_config import config
from flowtracer.cmd_demo import demo
from flowtracer.cmd_diagnose import diagnose
from flowtracer.cmd_export import export
from flowtracer.cmd_path import path
from flowtracer.cmd_process import process
from flowtracer.cmd_sim import sim
from flowtracer.cmd_top import top
from flowtracer.cmd_topology import topology
from flowtracer.cmd_whatif import whatif
from flowtracer.logs import FORMATS, setup_logging


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="flowtracer")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, envvar="FLOWTRACER_LOG_LEVEL", help="Least severe message logged (stderr).")
@click.option("--log-format", type=click.Choice(FORMATS), default="text", show_default=True,
              envvar="FLOWTRACER_LOG_FORMAT", help="text for people, json (one object per line) for log shippers.")
def cli(log_level: str, log_format: str) -> None:
    """Live view of how RoCEv2 training traffic spreads over the equal-cost paths of a fabric.

    Switches (gNMI) and hosts (RDMA) -> collect / agent -> Kafka -> process -> InfluxDB / Kafka.
    """
    setup_logging(log_level, log_format)


cli.add_command(topology)
cli.add_command(process)
cli.add_command(diagnose)
cli.add_command(sim)
cli.add_command(collect)
cli.add_command(agent)
cli.add_command(whatif)
cli.add_command(export)
cli.add_command(demo)
cli.add_command(top)
cli.add_command(path)
cli.add_command(config)


def main() -> None:
    cli(prog_name="flowtracer")
