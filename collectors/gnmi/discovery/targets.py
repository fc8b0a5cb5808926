"""Where discovery finds its switches: a small targets file, or a running simulator's ready JSON.

Targets file (YAML), either form, each target the collector's ``Target`` model (``config.py``: name,
address, port, tls, credentials; passwords only from ``password_env`` / ``password_file``)::

    tls: {enabled: true, ca_file: ca.pem}        # optional, for every target that sets none
    credentials: {username: ro, password_env: GNMI_PASSWORD}
    targets:
      - {name: leaf01, address: 10.0.0.11}
      - {name: spine01, address: 10.0.0.1, port: 6030}

or keyed by ``address:port`` as gnmic's targets file is, with gnmic's ``insecure: true`` meaning
plaintext (``tls.enabled: false``)::

    targets:
      10.0.0.11:57400: {name: leaf01, insecure: true}

Each target may name its vendor profile (``platform: sonic``; default ``openconfig``), through which
discovery reads it. A simulator's ready JSON (what ``flowtracer sim`` prints, ``{"ready": true, "gnmi":
{switch: "host:port"}, "platforms": {switch: platform}}``) gives one plaintext target per switch, of the
platform it serves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from flowtracer.collectors.gnmi.config import ConfigError, Target
from flowtracer.schemas.config_yaml import format_validation_error, parse_yaml, read_text
from flowtracer.schemas.platform_profiles import DEFAULT_PLATFORM


def _split(address: str) -> tuple[str, int | None]:
    """``host:port``, ``[v6]:port`` or a bare host."""
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    host, sep, port = address.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host, int(port)
    return address, None


def _entries(raw: Any, source: str) -> list[dict[str, Any]]:
    if isinstance(raw, list):
        return [dict(e) if isinstance(e, dict) else {"_bad": e} for e in raw]
    if isinstance(raw, dict):
        out = []
        for key, fields in raw.items():
            entry = dict(fields or {}) if isinstance(fields, dict) else {"_bad": fields}
            host, port = _split(str(key))
            entry.setdefault("address", host)
            if port is not None:
                entry.setdefault("port", port)
            entry.setdefault("name", str(key))
            out.append(entry)
        return out
    raise ConfigError(f"{source}: 'targets' must be a list of targets or a mapping keyed by address:port")


def parse_targets(text: str, source: str) -> list[Target]:
    """Targets from a targets file's or ready JSON's text; ConfigError is one line naming file and place."""
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"{source}: not valid JSON: {e}") from None
        if isinstance(data, dict) and isinstance(data.get("gnmi"), dict):
            platforms = data.get("platforms") if isinstance(data.get("platforms"), dict) else {}
            try:
                return [Target(name=n, address=_split(a)[0], port=_split(a)[1] or 57400,
                               platform=platforms.get(n, DEFAULT_PLATFORM)) for n, a in sorted(data["gnmi"].items())]
            except ValidationError as e:
                raise ConfigError(format_validation_error(e, f"{source}: platforms", None)) from None
        raise ConfigError(f"{source}: a JSON targets file must be a simulator's ready JSON with a 'gnmi' mapping")
    data, lines = parse_yaml(text, source, ConfigError)
    listed = isinstance(data, dict) and isinstance(data.get("targets"), list)
    if not isinstance(data, dict) or "targets" not in data:
        raise ConfigError(f"{source}: expected a mapping with 'targets'")
    unknown = sorted(set(data) - {"targets", "tls", "credentials"})
    if unknown:
        raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)}: expected targets, tls, credentials")
    out: list[Target] = []
    for i, entry in enumerate(_entries(data["targets"], source)):
        if "_bad" in entry:
            raise ConfigError(f"{source}: targets[{i}]: expected a mapping, got {entry['_bad']!r}")
        insecure = entry.pop("insecure", None)
        if insecure is not None:
            entry["tls"] = {**(entry.get("tls") or data.get("tls") or {}), "enabled": not insecure}
        for shared in ("tls", "credentials"):
            if shared not in entry and data.get(shared) is not None:
                entry[shared] = data[shared]
        try:
            out.append(Target.model_validate(entry))
        except ValidationError as e:
            where = lines.where(source, ("targets", i)) if listed else source
            raise ConfigError(format_validation_error(e, f"{where}: targets[{i}]", None)) from None
    names = [t.name for t in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{source}: target name(s) {', '.join(dup)} listed twice")
    if not out:
        raise ConfigError(f"{source}: no targets")
    return out


def load_targets(path: Path) -> list[Target]:
    """Read ``path`` (targets YAML or ready JSON); ConfigError on any problem."""
    return parse_targets(read_text(path, ConfigError), str(path))


def endpoint(target: Target) -> dict[str, Any]:
    """The topology's ``gnmi`` mapping for a target: address, port, and TLS / credential references if set."""
    out: dict[str, Any] = {"address": target.address, "port": target.port}
    for name in ("tls", "credentials"):
        fields = getattr(target, name).model_dump(mode="json", exclude_defaults=True)
        if fields:
            out[name] = fields
    return out
