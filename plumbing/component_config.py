"""One way to configure a component: a YAML file, then environment variables, then flags (file < env < flags).

Every long-running component (``collector``, ``agent``, ``processor``, ``diagnose``) has one pydantic model; this
module fills it from three layers and validates it once, so a value means the same wherever it was written:

1. the YAML file (``--config``), read and bounded by :mod:`flowtracer.plumbing.config_yaml`; an optional
   top-level ``component: <name>`` key says which component the file is for (``flowtracer config check`` reads
   it) and is refused when it names another component;
2. environment variables ``FLOWTRACER_<COMPONENT>_<FIELD>`` (upper case; ``__`` descends into a nested mapping,
   as pydantic-settings spells it: ``FLOWTRACER_COLLECTOR_KAFKA__BOOTSTRAP``). A value is a string that the
   model converts (``8``, ``true``, ``250ms``); one starting with ``[`` or ``{`` is read as YAML flow
   (``[nsenter, -t, "1", rdma]``);
3. the command's flags, each an :class:`Override` of one field.

A later layer replaces what an earlier one set at the same place; mappings merge key by key. Errors are one line
each and name where the bad value came from: ``file.yaml:12: hop_s: ...``, ``FLOWTRACER_PROCESSOR_HOP_S: hop_s:
...`` or ``--hop: hop_s: ...`` (every error, not just the first). Secrets never pass through here as values:
the models name files or variables that hold them (``password_file``, ``token_file``), so neither argv nor an
error message carries one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, ValidationError

from flowtracer.plumbing.config_yaml import (
    ErrorType,
    LineIndex,
    describe_error,
    fmt_loc,
    located,
    parse_yaml,
    read_text,
)

COMPONENTS = ("collector", "agent", "processor", "diagnose")
"""The components configured this way; ``FLOWTRACER_<NAME>_...`` is each one's environment prefix."""
COMPONENT_KEY = "component"
"""The optional top-level key naming a file's component."""
NESTED = "__"
"""Separates nested field names in an environment variable's name."""

M = TypeVar("M", bound=BaseModel)


class ComponentConfigError(ValueError):
    """A component's configuration is unreadable or invalid; ``str()`` is one line per problem, each naming
    the file and line, the variable or the flag, then the field."""


@dataclass(frozen=True)
class Override:
    """One value set over the file: ``path`` of field names, the value, and ``origin`` (the flag or the
    environment variable) that errors name."""

    path: tuple[str, ...]
    value: Any
    origin: str


def check_bootstrap(v: str) -> str:
    """Kafka bootstrap servers ``host:port[,host:port]``; ValueError naming the part that is not."""
    for part in v.split(","):
        if not re.fullmatch(r"[A-Za-z0-9.\-\[\]:]+:\d{1,5}", part.strip()):
            raise ValueError(f"{part!r} is not host:port")
    return v


Bootstrap = Annotated[str, AfterValidator(check_bootstrap)]
"""A config field holding Kafka bootstrap servers."""


def env_prefix(component: str) -> str:
    """``FLOWTRACER_<COMPONENT>_``."""
    return f"FLOWTRACER_{component.upper()}_"


def env_name(component: str, path: Sequence[str]) -> str:
    """The variable that sets the field at *path*: ``env_name("collector", ("kafka", "bootstrap"))`` ->
    ``FLOWTRACER_COLLECTOR_KAFKA__BOOTSTRAP``."""
    return env_prefix(component) + NESTED.join(p.upper() for p in path)


def env_overrides(component: str, environ: Mapping[str, str], error: ErrorType) -> list[Override]:
    """The overrides the environment gives *component*, in name order (so the outcome never depends on the
    environment's order)."""
    prefix = env_prefix(component)
    out = []
    for name in sorted(environ):
        if not name.startswith(prefix) or len(name) == len(prefix):
            continue
        path = tuple(p.lower() for p in name[len(prefix):].split(NESTED))
        if not all(path):
            raise error(f"{name}: empty field name (nested fields are separated by {NESTED!r})")
        out.append(Override(path, env_value(name, environ[name], error), name))
    return out


def env_value(name: str, text: str, error: ErrorType) -> Any:
    """A variable's value: YAML flow for a list or mapping, else the string (the model converts it)."""
    if not text.lstrip().startswith(("[", "{")):
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or e
        raise error(f"{name}: not a YAML list or mapping: {problem}") from None


def read_component_file(path: Path, component: str | None,
                        error: ErrorType) -> tuple[dict[str, Any], LineIndex, str | None]:
    """(settings, line index, component the file names or None) of a YAML file (see :func:`component_settings`)."""
    return component_settings(read_text(path, error), str(path), component, error)


def component_settings(text: str, source: str, component: str | None,
                       error: ErrorType) -> tuple[dict[str, Any], LineIndex, str | None]:
    """(settings, line index, component named or None) of YAML text; the ``component`` key is removed, and
    refused when it names no component or another one than *component* (None: any)."""
    data, lines = parse_yaml(text, source, error, column=False)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise error(f"{source}: expected a mapping of settings")
    data = dict(data)
    named = data.pop(COMPONENT_KEY, None)
    if named is not None and named not in COMPONENTS:
        raise error(located(source, (COMPONENT_KEY,), f"{named!r} is not one of: {', '.join(COMPONENTS)}", lines))
    if named is not None and component is not None and named != component:
        raise error(located(source, (COMPONENT_KEY,), f"this file configures the {named}, not the {component}",
                            lines))
    return data, lines, named


def merge(data: dict[str, Any], overrides: Sequence[Override]) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """*data* with each override set in turn (later wins), and the origin of each place set."""
    out = _copy(data)
    origins: dict[tuple[str, ...], str] = {}
    for o in overrides:
        node = out
        for i, key in enumerate(o.path[:-1]):
            if not isinstance(node.get(key), dict):
                node[key] = {}
                # what the file had here is gone: errors below it come from the override
                origins[o.path[:i + 1]] = o.origin
            node = node[key]
        node[o.path[-1]] = o.value
        origins = {p: w for p, w in origins.items() if p[:len(o.path)] != o.path}
        origins[o.path] = o.origin
    return out, origins


def _copy(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in data.items()}


def validate(model: type[M], data: dict[str, Any], source: str, lines: LineIndex | None,
             origins: Mapping[tuple[str, ...], str], error: ErrorType, component: str) -> M:
    """``model`` from *data*; on failure *error* with one line per problem, each named by where its value
    came from: the override that set its place, else the file (with the line)."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise error("\n".join(_where(err, source, lines, origins, component) for err in e.errors())) from None


def _where(err: Any, source: str, lines: LineIndex | None, origins: Mapping[tuple[str, ...], str],
           component: str) -> str:
    loc, msg = describe_error(err)
    if err["type"] == "missing" and len(loc) == 1:
        msg += f" (set it in the file, as {env_name(component, [str(loc[0])])} or by its flag)"
    keys = tuple(str(p) for p in loc)
    for n in range(len(keys), 0, -1):
        if keys[:n] in origins:
            return f"{origins[keys[:n]]}: {fmt_loc(loc) or component}: {msg}"
    return located(source or f"{component} settings", loc, msg, lines, root=component)


def load_component(model: type[M], component: str, path: Path | None, flags: Sequence[Override] = (), *,
                   environ: Mapping[str, str] | None = None,
                   error: ErrorType = ComponentConfigError) -> M:
    """The configuration of *component*: the YAML file *path* (None: none), then its environment variables,
    then *flags*; raises *error* naming file and line, variable or flag, and field of every problem."""
    data: dict[str, Any] = {}
    lines: LineIndex | None = None
    if path is not None:
        data, lines, _ = read_component_file(Path(path), component, error)
    env = env_overrides(component, os.environ if environ is None else environ, error)
    merged, origins = merge(data, [*env, *flags])
    return validate(model, merged, str(path) if path is not None else "", lines, origins, error, component)


def parse_component(model: type[M], component: str, text: str, source: str, error: ErrorType) -> M:
    """*component*'s model from YAML text alone (no environment, no flags); errors as :func:`load_component`."""
    data, lines, _ = component_settings(text, source, component, error)
    return validate(model, data, source, lines, {}, error, component)
