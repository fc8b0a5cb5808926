"""A command's flags as overrides of its component's configuration model (file < env < flags).

Every flag of ``collect``, ``agent``, ``process`` and ``diagnose`` that sets a model field defaults to None, so a
flag not given leaves what the file or the environment said; the one table per command maps each flag's
parameter to its field, and errors name the flag as the user typed it (``--hop``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from flowtracer.plumbing.component_config import Override


def given_flags(fields: Mapping[str, str], values: Mapping[str, Any]) -> list[Override]:
    """Overrides from the flags given: *fields* maps a parameter name to its model field (dotted = nested),
    *values* are the command's parameters; a parameter of None was not given. Each override's origin is the
    flag's longest spelling (``--hop``), read from the running command (outside one, ``--<parameter>``)."""
    ctx = click.get_current_context(silent=True)
    spelled = {p.name: max(p.opts, key=len) for p in ctx.command.params} if ctx is not None else {}
    return [Override(tuple(field.split(".")), values[name], spelled.get(name, f"--{name.replace('_', '-')}"))
            for name, field in fields.items() if values.get(name) is not None]
