"""gNMI paths: XPath-like strings <-> ``gnmi.Path``, with origin and key wildcards.

``parse_path("openconfig:/interfaces/interface[name=*]/state/counters")`` gives a Path with
origin ``openconfig``. pygnmi's ``gnmi_path_generator`` does the parsing (it keeps the origin
and handles ``/`` inside key values such as ``Ethernet1/1``); this module adds the validation it
lacks (unbalanced brackets, empty keys) so a bad path in a config file gets a clear message.
"""

from __future__ import annotations

import re

from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080.gnmi_pb2 import Path

_KEY = re.compile(r"\[([^\[\]=]+)=([^\[\]]*)\]")


def parse_path(text: str) -> Path:
    """Parse ``[origin:]/elem[key=value]/...`` into a ``gnmi.Path``; ValueError says what is wrong."""
    s = text.strip()
    if not s:
        raise ValueError("empty path")
    depth = 0
    for ch in s:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth not in (0, 1):
            raise ValueError(f"unbalanced brackets in path {text!r}")
    if depth:
        raise ValueError(f"unbalanced brackets in path {text!r}")
    for body in re.findall(r"\[([^\]]*)\]", s):
        if not _KEY.fullmatch(f"[{body}]") or not body.split("=", 1)[1]:
            raise ValueError(f"bad key selector [{body}] in path {text!r}: expected [name=value] or [name=*]")
    path = gnmi_path_generator(s)
    if not path.elem and not path.origin:
        raise ValueError(f"path {text!r} has no elements")
    return path


def format_path(path: Path, prefix: Path | None = None) -> str:
    """``origin:/a/b[k=v]`` text of ``prefix + path`` (for logs and error messages)."""
    elems = list(prefix.elem) if prefix is not None else []
    elems += list(path.elem)
    origin = path.origin or (prefix.origin if prefix is not None else "")
    parts = []
    for e in elems:
        keys = "".join(f"[{k}={v}]" for k, v in sorted(e.key.items()))
        parts.append(f"{e.name}{keys}")
    body = "/" + "/".join(parts)
    return f"{origin}:{body}" if origin else body
