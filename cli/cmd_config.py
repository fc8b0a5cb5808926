"""``flowtracer config check FILE``: validate a component's configuration file the way the component reads it."""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import BaseModel

from flowtracer.exit_codes import EXIT_BAD_INPUT, exit_with
from flowtracer.plumbing.component_config import (
    COMPONENT_KEY,
    COMPONENTS,
    ComponentConfigError,
    load_component,
    read_component_file,
)

PROG = "flowtracer config check"


def component_model(component: str) -> type[BaseModel]:
    """The configuration model of *component* (imported on demand: each pulls in its stage)."""
    if component == "collector":
        from flowtracer.collectors.gnmi.config import CollectorConfig

        return CollectorConfig
    if component == "agent":
        from flowtracer.collectors.agent.config import AgentConfig

        return AgentConfig
    if component == "processor":
        from flowtracer.stream.runtime.config import ProcessorConfig

        return ProcessorConfig
    from flowtracer.stream.diagnosis.config import DiagnoseSettings

    return DiagnoseSettings


@click.group("config")
def config() -> None:
    """Components' configuration files (docs/configuration.md)."""


@config.command("check")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--component", type=click.Choice(COMPONENTS), default=None,
              help=f"The component FILE configures [default: its top-level `{COMPONENT_KEY}:` key].")
def check(file: Path, component: str | None) -> None:
    """Validate FILE as the component reads it: the file, then its FLOWTRACER_<COMPONENT>_* variables (flags are
    not applied). Prints one line per problem naming the file and line (or the variable), the field and what is
    wrong, and exits 2; exits 0 when the component would accept it."""
    try:
        _, _, named = read_component_file(file, component, ComponentConfigError)
        component = component or named
        if component is None:
            raise ComponentConfigError(f"{file}: which component does it configure? Add a top-level "
                                       f"`{COMPONENT_KEY}: <{'|'.join(COMPONENTS)}>` key or give --component")
        load_component(component_model(component), component, file)
    except ComponentConfigError as e:
        exit_with(PROG, EXIT_BAD_INPUT, str(e))
    click.echo(f"{file}: a valid {component} configuration")
