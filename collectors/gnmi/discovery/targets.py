"""Where discovery finds its switches: a targets file (flowtracer's or gnmic's), or a simulator's ready JSON.

Forms read (YAML, or JSON as gnmic also reads):

* flowtracer's: a ``targets`` list of the collector's ``Target`` model (``config.py``: name, address, port, tls,
  credentials, platform; passwords only from ``password_env`` / ``password_file``), with optional shared
  ``tls`` and ``credentials``::

      tls: {enabled: true, ca_file: ca.pem}
      credentials: {username: ro, password_env: GNMI_PASSWORD}
      targets:
        - {name: leaf01, address: 10.0.0.11}

* gnmic's configuration file: a ``targets`` mapping keyed by address (or name), gnmic's keys per target and at
  the top level (inherited by every target, as gnmic does), e.g. gnmic's own ``config.yaml``::

      username: admin
      skip-verify: true
      targets:
        172.17.0.100: {timeout: 2s}
        172.17.0.101: {username: sros, password: sros, insecure: true}

* gnmic's ``--targets-file``: the same mapping at the top level, no ``targets`` key
  (openconfig/gnmic ``docs/user_guide/targets/target_discovery/file_discovery.md``)::

      10.10.10.10: {username: admin, insecure: true}
      10.10.10.11:

gnmic's keys are mapped where flowtracer has the meaning (``gnmic_targets.py``: address, username/password,
insecure, skip-verify, tls-ca/cert/key, tls-server-name, timeout); all others are named in one warning. A
password written in the file stays there: the target refers to it (``password_file`` + ``password_key``), it is
read when a connection needs it and never copied into the topology or a log. As in gnmic, a target without
``insecure: true`` uses TLS. A flowtracer field (``platform: sonic``, ``tls``, ``credentials``) may be set in a
gnmic entry too.

A simulator's ready JSON (what ``flowtracer sim`` prints, ``{"ready": true, "gnmi": {switch: "host:port"},
"platforms": {switch: platform}}``) gives one plaintext target per switch, of the platform it serves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from flowtracer.collectors.gnmi.config import ConfigError, Target
from flowtracer.collectors.gnmi.discovery.gnmic_targets import (
    KNOWN,
    Unused,
    split_address,
    to_target,
    unused_top_level,
)
from flowtracer.fabric.platform_profiles import DEFAULT_PLATFORM
from flowtracer.plumbing.config_yaml import LineIndex, format_validation_error, parse_yaml, read_text

_OWN_TOP = frozenset({"targets", "tls", "credentials"})


@dataclass
class TargetsFile:
    """The targets of a file, and the warnings to show once (unused gnmic keys, address lists)."""

    targets: list[Target]
    warnings: list[str] = field(default_factory=list)


def _ready_json(data: Any, source: str) -> list[Target] | None:
    if not (isinstance(data, dict) and isinstance(data.get("gnmi"), dict)):
        return None
    platforms = data.get("platforms") if isinstance(data.get("platforms"), dict) else {}
    try:
        return [Target(name=n, address=split_address(a)[0], port=split_address(a)[1] or 57400,
                       platform=platforms.get(n, DEFAULT_PLATFORM)) for n, a in sorted(data["gnmi"].items())]
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, f"{source}: platforms", None)) from None


def _listed(data: dict[str, Any], source: str, lines: LineIndex | None) -> list[Target]:
    """flowtracer's form: a list of Target mappings, shared tls/credentials."""
    out = []
    for i, entry in enumerate(data["targets"]):
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: targets[{i}]: expected a mapping, got {entry!r}")
        entry = dict(entry)
        insecure = entry.pop("insecure", None)
        if insecure is not None:
            entry["tls"] = {**(entry.get("tls") or data.get("tls") or {}), "enabled": not insecure}
        for shared in ("tls", "credentials"):
            if shared not in entry and data.get(shared) is not None:
                entry[shared] = data[shared]
        try:
            out.append(Target.model_validate(entry))
        except ValidationError as e:
            where = lines.where(source, ("targets", i)) if lines is not None else source
            raise ConfigError(format_validation_error(e, f"{where}: targets[{i}]", None)) from None
    return out


def _mapped(entries: dict[Any, Any], defaults: dict[str, Any], base: tuple[str, ...], source: str,
            lines: LineIndex | None, result: TargetsFile) -> list[Target]:
    """gnmic's form: targets keyed by address or name, gnmic's keys, ``defaults`` from the top level."""
    unused, out = Unused(), []
    unused_top_level(defaults, unused)
    for key, fields in entries.items():
        place = f"{'targets.' if base else ''}{key}"
        if fields is None:
            fields = {}
        if not isinstance(fields, dict):
            raise ConfigError(f"{source}: {place}: expected a mapping of target options, got {fields!r}")
        entry = to_target(fields, defaults, (*base, str(key)), (), Path(source), place, unused, result.warnings)
        entry.setdefault("name", str(key))
        if "address" not in entry:
            host, port = split_address(str(key))
            entry["address"] = host
            if port is not None:
                entry.setdefault("port", port)
        if "port" not in entry and "port" in defaults:  # gnmic's --port: for addresses that name none
            entry["port"] = defaults["port"]
        entry.setdefault("platform", defaults.get("platform", DEFAULT_PLATFORM))
        try:
            out.append(Target.model_validate(entry))
        except ValidationError as e:
            where = lines.where(source, (*base, key)) if lines is not None else source
            raise ConfigError(format_validation_error(e, f"{where}: {place}", None)) from None
    if (w := unused.warning(source)) is not None:
        result.warnings.append(w)
    return out


def parse_targets_file(text: str, source: str) -> TargetsFile:
    """Targets of a targets file's or ready JSON's text (``source``: its path, which a password written in it is
    read from); ConfigError is one line naming file and place."""
    lines: LineIndex | None = None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"{source}: not valid JSON: {e}") from None
        if (ready := _ready_json(data, source)) is not None:
            return TargetsFile(ready)
        if isinstance(data, dict) and "ready" in data:
            raise ConfigError(f"{source}: not a simulator's ready JSON with a 'gnmi' mapping (switch -> host:port)")
    else:
        data, lines = parse_yaml(text, source, ConfigError)
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{source}: expected a mapping: 'targets' (a list, or gnmic's mapping by address), "
                          "or gnmic's targets file (targets by address at the top level)")
    result = TargetsFile([])
    if "targets" not in data and "address" in data and all(k in KNOWN or k in _OWN_TOP for k in data):
        # gnmic's address option: a list of addresses sharing the top-level options
        addresses = data["address"] if isinstance(data["address"], list) else [data["address"]]
        data = {**{k: v for k, v in data.items() if k != "address"}, "targets": {str(a): None for a in addresses}}
    if "targets" in data:
        unknown = sorted(str(k) for k in data if k not in _OWN_TOP and k not in KNOWN and k != "platform")
        if unknown:
            raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)}: expected targets, tls, credentials "
                              "or gnmic's configuration keys")
        raw = data["targets"]
        if isinstance(raw, list):
            gnmic_top = sorted(str(k) for k in data if k not in _OWN_TOP)
            if gnmic_top:
                result.warnings.append(f"{source}: top-level key(s) {', '.join(gnmic_top)} apply to gnmic's "
                                       "targets mapping, not to a targets list; ignored")
            result.targets = _listed(data, source, lines)
        elif isinstance(raw, dict) or raw is None:
            defaults = {k: v for k, v in data.items() if k != "targets"}
            result.targets = _mapped(raw or {}, defaults, ("targets",), source, lines, result)
        else:
            raise ConfigError(f"{source}: 'targets' must be a list of targets or a mapping keyed by address:port")
    else:
        bad = [str(k) for k, v in data.items() if v is not None and not isinstance(v, dict)]
        if bad:
            raise ConfigError(f"{source}: expected a mapping with 'targets', or gnmic's targets file (each top-level "
                              f"key a target with a mapping of options); {', '.join(bad[:3])} is not")
        result.targets = _mapped(data, {}, (), source, lines, result)
    names = [t.name for t in result.targets]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{source}: target name(s) {', '.join(dup)} listed twice")
    if not result.targets:
        raise ConfigError(f"{source}: no targets")
    return result


def load_targets(path: Path) -> TargetsFile:
    """Read ``path`` (a targets file or ready JSON); ConfigError on any problem."""
    return parse_targets_file(read_text(path, ConfigError), str(path))


def endpoint(target: Target) -> dict[str, Any]:
    """The topology's ``gnmi`` mapping for a target: address, port, and TLS / credential references if set."""
    out: dict[str, Any] = {"address": target.address, "port": target.port}
    for name in ("tls", "credentials"):
        fields = getattr(target, name).model_dump(mode="json", exclude_defaults=True)
        if fields:
            out[name] = fields
    return out
