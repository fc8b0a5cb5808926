"""The exit codes every ``flowtracer`` subcommand uses (README: "Exit codes"), and the one-line exit."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

EXIT_OK = 0
EXIT_FAILURE = 1  # a runtime failure
EXIT_BAD_INPUT = 2  # usage, config or topology: one line naming the file, place and problem
EXIT_NO_RDMA = 4  # host agent: no RDMA devices or no `rdma` tool
EXIT_INTERRUPTED_AT_START = 130  # Ctrl-C before the pipeline was up (128 + SIGINT)


def exit_with(prog: str, code: int, msg: str) -> NoReturn:
    """``<prog>: <msg>`` on stderr, one line per line of *msg* (a config names each problem on its own line),
    then exit with ``code``."""
    for line in msg.splitlines() or [""]:
        click.echo(f"{prog}: {line}", err=True)
    sys.exit(code)
