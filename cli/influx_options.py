"""The InfluxDB sink options of the commands that write points (``process``, ``diagnose``): one spelling of each."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def influx_options(f: F) -> F:
    """``--influx-url``, ``--influx-org``, ``--influx-bucket``, ``--influx-token-file`` (parameters of those names);
    the token never comes from argv: the file, else ``FLOWTRACER_INFLUX_TOKEN`` / ``INFLUX_TOKEN``. Each is None
    when not given: a flag overrides the component's ``influx:`` settings only when given (its default is the
    model's)."""
    for option in reversed((
        click.option("--influx-url", default=None,
                     help="InfluxDB 2 URL; the token comes from $INFLUX_TOKEN or --influx-token-file."),
        click.option("--influx-org", default=None, help="InfluxDB organization [default: flowtracer]."),
        click.option("--influx-bucket", default=None, help="InfluxDB bucket [default: flowtracer]."),
        click.option("--influx-token-file", type=click.Path(path_type=Path), default=None,
                     help="File holding the InfluxDB token."),
    )):
        f = option(f)
    return f
